"""In-process discovery: the gateway of the same replica finds this replica's bridge through
core's registry (`loom_core.inproc`, name "assistant"), so the gateway imports no plane.
A cluster's gateway reaches the bridge over HTTP instead (LOOM_ASSISTANT_BRIDGE_URL).
"""

from __future__ import annotations

from typing import Any

from loom_core import inproc

NAME = "assistant"


def register(replica: object, plane: Any) -> None:
    inproc.register(NAME, replica, plane)


def unregister(replica: object) -> None:
    inproc.unregister(NAME, replica)


def plane_for(replica: object | None) -> Any | None:
    """The bridge of `replica`; with no replica named, the process's only bridge, if one."""
    return inproc.find(NAME, replica)

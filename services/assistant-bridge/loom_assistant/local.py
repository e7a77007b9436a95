"""In-process discovery: the gateway of the same replica finds this replica's bridge.

One process may hold several replicas (tests, replica proofs), and they share the catalog, so a
replica is named by its own NATS connection object (`runtime.bus`), which the gateway of the
same replica also holds (its readiness check). A cluster's gateway reaches the bridge over HTTP
instead (LOOM_ASSISTANT_BRIDGE_URL).
"""

from __future__ import annotations

from typing import Any

_BY_REPLICA: dict[int, Any] = {}


def register(replica: object, plane: Any) -> None:
    _BY_REPLICA[id(replica)] = plane


def unregister(replica: object) -> None:
    _BY_REPLICA.pop(id(replica), None)


def plane_for(replica: object | None) -> Any | None:
    """The bridge of `replica`; with no replica named, the process's only bridge, if one."""
    if replica is not None:
        return _BY_REPLICA.get(id(replica))
    return next(iter(_BY_REPLICA.values())) if len(_BY_REPLICA) == 1 else None

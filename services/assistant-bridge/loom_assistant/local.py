"""In-process discovery: the gateway of the same replica finds this replica's bridge by its
runtime's catalog object (one per replica, shared by the gateway's relay). A cluster's gateway
reaches the bridge over HTTP instead (LOOM_ASSISTANT_BRIDGE_URL)."""

from __future__ import annotations

from typing import Any

_BY_CATALOG: dict[int, Any] = {}


def register(catalog: object, plane: Any) -> None:
    _BY_CATALOG[id(catalog)] = plane


def unregister(catalog: object) -> None:
    _BY_CATALOG.pop(id(catalog), None)


def plane_for(catalog: object) -> Any | None:
    return _BY_CATALOG.get(id(catalog))

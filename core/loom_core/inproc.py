"""In-process discovery: one part of a replica finds another part of the same replica.

One process may hold several replicas (tests, replica proofs), and they share the catalog, so a
replica is named by its own NATS connection object (`runtime.bus`), which every part of the
replica holds. A part registers under a name (the assistant plane registers "assistant" so the
gateway of its replica hands it the chat route); the other finds it by name and replica, without
importing the registering plane's package. Across processes parts reach each other over the
network instead.
"""

from __future__ import annotations

_BY_REPLICA: dict[tuple[str, int], object] = {}


def register(name: str, replica: object, part: object) -> None:
    _BY_REPLICA[(name, id(replica))] = part


def unregister(name: str, replica: object) -> None:
    _BY_REPLICA.pop((name, id(replica)), None)


def find(name: str, replica: object | None) -> object | None:
    """The part `name` of `replica`; with no replica named, the process's only such part, if one."""
    if replica is not None:
        return _BY_REPLICA.get((name, id(replica)))
    parts = [part for (n, _), part in _BY_REPLICA.items() if n == name]
    return parts[0] if len(parts) == 1 else None

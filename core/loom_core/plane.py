"""The plane template's shared pieces: binding a plane's handler methods to its ops, and
`HandlersPlane`, the plane that is those handlers and its tables alone.

Every plane has `handlers.py` with one method per RPC of its `.proto`, named after the RPC in
snake_case (`CreateTask` -> `create_task`). `bind_handlers` maps each op of the plane to that
method through the catalog's `OpSpec`, so there is no hand-kept table, and it refuses a plane
whose proto has an op without a handler or whose handlers class has a public method that
serves no op.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypedDict

from google.protobuf.message import Message

from .catalog import Catalog
from .chain import CallContext
from .store import Migration

Handler = Callable[[Any, CallContext], Awaitable[Message]]


class HealthCheck(TypedDict, total=False):
    """One named check of a plane's optional `async def health() -> dict[str, HealthCheck]`
    hook, as the gateway's /v1/health shows it."""

    ok: bool
    # A required check that is not ok makes the process not ready; unset means required.
    required: bool
    # False: the check does not apply here (analysis on the embedded store), neither ok nor failing.
    applicable: bool
    reason: str
    # What an operator must do (assistant_service_failing).
    failure: str


_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def handler_name(rpc_method: str) -> str:
    """`CreateTask` -> `create_task`: the handler method an RPC is bound to."""
    return _CAMEL_BOUNDARY.sub("_", rpc_method).lower()


def bind_handlers(catalog: Catalog, plane: str, handlers: object) -> dict[str, Handler]:
    """op name -> the bound coroutine method of `handlers` named after the op's RPC."""
    ops = catalog.for_plane(plane)
    bound: dict[str, Handler] = {}
    missing: list[str] = []
    for op in ops:
        fn = getattr(handlers, handler_name(op.method), None)
        if fn is None or not inspect.iscoroutinefunction(fn):
            missing.append(f"{op.name} ({op.method} -> {handler_name(op.method)})")
            continue
        bound[op.name] = fn
    if missing:
        raise RuntimeError(f"plane {plane}: no handler for {', '.join(missing)}")
    wanted = {handler_name(op.method) for op in ops}
    stray = sorted(
        name
        for name, member in inspect.getmembers(type(handlers), inspect.iscoroutinefunction)
        if not name.startswith("_") and name not in wanted
    )
    if stray:
        raise RuntimeError(f"plane {plane}: handler methods serve no op: {', '.join(stray)}")
    return bound


class HandlersPlane:
    """A plane whose ops are its handlers' methods and that runs nothing beside them (no bus
    reader, nothing to start or stop): a subclass names itself and its tables, and overrides
    `start`/`stop` when it does run something (runtime.Plane is the shape the runner takes)."""

    name: str
    migrations: Sequence[Migration] = ()

    def __init__(self, catalog: Catalog, handlers: object) -> None:
        self._catalog = catalog
        self._handlers = handlers

    def handlers(self) -> dict[str, Handler]:
        return bind_handlers(self._catalog, self.name, self._handlers)

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

"""How the plane's operator commands (`loom decisions extract`, `loom code index`) reach the
plane: the serving `loom up` over its admin socket, else the plane run in this process against a
configured cluster (LOOM_CLICKHOUSE_URL and LOOM_NATS_URL), else a message saying how to get one."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from loom_core.data_dir import ADMIN_SOCKET
from loom_core.settings import Settings

if TYPE_CHECKING:  # the plane is imported only when a command runs it here (`loom` loads every command)
    from .plane import DecisionsPlane


class NotReached(Exception):
    """No plane answered; the message says why (the command prefixes its own name)."""


async def call_plane(
    settings: Settings, route: str, body: dict[str, Any], name: str, in_process: Callable[[DecisionsPlane], Awaitable[dict[str, Any]]]
) -> dict[str, Any]:
    """The plane's JSON answer to `body` at admin `route`, or `in_process(plane)` on a replica of
    the plane started here (named `name`) when Loom runs as a cluster."""
    sock = settings.data_dir / ADMIN_SOCKET
    if not settings.clickhouse_url and sock.exists():
        import httpx  # here: `loom --help` and every other command load this module to build their parser

        try:
            async with httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(uds=str(sock)), base_url="http://loom") as client:
                r = await client.post(route, json=body, timeout=None)
        except httpx.TransportError as exc:
            raise NotReached(f"the server on {settings.data_dir} did not answer on its admin socket") from exc
        if r.status_code != 200:
            raise NotReached(f"the server answered {r.status_code}")
        return dict(r.json())
    if settings.clickhouse_url and settings.nats_url:
        return await _in_process(settings, name, in_process)
    raise NotReached(
        f"no Loom is running on {settings.data_dir} (start `loom up`), and no cluster is configured (LOOM_CLICKHOUSE_URL and LOOM_NATS_URL)"
    )


async def _in_process(settings: Settings, name: str, run: Callable[[DecisionsPlane], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
    from loom_core.runtime import Runtime
    from loom_core.store import run_migrations

    from .plane import DecisionsPlane

    runtime = await Runtime.start(settings, name=name)
    plane = DecisionsPlane(runtime)
    try:
        await run_migrations(runtime.store, plane.migrations)
        answer = await run(plane)
        await runtime.ledger.flush()
        return answer
    finally:
        await plane.stop()
        await runtime.stop()

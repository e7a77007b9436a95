"""Cluster mode (`loom serve`): what a process may serve, and the gateway that relays alone.

The processes of a cluster share the store and the bus. With a ClickHouse server
(LOOM_CLICKHOUSE_URL) any number of processes serve any planes. Without one, the store is chDB
under LOOM_DATA_DIR, which one process at a time may open: exactly one `loom serve --planes …`
owns it and serves every plane that needs the store, and the gateway runs in processes of its
own with no store at all. A gateway-only process (`loom serve --gateway`, no planes) holds no
store, no bus and no plane logic: it translates REST and MCP to gRPC and relays every op to the
plane named in LOOM_PLANE_ADDRESSES, whose op chain authenticates, gates and ledgers it there.
Its readiness is its planes' gRPC health (grpc.health.v1).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from loom_core.catalog import load_catalog
from loom_core.errors import ErrorCode, Unavailable
from loom_core.settings import Settings
from loom_gateway import Relay, create_app

from .http import HttpServer

log = logging.getLogger(__name__)

HEALTH_TIMEOUT_SECONDS = 2.0


def plane_addresses(settings: Settings) -> dict[str, str]:
    """LOOM_PLANE_ADDRESSES as plane -> host:port."""
    pairs = (pair.split("=", 1) for pair in settings.plane_addresses.split(",") if "=" in pair)
    return {name.strip(): addr.strip() for name, addr in pairs if name.strip() and addr.strip()}


def serve_problem(settings: Settings, planes: set[str], gateway: bool) -> str | None:
    """Why `loom serve` with these arguments cannot run, or None."""
    if not planes and not gateway:
        return "loom serve: name --planes, --gateway or both"
    if planes and not settings.nats_url:
        return "loom serve --planes needs LOOM_NATS_URL (the cluster's NATS; `loom up` runs one process with its own)"
    if gateway and not planes and not plane_addresses(settings):
        return "loom serve --gateway with no planes relays every op: set LOOM_PLANE_ADDRESSES (plane=host:port,…)"
    if settings.clickhouse_cluster and not settings.clickhouse_url:
        return "LOOM_CLICKHOUSE_CLUSTER needs LOOM_CLICKHOUSE_URL"
    return None


async def plane_health(address: str, within: float = HEALTH_TIMEOUT_SECONDS) -> None:
    """grpc.health.v1 Check of one plane's server; raises Unavailable unless it is SERVING."""
    async with grpc.aio.insecure_channel(address) as channel:
        try:
            # types-grpcio-health-checking declares HealthStub without its methods (Check is there at run time).
            check = health_pb2_grpc.HealthStub(channel).Check  # type: ignore[attr-defined]
            reply = await check(health_pb2.HealthCheckRequest(service=""), timeout=within)
        except grpc.aio.AioRpcError as exc:
            raise Unavailable(ErrorCode.BACKEND_UNAVAILABLE, f"plane at {address} did not answer") from exc
    if reply.status != health_pb2.HealthCheckResponse.SERVING:
        raise Unavailable(ErrorCode.BACKEND_UNAVAILABLE, f"plane at {address} is not serving")


@dataclass
class RelayGateway:
    """A gateway process with no store and no bus: the HTTP doors and the relay."""

    relay: Relay
    http: HttpServer
    addresses: dict[str, str]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.http.port}"

    async def stop(self) -> None:
        await self.http.stop()
        await self.relay.close()


async def start_relay_gateway(settings: Settings, addresses: dict[str, str]) -> RelayGateway:
    relay = Relay(load_catalog(), addresses)

    async def planes_ready() -> None:
        results = await asyncio.gather(*(plane_health(a) for a in sorted(set(addresses.values()))), return_exceptions=True)
        failed = [r for r in results if isinstance(r, BaseException)]
        if failed:
            raise failed[0]

    app = create_app(relay, {"planes": planes_ready}, nats_url=settings.nats_url)
    http = HttpServer(app, host=settings.http_host, port=settings.http_port)
    try:
        await http.start()
    except BaseException:
        await relay.close()
        raise
    return RelayGateway(relay, http, addresses)

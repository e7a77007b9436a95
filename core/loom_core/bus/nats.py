"""The bus: one nats-py connection, its JetStream context, and the streams Loom declares."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import nats
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import StreamConfig

from ..errors import Unavailable

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Bus:
    nc: Client
    js: JetStreamContext

    async def ensure_stream(self, config: StreamConfig) -> None:
        try:
            await self.js.add_stream(config)
        except nats.js.errors.BadRequestError:
            await self.js.update_stream(config)

    async def ping(self) -> None:
        if not self.nc.is_connected:
            raise Unavailable("BACKEND_UNAVAILABLE", "the bus is not connected")
        await self.nc.flush(timeout=2)

    async def close(self) -> None:
        if not self.nc.is_closed:
            await self.nc.drain()


async def connect_bus(url: str, name: str = "loom", replicas: int = 1, **options: object) -> Bus:
    """`url` may list several servers, comma-separated (a NATS cluster); `replicas` is
    LOOM_NATS_REPLICAS, the copies each stream and KV bucket Loom declares keeps (bus/replicas.py)."""
    from .replicas import jetstream

    try:
        servers = [u.strip() for u in url.split(",") if u.strip()]
        nc = await nats.connect(
            servers if len(servers) > 1 else url, name=name, max_reconnect_attempts=-1, reconnect_time_wait=0.5, **options
        )  # type: ignore[arg-type]
    except Exception as exc:
        raise Unavailable("BACKEND_UNAVAILABLE", "cannot reach the bus") from exc
    return Bus(nc=nc, js=jetstream(nc, replicas))

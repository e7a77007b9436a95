"""Each replica's core NATS readers (consumers/layout.py WAKE and CONFIG, at most once, nothing
to ack): the pull wake-ups, handed to the wake hub (service/wake.py `WakeHub.apply`) straight
from nats-py's callback (`Bus.listen`), and the directory's change notices, on the runtime's
FastStream broker, handed to the directory (`Directory.dropped`). The service side (waiting, notifying, caching) stays with its users; this
module only feeds it.
"""

from __future__ import annotations

import contextlib

from faststream.nats.message import NatsMessage
from loom_core.bus import Bus, Consuming

from ..directory import Directory
from ..service.wake import WakeHub
from .layout import CONFIG, WAKE


class Pushes:
    def __init__(self, bus: Bus | None, hub: WakeHub, directory: Directory) -> None:
        self.bus = bus
        self.hub = hub
        self.directory = directory
        self._running: list[Consuming] = []

    async def start(self) -> None:
        if self.bus is None:
            return
        self._running.append(await self.bus.consume(CONFIG, self._on_config))
        # Straight from nats-py's callback: FastStream's pipeline was a quarter of the wake-up's
        # hop between replicas (docs/benchmarks.md, "Wake (issue Q, session 20)").
        self._running.append(await self.bus.listen(WAKE, self.hub.apply))

    async def stop(self) -> None:
        running, self._running = self._running, []
        for c in running:
            with contextlib.suppress(Exception):
                await c.stop()

    async def _on_config(self, msg: NatsMessage) -> None:
        self.directory.dropped(msg.body)

"""A fetch applied in place: the tasks plane's batch consumers (projector, notes writer).

Each is a batch pull consumer (consumers/layout.py: `batch=True`, core/loom_core/bus/batched.py):
its handler gets one fetch whole, as soon as the consumer has anything ready, and FastStream's
ack policy (NACK_ON_ERROR) acks the fetch's messages when the handler returns. The handler
applies the fetch with `apply_in_place`, so:

- a fetch is acked only after it is applied (the handler returns only then);
- a fetch that fails is retried in place, with a growing pause, until it applies: meanwhile its
  messages are reported in progress (JetStream keeps them this replica's) and nothing newer is
  fetched, so nothing newer is applied before an older write that failed, and the fetch is
  applied the moment the backend answers again, not an ack wait later (see
  consumers/projector.py: that is what lost the projection across a NATS node failover);
- a consumer that stops while its fetch still fails gives the fetch up (`Abandoned`): its
  messages are not acked (the ack policy hands them back with a nak, to the next replica).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from faststream.nats.message import NatsBatchMessage
from loom_core.bus import Bus, Consumer, Consuming

log = logging.getLogger(__name__)

#: Longest pause between two attempts at a failed batch.
MAX_PAUSE_SECONDS = 1.0


class Abandoned(Exception):
    """A failed batch given up because its consumer is stopping (not acked: it comes back)."""


async def apply_in_place(name: str, apply: Callable[[], Awaitable[None]], batch: NatsBatchMessage, *, stopping: Callable[[], bool]) -> None:
    """Call `apply` until it succeeds (or the consumer stops: `Abandoned`). The fetch is reported
    in progress between attempts, through FastStream's message API."""
    msgs = batch.raw_message
    pause = 0.05
    while True:
        try:
            await apply()
            return
        except Exception as exc:  # noqa: BLE001 - retried in place until the backend answers
            log.warning("%s: a batch of %d failed (%s: %s); retrying it", name, len(msgs), type(exc).__name__, exc)
        if stopping():
            raise Abandoned(f"{name}: stopping with a batch of {len(msgs)} not applied")
        await asyncio.sleep(pause)
        pause = min(pause * 2, MAX_PAUSE_SECONDS)
        with contextlib.suppress(Exception):  # still working on them: JetStream keeps them ours
            await batch.in_progress()


class BatchConsumer:
    """A batch consumer whose every fetch is applied in place by `apply` (the subclass's)."""

    name = "batch consumer"

    def __init__(self, bus: Bus, consumer: Consumer) -> None:
        self.bus = bus
        self.consumer = consumer
        self._consuming: Consuming | None = None
        self._stopping = False

    async def start(self) -> None:
        if self._consuming is None:
            self._stopping = False
            self._consuming = await self.bus.consume(self.consumer, self._on_fetch)

    async def stop(self) -> None:
        """A fetch being applied finishes (and is acked) first; one still failing is given up, unacked."""
        self._stopping = True
        if self._consuming is not None:
            await self._consuming.stop()
            self._consuming = None

    async def _on_fetch(self, batch: NatsBatchMessage) -> None:
        msgs = batch.raw_message
        await apply_in_place(self.name, lambda: self.apply(msgs), batch, stopping=lambda: self._stopping)

    async def apply(self, msgs: list[Any]) -> None:
        raise NotImplementedError

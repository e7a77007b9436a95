"""Batches for the tasks plane's pull consumers on the runtime's FastStream broker.

A durable pull consumer declared with `pull_batch=N` (consumers/layout.py) fetches up to N
messages at a time and hands each to its handler, all of one fetch concurrently; FastStream
fetches again only once every handler of the fetch has returned. The projector and the
history writer insert a batch at a time, so their handler is `Batches.add`: it puts the message
into the open batch and returns once that batch is applied. The batch closes when no handler
added to it for one turn of the event loop (every message of the fetch is in) or after
`window` seconds, whichever is first; batches are applied one at a time, in order.

A batch that fails is retried in place, with a growing pause, until it applies: the handlers
of its messages wait (reporting progress to JetStream so the messages are not handed to another
replica meanwhile), FastStream fetches nothing newer, and the consumer's ack policy acks each
message when its handler returns. Nothing newer is applied before an older write that failed,
and a failed batch is applied the moment the backend answers again, not an ack wait later
(see consumers/projector.py: this is what lost the projection across a NATS node failover).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from faststream.nats.message import NatsMessage

log = logging.getLogger(__name__)

T = TypeVar("T")
#: Longest pause between two attempts at a failed batch.
MAX_PAUSE_SECONDS = 1.0


class Batches(Generic[T]):
    def __init__(self, name: str, apply: Callable[[list[NatsMessage]], Awaitable[T]], *, window: float, max_size: int) -> None:
        self.name = name
        self._apply = apply
        self.window = window
        self.max_size = max_size
        self._open: list[NatsMessage] | None = None
        self._applied: asyncio.Future[None] | None = None
        self._closers: set[asyncio.Task[None]] = set()
        self._turn = asyncio.Lock()  # one batch at a time, in order
        self.failures = 0  # attempts that failed (tests and logs)

    async def add(self, msg: NatsMessage) -> None:
        """The handler: returns once the batch holding `msg` is applied."""
        if self._open is None or self._applied is None:
            self._open = []
            self._applied = asyncio.get_running_loop().create_future()
            closer = asyncio.create_task(self._close_and_apply(self._open, self._applied), name=f"loom-{self.name}-batch")
            self._closers.add(closer)
            closer.add_done_callback(self._closers.discard)
        applied = self._applied
        self._open.append(msg)
        if len(self._open) >= self.max_size:
            self._open = self._applied = None  # full: the next message opens the next batch
        await asyncio.shield(applied)

    async def _close_and_apply(self, batch: list[NatsMessage], applied: asyncio.Future[None]) -> None:
        try:
            deadline = time.monotonic() + self.window
            seen = -1
            while len(batch) != seen and len(batch) < self.max_size and time.monotonic() < deadline:
                seen = len(batch)
                await asyncio.sleep(0)  # the fetch's other handlers add theirs
            if self._open is batch:
                self._open = self._applied = None
            async with self._turn:
                await self._apply_until_done(batch)
            applied.set_result(None)
        except BaseException as exc:
            if not applied.done():
                applied.set_exception(exc if isinstance(exc, Exception) else asyncio.CancelledError())
            if not isinstance(exc, Exception):
                raise

    async def _apply_until_done(self, batch: list[NatsMessage]) -> None:
        pause = 0.05
        while True:
            try:
                await self._apply(batch)
                return
            except Exception as exc:  # noqa: BLE001 - retried in place until the backend answers
                self.failures += 1
                log.warning("%s: a batch of %d failed (%s: %s); retrying it", self.name, len(batch), type(exc).__name__, exc)
            await asyncio.sleep(pause)
            pause = min(pause * 2, MAX_PAUSE_SECONDS)
            for m in batch:  # still working on them: JetStream keeps them ours
                with contextlib.suppress(Exception):
                    await m.in_progress()

    async def stop(self) -> None:
        """Cancel the batches not yet applied (their messages stay unacked and come back)."""
        closers = list(self._closers)
        for c in closers:
            c.cancel()
        for c in closers:
            with contextlib.suppress(BaseException):
                await c
        self._open = self._applied = None

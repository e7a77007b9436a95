"""Batching: concurrent calls served by one batch (`Coalescer`), and writes paced to at most one
per interval (`Pacer`).

`Coalescer`: the calls that arrive while a batch runs go together into the next one.

The first call of an idle group runs at once (alone: no window to wait out), so one caller at a
time pays nothing; under concurrency each batch carries whatever queued while the previous one
ran, so the work per call (a model run, a store round trip) is shared. A call is never served by
a batch that started before it was queued: a read batched here sees every write that finished
before its call.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Generic, TypeVar

G = TypeVar("G", bound=Hashable)
T = TypeVar("T")
R = TypeVar("R")


class Coalescer(Generic[G, T, R]):
    """`submit(group, item)` -> `run(group, items)`'s answer for that item, one batch per group at
    a time. `run` answers one result per item, in order; an exception reaches every caller of
    its batch. A batch carries at most `max_size` by `size` (one item always goes, whatever its
    size).

    `linger`: after a batch of several items, the next waits up to this long for those callers to
    come back with their next item (as many as came back, with the ones already queued). Without
    it, callers that each submit again once answered settle into two halves that alternate (one
    half queues while the other's batch runs), and a batch carries half of them: a batch with a
    fixed cost (a store round trip a table) then costs each item twice what it would. A linger
    that saw no caller come back (callers that write now and then) is skipped the next batch."""

    def __init__(
        self,
        run: Callable[[G, list[T]], Awaitable[Sequence[R]]],
        *,
        max_size: int = 256,
        size: Callable[[T], int] = lambda _: 1,
        linger: float = 0.0,
    ) -> None:
        self._run = run
        self._max = max(1, max_size)
        self._size = size
        self._linger = linger
        self._pending: dict[G, list[tuple[T, asyncio.Future[R]]]] = {}
        self._running: dict[G, asyncio.Task[None]] = {}
        self._awaited: dict[G, tuple[int, asyncio.Event]] = {}  # a lingering group: the items it waits for

    async def submit(self, group: G, item: T) -> R:
        fut: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        pending = self._pending.setdefault(group, [])
        pending.append((item, fut))
        awaited = self._awaited.get(group)
        if awaited is not None and len(pending) >= awaited[0]:
            awaited[1].set()
        task = self._running.get(group)
        if task is None or task.done():
            self._running[group] = asyncio.ensure_future(self._drain(group))
        return await fut

    async def _drain(self, group: G) -> None:
        carried = 0  # the items of the group's last batch
        futile = False  # the last linger saw no caller come back: the next batch goes at once
        try:
            while True:
                if self._linger > 0 and carried > 1 and not futile:
                    futile = not await self._await_return(group, min(len(self._pending.get(group, ())) + carried, self._max))
                else:
                    futile = False
                pending = self._pending.get(group)
                if not pending:
                    break
                batch: list[tuple[T, asyncio.Future[R]]] = []
                n = 0
                while pending and (not batch or n + self._size(pending[0][0]) <= self._max):
                    item = pending.pop(0)
                    batch.append(item)
                    n += self._size(item[0])
                carried = len(batch)
                try:
                    results = await self._run(group, [item for item, _ in batch])
                except asyncio.CancelledError:
                    for _, fut in batch:
                        fut.cancel()
                    raise
                except Exception as exc:  # noqa: BLE001 - every caller of the batch gets the error, whatever it is
                    for _, fut in batch:
                        if not fut.done():
                            fut.set_exception(exc)
                    continue
                for (_, fut), result in zip(batch, results, strict=True):
                    if not fut.done():
                        fut.set_result(result)
        finally:
            self._running.pop(group, None)
            self._awaited.pop(group, None)
            for _, fut in self._pending.pop(group, []):  # left only when the drain was cancelled
                fut.cancel()

    async def _await_return(self, group: G, items: int) -> bool:
        """Wait until the group holds `items` pending, or `linger` has passed; whether any item
        came meanwhile."""
        before = len(self._pending.get(group, ()))
        if before >= items:
            return True
        came = asyncio.Event()
        self._awaited[group] = (items, came)
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(came.wait(), self._linger)
        finally:
            self._awaited.pop(group, None)
        return len(self._pending.get(group, ())) > before


class Pacer:
    """At most one write per `interval`, measured from the start of one write to the next: a
    write whose turn comes earlier waits out the rest of the interval, unless its writer says it
    goes `at_once` (a batch filled, a burst, a stop) or someone `hurry`s it (a reader waits for
    it); the first write after a quiet interval goes at once. Writes with a fixed cost (a chDB insert is about 5 ms of CPU
    for one row or a hundred) then come as a few big batches under a steady trickle, and none
    is delayed when the writer was idle. The ledger's flusher and the task projector's inserts
    are paced by one each."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.started = -math.inf  # monotonic time the last write began
        self._now = asyncio.Event()

    def hurry(self) -> None:
        """The next write goes at once (a `turn` waiting out its interval returns now)."""
        self._now.set()

    async def turn(self, *, at_once: bool = False) -> None:
        """Wait for the next write's turn, then mark it started."""
        if not at_once and not self._now.is_set():
            pause = self.started + self.interval - time.monotonic()
            if pause > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._now.wait(), pause)
        self._now.clear()
        self.mark()

    def mark(self) -> None:
        """A write starts now (one made outside `turn`, e.g. a flush on demand): the next waits its interval."""
        self.started = time.monotonic()

    def again(self) -> None:
        """The last write did not land: the next goes at once (the pace is for writes that land)."""
        self.started = -math.inf

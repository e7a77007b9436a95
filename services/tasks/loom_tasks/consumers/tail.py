"""One reader of the task events per replica for every waiting task.updates / task.watch call.

A call that finds nothing after its cursor waits for the next event. Each call used to open an
ephemeral consumer of its own on LOOM_TASK_EVENTS: a thousand waiting callers were a thousand
consumers on the server. Now a call reads what is already stored after its cursor by direct get
(`loom_core.bus.direct`, no consumer), and waits on this replica's `EventTail`: one consumer
(consumers/layout.py EVENTS_TAIL: a batch pull consumer acking nothing, delivering events
stored after it was made), opened when the first call waits, closed once no call has waited for
`idle_seconds`, whose events are handed to each waiting call whose subject filter and `keep`
accept them. The call checks who may read what before it waits (service/watching.py); the tail
only hands it events under the filter it was allowed.

No event is missed between the two: a call registers with the tail (and the tail's consumer
exists) before its direct read, so what is stored after the read comes through the tail, and
what the tail hands over at or below the read's cursor is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator, Callable

from faststream.nats.message import NatsBatchMessage
from loom_core.aio import cancel_and_wait
from loom_core.bus import Bus, Consuming
from loom_core.bus.position import stream_seq
from nats.js.errors import NotFoundError

from ..domain.events import TaskEvent, from_wire
from ..events import STREAM
from .layout import EVENTS_TAIL, named

#: A tail no call waited on this long is closed (its consumer deleted).
IDLE_SECONDS = 60.0
#: How often an open tail checks that its consumer still exists.
CHECK_SECONDS = 5.0

#: Whether a waiting call takes an event.
Keep = Callable[[TaskEvent], bool]


def subject_matches(pattern: list[str], subject: list[str]) -> bool:
    """NATS subject matching, token by token (`*` one token, `>` the rest)."""
    for i, token in enumerate(pattern):
        if token == ">":
            return len(subject) > i
        if i >= len(subject) or (token != "*" and token != subject[i]):
            return False
    return len(pattern) == len(subject)


class Waiter:
    """One waiting call: the events the tail handed it (after `after`, at most `limit`) and the
    last sequence under its filter the tail saw for it (its cursor when nothing was kept)."""

    __slots__ = ("after", "arrived", "events", "keep", "limit", "pattern", "seen")

    def __init__(self, subject_filter: str, after: int, keep: Keep, limit: int) -> None:
        self.pattern = subject_filter.split(".")
        self.after = after
        self.keep = keep
        self.limit = limit
        self.events: list[TaskEvent] = []
        self.seen = after
        self.arrived = asyncio.Event()

    def caught_up_to(self, seq: int) -> None:
        """What the call's own read returned goes up to `seq`: drop what the tail handed at or below it."""
        self.after = max(self.after, seq)
        self.seen = max(self.seen, seq)
        self.events = [e for e in self.events if e["seq"] > seq]


class EventTail:
    def __init__(self, bus: Bus, idle_seconds: float = IDLE_SECONDS) -> None:
        self.bus = bus
        self.idle_seconds = idle_seconds
        self.holder = secrets.token_hex(6)
        self.opened = 0
        self.name = ""
        self.waiters: set[Waiter] = set()
        self._watch: Consuming | None = None
        self._lock = asyncio.Lock()
        self._reaper: asyncio.Task[None] | None = None
        self._last_used = 0.0

    @contextlib.asynccontextmanager
    async def waiting(self, subject_filter: str, after: int, keep: Keep, limit: int) -> AsyncIterator[Waiter]:
        """A waiter registered with the open tail for the block (gone after it, cancelled or not)."""
        waiter = Waiter(subject_filter, after, keep, limit)
        self.waiters.add(waiter)  # before the tail opens: nothing it delivers is missed
        try:
            await self._open()
            yield waiter
        finally:
            self.waiters.discard(waiter)
            self._last_used = asyncio.get_running_loop().time()

    async def _open(self) -> None:
        if self._watch is not None:
            return
        async with self._lock:
            if self._watch is not None:
                return
            self.opened += 1
            name = f"loom-tail-{self.holder}-{self.opened}"
            consumer = named(EVENTS_TAIL, name)
            self._watch = await self.bus.consume(consumer, self._on_events)
            self.name = name
            self._last_used = asyncio.get_running_loop().time()
            if self._reaper is None or self._reaper.done():
                self._reaper = asyncio.create_task(self._close_when_idle(), name="loom-task-events-tail")

    async def _on_events(self, msg: NatsBatchMessage) -> None:
        woken: set[Waiter] = set()
        for m in msg.raw_message:
            if not self.waiters:
                break
            seq = stream_seq(m)
            subject = m.subject.split(".")
            body: TaskEvent | None = None
            decoded = False
            for w in self.waiters:
                if seq <= w.seen or len(w.events) >= w.limit or not subject_matches(w.pattern, subject):
                    continue
                w.seen = seq
                if not decoded:
                    body, decoded = from_wire(m.data), True
                if body and w.keep(body):
                    w.events.append({**body, "seq": seq})
                    woken.add(w)
        for w in woken:
            w.arrived.set()

    async def _close_when_idle(self) -> None:
        """Close the tail once no call waited for `idle_seconds`; open a new one when its
        consumer is gone while calls wait (a NATS node lost it). Those calls may miss what was
        stored meanwhile from the tail, not from the stream: their cursor stays before it, so
        their next call reads it."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(min(self.idle_seconds / 4, CHECK_SECONDS))
            if not self.waiters and loop.time() - self._last_used >= self.idle_seconds:
                async with self._lock:
                    if not self.waiters:
                        await self._close()
                        return
            elif await self._lost():
                async with self._lock:
                    await self._close()
                await self._open()

    async def _lost(self) -> bool:
        try:
            await self.bus.js.consumer_info(STREAM, self.name)
        except NotFoundError:
            return True
        except Exception:  # noqa: BLE001 - a bus that does not answer now: asked again next check
            return False
        return False

    async def _close(self) -> None:
        watch, self._watch = self._watch, None
        if watch is not None:
            await watch.stop()
            with contextlib.suppress(Exception):  # else the server removes it once unused
                await self.bus.js.delete_consumer(STREAM, self.name)

    async def stop(self) -> None:
        reaper, self._reaper = self._reaper, None
        if reaper is not None and reaper is not asyncio.current_task():
            await cancel_and_wait(reaper)
        await self._close()

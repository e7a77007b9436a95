"""Bounded projection lag: a replica's writes wait while the projector is far behind them.

Every op's write is one compare-and-set on the task's state (service/engine.py); the projection,
the events and the history follow from the projector (consumers/projector.py). Nothing on the
write path waits for the projector, so under a load the server cannot keep up with, the writes
would run ahead and the projector would fall behind without bound: task.list, task.counts and
task.history wait for the projection (read-your-writes, at most 3 s) and then refuse with
`projection_behind`, and the derived work piles up. Measured on 2 cores (docs/benchmarks.md,
"Tasks", session 6): batched REST clients drove ~2,000 lifecycles/s while the projection
followed at ~1,300/s, seconds behind at the end of a run.

So before a write, `admit` compares this replica's last write (its stream sequence) with the
projector's position: while more than `max_behind` writes are unapplied, it waits (polling the
position, or told by the projector running in this process: `projected`) until the projector
is back within the bound, at most `max_wait` seconds; then the
write goes ahead anyway, so a stalled projector costs writes a bounded delay, never their
availability. The position is the projector's own count when it runs in this process, else the
durable consumer's ack floor (the plane reuses one answer for REMOTE_POSITION_SECONDS); writes
waiting at once share one look at it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

#: Longest the plane reuses the consumer's ack floor (the projector running on another replica).
REMOTE_POSITION_SECONDS = 0.02
#: Pause between two looks at the position while a write waits.
POLL_SECONDS = 0.005


class Admission:
    def __init__(self, position: Callable[[], Awaitable[int]], *, max_behind: int, max_wait: float) -> None:
        self.position = position  # the projector's applied stream sequence
        self.max_behind = max_behind  # 0: no bound
        self.max_wait = max_wait
        self.written = 0  # this replica's last write's stream sequence
        self.known = 0  # the projector's position as last read (it only grows)
        self.waits = 0  # writes that waited (the benchmark's report)
        self.looks = 0  # reads of the position
        # The writes waiting now wait on one gate, opened by one poller: a thousand waiting
        # writes cost one look at the position per POLL_SECONDS, not a thousand.
        self._gate: asyncio.Event | None = None
        self._poller: asyncio.Task[None] | None = None

    def wrote(self, seq: int) -> None:
        if seq > self.written:
            self.written = seq

    def projected(self, seq: int) -> None:
        """The projector in this process applied up to `seq`: the waiting writes go at once when
        that brings it within the bound, not at the poller's next look (up to POLL_SECONDS
        later, while the loop may have nothing else to do)."""
        if seq > self.known:
            self.known = seq
            gate = self._gate
            if gate is not None and not gate.is_set() and self._within():
                gate.set()

    def _within(self) -> bool:
        return self.written - self.known <= self.max_behind

    async def reached(self, seq: int, wait: float) -> bool:
        """Wait (at most `wait` seconds) until the projector has applied the state write `seq`
        (and so published its event). False when it has not by then."""
        deadline = time.monotonic() + wait
        while self.known < seq:
            if time.monotonic() >= deadline:
                return False
            self.looks += 1
            seen = await self.position()  # read before `known`: `projected` may move it meanwhile
            self.known = max(self.known, seen)
            if self.known < seq:
                await asyncio.sleep(POLL_SECONDS)
        return True

    async def admit(self) -> None:
        if not self.max_behind or self._within():
            return
        self.waits += 1
        if self._gate is None or self._gate.is_set():
            self._gate = asyncio.Event()
            self._poller = asyncio.create_task(self._poll(self._gate))
        await self._gate.wait()

    async def _poll(self, gate: asyncio.Event) -> None:
        """Look at the position until the projector is within the bound (or max_wait passed),
        then open the gate: every write waiting on it goes ahead (a write that came last waited
        less than max_wait, none more)."""
        deadline = time.monotonic() + self.max_wait
        try:
            while not gate.is_set() and time.monotonic() < deadline:
                self.looks += 1
                seen = await self.position()  # read before `known`: `projected` may move it meanwhile
                self.known = max(self.known, seen)
                if self._within():
                    break
                await asyncio.sleep(POLL_SECONDS)
        finally:
            gate.set()

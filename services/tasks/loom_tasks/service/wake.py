"""Pull wake-ups: a create (or any move into todo) wakes a waiting task.pull at once, on every
replica, over core NATS — not by polling the store.

Each replica reads `loom.task_wake.>` once (consumers/layout.py WAKE, a core NATS subscription,
consumers/pushes.py, which hands each message to `WakeHub.apply` from nats-py's callback:
`Bus.listen`). A move into todo publishes the task's row on
`loom.task_wake.<org>.<inbox>`; a claim (or any move out of todo) publishes a "gone" notice.
Every replica keeps, for each inbox it has served a pull for recently, a queue of candidate
rows: what its last store query returned plus what wake-ups brought since. A pull takes
candidates from the queue in pull order and claims them against their lease rows (which say
whether the row is still current), so the hot path needs no store read at all. The store is
queried before a pull only when the queue was never filled, cannot answer a kinds filter, or is
empty and older than LOOM_TASK_PULL_POLL_SECONDS while the pull has no time left to wait; a
queue older than that is otherwise queried beside the pull (the safety net: a lost wake-up
costs at most that long), and a waiting pull is woken by that query's rows or a wake-up,
whichever lands first.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator, Sequence
from typing import Any

from loom_core import fastjson
from loom_core.bus import Bus

from ..domain import model
from ..domain.model import TaskRow
from ..events import WAKE_PREFIX, wake_subject

log = logging.getLogger(__name__)

QUERY_LIMIT = 200
#: How long a row another replica announced goes after this replica's own rows of the same
#: priority and deadline (`InboxQueue.ordered`).
REMOTE_GRACE_SECONDS = 0.5
IDLE_QUEUE_SECONDS = 120.0
Loader = Callable[[str, str, Sequence[str], int], Awaitable[list[TaskRow]]]


class InboxQueue:
    """One inbox's candidates on this replica."""

    def __init__(self) -> None:
        self.rows: dict[str, TaskRow] = {}
        self.revs: dict[str, int] = {}  # the lease row's revision a wake-up announced
        self.added: dict[str, float] = {}
        self.remote: dict[str, float] = {}  # rows another replica's wake-up announced: when (monotonic)
        #: Rows another replica announced its own waiting pulls would claim: when (monotonic).
        #: Not taken here for REMOTE_GRACE_SECONDS (a claim there drops them meanwhile).
        self.promised_there: dict[str, float] = {}
        #: Tasks the pulls running here would take (their max_tasks: `pulling`), and how many
        #: rows made ready here were announced as theirs and not claimed yet (`promise`).
        self.wanted = 0
        self.promised = 0
        self.loaded_at = 0.0  # monotonic time of the last store query
        self.complete = False  # the last query returned every todo task of the inbox
        self.reserved: set[str] = set()  # claims in flight here
        self.used_at = time.monotonic()
        self.lock = asyncio.Lock()
        self._event = asyncio.Event()

    def offer(self, row: TaskRow, revision: int = 0, *, remote: bool = False, promised: bool = False) -> None:
        """`promised`: another replica's waiting pulls will claim the row (see `promised_there`)."""
        have = self.rows.get(row.task_id)
        if have is None or have.version <= row.version:
            self.rows[row.task_id] = row
            self.added[row.task_id] = now = time.monotonic()
            if remote:
                self.remote[row.task_id] = now
            else:
                self.remote.pop(row.task_id, None)
            if promised:
                self.promised_there[row.task_id] = now
            else:
                self.promised_there.pop(row.task_id, None)
            if revision:
                self.revs[row.task_id] = revision
            elif have is None or have.version < row.version:
                self.revs.pop(row.task_id, None)
        self.notify()

    def _forget(self, task_id: str) -> None:
        self.rows.pop(task_id, None)
        self.added.pop(task_id, None)
        self.revs.pop(task_id, None)
        self.remote.pop(task_id, None)
        self.promised_there.pop(task_id, None)

    def promise(self) -> bool:
        """A row made ready on this replica: True when a pull waiting here will take it (so the
        wake-up tells the other replicas to leave it to this one's pulls a while): in the batched
        benchmark, pulls on both replicas took each created batch, and the loser's whole atomic
        claim batch was refused."""
        if self.promised < self.wanted:
            self.promised += 1
            return True
        return False

    @contextlib.contextmanager
    def pulling(self, want: int) -> Iterator[None]:
        """A pull running here that would take `want` tasks (see `promise`)."""
        self.wanted += want
        try:
            yield
        finally:
            self.wanted -= want
            self.promised = min(self.promised, self.wanted)

    def claimed(self, n: int) -> None:
        """A pull here claimed `n` tasks: as many promises kept."""
        self.promised = max(0, self.promised - n)

    def drop(self, task_id: str, version: int | None = None) -> None:
        have = self.rows.get(task_id)
        if have is not None and (version is None or have.version < version):
            self._forget(task_id)

    def notify(self) -> None:
        self._event.set()
        self._event = asyncio.Event()

    async def wait(self, seconds: float) -> bool:
        """True when woken, False after `seconds`."""
        event = self._event
        try:
            # asyncio.timeout, not wait_for: on 3.11 wait_for runs the wait as a task of its own,
            # and a wake-up then took two more turns of the loop to reach the pull.
            async with asyncio.timeout(max(seconds, 0.0)):
                await event.wait()
            return True
        except TimeoutError:
            return False

    def ordered(self, kinds: Sequence[str], now: float, limit: int) -> list[TaskRow]:
        """The first `limit` claimable rows in pull order (a partial sort: a backlog of
        thousands is not sorted whole for every pull).

        Within one priority and deadline, a row another replica announced in the last
        REMOTE_GRACE_SECONDS goes after this replica's own: every replica's queue holds every
        row, so pulls on two replicas took the same first rows and raced for each (the batched
        benchmark's profile: claims took 3.5 times the write samples of creates, and each lost
        claim also reads the task); the
        announcing replica's pulls most likely claim it meanwhile. Age order yields that long
        at most, priority and deadline never."""
        wanted = set(kinds)
        held = self._promised_there_now()
        rows = [
            r
            for r in self.rows.values()
            if r.task_id not in self.reserved and r.task_id not in held and r.visible_to_pull(now) and (not wanted or r.kind in wanted)
        ]
        if not self.remote:
            return heapq.nsmallest(limit, rows, key=TaskRow.pull_order)
        recent = time.monotonic() - REMOTE_GRACE_SECONDS
        remote = self.remote

        return heapq.nsmallest(limit, rows, key=lambda r: r.pull_order(remote.get(r.task_id, 0.0) > recent))

    def _promised_there_now(self) -> dict[str, float]:
        """`promised_there` without the rows whose grace is over (forgotten: they are anyone's now)."""
        if self.promised_there:
            recent = time.monotonic() - REMOTE_GRACE_SECONDS
            for task_id in [t for t, at in self.promised_there.items() if at <= recent]:
                del self.promised_there[task_id]
        return self.promised_there

    def promised_for(self) -> float | None:
        """Seconds until the first row another replica's pulls were to claim is this replica's to take too."""
        held = self._promised_there_now()
        return min(held.values()) + REMOTE_GRACE_SECONDS - time.monotonic() if held else None

    def next_due(self, now: float) -> float | None:
        """When the earliest hidden (not_before) candidate becomes visible."""
        due = [r.not_before for r in self.rows.values() if r.not_before is not None and r.not_before > now]
        return min(due) if due else None

    def replace(self, rows: list[TaskRow], started: float, complete: bool) -> None:
        """Merge a store query that started at `started` (monotonic): keep what wake-ups added
        since, drop what the query no longer returns. A query cut at its limit (`complete`
        False) says nothing about rows past its last one in pull order: those stay (a stale one
        costs a failed claim), so a backlog longer than the limit is not forgotten and queried
        again for every few pulls."""
        fresh = {r.task_id: r for r in rows}
        horizon = None if complete or not rows else max(r.pull_order() for r in rows)
        for task_id, queued in list(self.rows.items()):
            if task_id in fresh or self.added.get(task_id, 0.0) >= started:
                continue
            if horizon is not None and queued.pull_order() > horizon:
                continue
            self._forget(task_id)
        for r in rows:
            have = self.rows.get(r.task_id)
            if have is None or have.version <= r.version:
                self.rows[r.task_id] = r
                self.added.setdefault(r.task_id, started)
        self.loaded_at = started
        self.complete = complete
        if rows:
            self.notify()  # pulls that waited for this query look again


class WakeHub:
    def __init__(self, bus: Bus | None, loader: Loader, poll_seconds: float) -> None:
        self.bus = bus
        self.loader = loader
        self.poll_seconds = poll_seconds
        self.queues: dict[tuple[str, str], InboxQueue] = {}
        # A wake-up leaves at once (waiting for the next loop turn cost the cross-replica wake
        # 0.4-0.75 ms on a busy loop: docs/benchmarks.md, session 16). Those made
        # later in the same turn (concurrent writes' acks read at once), or inside `together`
        # (a batch's writes), leave as one message per inbox: after the turn, or the batch.
        self._pending: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self._flushing: asyncio.Task[None] | None = None
        self._holding = 0
        self._queries: set[asyncio.Task[None]] = set()  # safety-net queries run beside pulls
        # Our own messages come back to us (we read every inbox's wake-ups) and were
        # applied locally already: each starts with this replica's mark and is skipped unread.
        self._mark = secrets.token_hex(6)
        self._prefix = f'{{"src":"{self._mark}"'.encode()

    async def stop(self) -> None:
        """Wake every waiting pull (the plane is stopping; its wake-up reader stopped first)."""
        for task in list(self._queries):
            task.cancel()
        for q in self.queues.values():
            q.notify()

    def queue(self, org: str, inbox: str) -> InboxQueue:
        key = (org, inbox)
        q = self.queues.get(key)
        if q is None:
            self._forget_idle()
            q = self.queues[key] = InboxQueue()
        q.used_at = time.monotonic()
        return q

    def _forget_idle(self) -> None:
        cutoff = time.monotonic() - IDLE_QUEUE_SECONDS
        for key in [k for k, q in self.queues.items() if q.used_at < cutoff and not q.reserved]:
            del self.queues[key]

    async def refresh(
        self, org: str, inbox: str, q: InboxQueue, kinds: Sequence[str] = (), force: bool = False, waits: bool = False
    ) -> None:
        """Query the store unless the queue can answer (one query at a time per inbox).

        The queue answers, unless forced, whenever it holds rows and has been following the inbox
        (a store query filled it once, and every create and claim since reached it as a
        wake-up): a pull then claims from it at once. When that answer is older than
        `poll_seconds`, the store is queried beside the pull, not before it: the query waits
        for the projection first (read-your-writes), and a lone worker's pull paid that wait
        every `poll_seconds` for a safety net (a lost wake-up) it did not need.

        `waits`: the pull waits for wake-ups after this (it has time left). A followed queue
        that is empty (or forced: the pull's wait timed out) is then also queried beside the
        pull, which waits on the queue for whichever comes first, a wake-up or the query's rows.
        Before, the pull waited for that query, so a create that woke it meanwhile waited with
        it for the projection (up to two projection lingers on another replica: the wake-up
        tail). A pull with no time left, or a queue never filled, is queried before the pull
        goes on (read-your-writes: a pull right after a create sees it); a pull that finds rows
        while another pull's query runs claims them."""
        if not force and q.rows:
            if q.lock.locked():
                return
            if q.loaded_at:
                if time.monotonic() - q.loaded_at >= self.poll_seconds:
                    self._beside(self._query(org, inbox, q, (), force=False))
                return
        if waits and q.loaded_at and not kinds:
            if not q.lock.locked() and (force or not self._fresh(q)):
                self._beside(self._query(org, inbox, q, (), force=force))
            return
        await self._query(org, inbox, q, kinds, force)

    def _fresh(self, q: InboxQueue) -> bool:
        """The queue's last store answer still stands (an empty queue's only when it was complete)."""
        return bool(q.loaded_at) and time.monotonic() - q.loaded_at < self.poll_seconds and bool(q.rows or q.complete)

    async def _query(self, org: str, inbox: str, q: InboxQueue, kinds: Sequence[str], force: bool) -> None:
        async with q.lock:
            started = time.monotonic()
            if not force and self._fresh(q):
                return
            rows = await self.loader(org, inbox, kinds, QUERY_LIMIT)
            if kinds:
                # A filtered answer says nothing about other kinds: add, do not replace.
                for r in rows:
                    q.offer(r)
                return
            q.replace(rows, started, complete=len(rows) < QUERY_LIMIT)

    def _beside(self, query: Coroutine[Any, Any, None]) -> None:
        """Run a safety-net query without the pull waiting for it (a failure is the next one's to mend)."""
        task = asyncio.get_running_loop().create_task(query)
        self._queries.add(task)
        task.add_done_callback(self._query_done)

    def _query_done(self, task: asyncio.Task[None]) -> None:
        self._queries.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.debug("a pull queue's safety-net query failed: %s", type(task.exception()).__name__)

    # --- publishing

    async def ready(self, row: TaskRow, revision: int = 0) -> None:
        """The task is todo (again): wake pulls on every replica, handing them the row and its
        lease row's revision."""
        q = self.queues.get((row.org, row.inbox))
        promised = False
        if q is not None:
            q.offer(row, revision)
            promised = q.promise()
        op: dict[str, Any] = {"op": "ready", "row": model.stored(row), "rev": revision}
        if promised:
            op["promised"] = True
        if await self._send(row.org, row.inbox, op):
            # Sent alone: one turn of the loop before the caller goes on to answer, so nats-py's
            # flusher sends the wake-up, and a pull it woke here claims, before this write's
            # answer is built (a batch's wake-ups, held, go with the batch: no turn each).
            await asyncio.sleep(0)

    async def gone(self, org: str, inbox: str, task_id: str, version: int) -> None:
        """The task left todo (claimed, cancelled, …): forget it everywhere."""
        self._local(org, inbox, lambda q: q.drop(task_id, version))
        await self._send(org, inbox, {"op": "gone", "task_id": task_id, "version": version})

    @contextlib.asynccontextmanager
    async def together(self) -> AsyncIterator[None]:
        """The wake-ups made inside (a batch's writes) leave as one message per inbox when it
        ends: a pull woken on another replica finds the whole batch, not its first row."""
        self._holding += 1
        try:
            yield
        finally:
            self._holding -= 1
            if not self._holding and self._flushing is None:
                await self._flush()

    def _local(self, org: str, inbox: str, fn: Callable[[InboxQueue], None]) -> None:
        q = self.queues.get((org, inbox))
        if q is not None:
            fn(q)

    async def _send(self, org: str, inbox: str, op: dict[str, Any]) -> bool:
        """True when `op` was published now, False when it waits for the turn's or the batch's end."""
        if self.bus is None:
            return False
        if self._holding or self._flushing is not None:
            self._pending.setdefault((org, inbox), []).append(op)
            return False
        # Those that follow in this turn wait for its end (`_flush`).
        self._flushing = asyncio.get_running_loop().create_task(self._flush())
        await self._publish(org, inbox, [op])
        return True

    async def _flush(self) -> None:
        """Every inbox's pending wake-ups, one message each (one loop turn after a wake-up went
        alone, or at the end of `together`)."""
        self._flushing = None
        if self._holding:
            return  # the batch in progress sends them when it ends
        pending, self._pending = self._pending, {}
        for (org, inbox), ops in pending.items():
            await self._publish(org, inbox, ops)

    async def _publish(self, org: str, inbox: str, ops: list[dict[str, Any]]) -> None:
        if self.bus is None:
            return
        try:
            await self.bus.nc.publish(wake_subject(org, inbox), fastjson.dumps({"src": self._mark, "ops": ops}))
        except Exception:  # noqa: BLE001 - a lost wake-up costs one poll interval, never a task
            log.debug("wake-up not published")

    # --- receiving (fed by consumers/pushes.py)

    def apply(self, subject: str, data: bytes) -> None:
        """A wake-up from any replica, as it came off `loom.task_wake.<org>.<inbox>`."""
        parts = subject.split(".")
        if len(parts) != 4 or f"{parts[0]}.{parts[1]}" != WAKE_PREFIX:
            return
        q = self.queues.get((parts[2], parts[3]))
        if q is None:
            return  # nobody here pulls this inbox
        if data.startswith(self._prefix):
            return  # ours: applied when it was sent
        try:
            body = fastjson.loads(data)
            for op in body.get("ops", [body]):
                if op.get("op") == "ready":
                    q.offer(model.from_stored(op["row"]), int(op.get("rev") or 0), remote=True, promised=bool(op.get("promised")))
                elif op.get("op") == "gone":
                    q.drop(str(op["task_id"]), int(op["version"]))
        except (ValueError, KeyError, TypeError):
            log.debug("bad wake-up message")

"""The sweep (LOOM_TASK_LEASE_SWEEP_ENABLED): one replica at a time, under the cluster lease
`tasks.sweep`, acting on what comes due in the tasks' state on NATS (the truth, heartbeats
included), never on the projection.

The replica holding the lease watches LOOM_TASK_STATE (consumers/layout.py SWEEP_WATCH, a batch
pull consumer of its own on the runtime's FastStream broker: the last write of every task, then
each new write, a fetch per handler call) and keeps a due index: for each task, the time its current state next needs the sweep and
the revision that said so —
- an in_progress task: its lease's expiry (a heartbeat's write moves it);
- a deferred task: its resume_at;
- a triage item not yet escalated: its escalate_at;
- a finished task: LOOM_TASK_TERMINAL_RETENTION_SECONDS after it finished, when it leaves
  NATS for the projection (a tombstone; only once the projector has applied it). The tombstone
  keeps an idempotency_key taken for LOOM_TASK_IDEMPOTENCY_WINDOW_SECONDS; a task without one
  leaves NATS altogether a minute later (KEYLESS_TOMBSTONE_SECONDS).
The watch starts when the lease is taken and stops (its index dropped) when the lease is lost or
held by another replica, so only the holder decodes every state write; a pass runs only once the
watch has caught up (it has delivered the last write of every task the stream held when it
started: `caught_up`), so a new holder does not pass over work its index has not seen yet. A
watch whose consumer is gone (its NATS node lost it) is replaced by a new one, index and all.

The plane's sweeper (given `feed`: is the projector running on this replica) holds the lease
only where the projector runs, and there its watch only replays: the projector already decodes
every write, and tells the index each fetch's newest states (`offer_states`, the projector's
tap), so once the replay has caught up the watch's consumer is deleted and the index lives on
the projector's fetches (a second reader of every write cost a busy server ~9% of its CPU). The
tap is listening before the replay starts, so no write falls between the two: a write the
projector applied before is in the replay (as its task's last write or an older one), a later
one reaches the tap. The index then follows the projection's pace: a heartbeat the projector
has not applied yet leaves an older expiry in it, and the pass re-reads the truth before it
acts (as always), so a stale entry is skipped, not acted on. When the projector moves to
another replica, this one lets the sweep lease go and the new projector's replica takes it.
Each pass (every LOOM_TASK_SWEEP_INTERVAL_SECONDS) takes what is due in due order, oldest first,
BATCH at a time (their states read in one request) until nothing is due or the pass has run an
interval, skipping entries a newer write replaced: so every pass makes progress on the oldest
work, however many tasks are alive, and retires finished tasks as fast as a busy server finishes
them. An entry whose action failed (NATS not answering) is looked at again next pass. Each action
is the engine's compare-and-set on the task's current state, so a sweep racing an op (a
heartbeat, a finish) loses cleanly.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from faststream.nats.message import NatsBatchMessage
from loom_core.aio import cancel_and_wait
from loom_core.bus import Bus, Consuming, LeaseHeld, LeaseStore, kv
from loom_core.bus.leases import Lease
from loom_core.bus.position import position
from loom_core.errors import ErrorCode, LoomError
from nats.js.errors import NotFoundError

from ..directory import Directory
from ..domain import model, transitions
from ..domain.model import TaskRow
from ..events import PROJECTOR_DURABLE, ack_floor
from ..service.engine import Engine, Skip
from ..store import truth
from ..store.truth import TaskTruth, WrongRevision
from .layout import SWEEP_WATCH, named

log = logging.getLogger(__name__)

LEASE_KEY = "tasks.sweep"
BATCH = 500
CONCURRENCY = 16
#: How long the tombstone of a task created without an idempotency_key stays (the projector and a
#: replaying watch pass it meanwhile; a read finds the task in the projection either way).
KEYLESS_TOMBSTONE_SECONDS = 60.0
_QUIET = {ErrorCode.TASK_TERMINAL, ErrorCode.PRECONDITION_FAILED, ErrorCode.RESOURCE_NOT_FOUND, ErrorCode.TASK_FENCE_STALE}


@dataclass(slots=True)
class SweepReport:
    released: int = 0
    blocked: int = 0
    resumed: int = 0
    escalated: int = 0
    retired: int = 0
    skipped: int = 0
    errors: int = 0


def due_at(row: TaskRow, retention: float) -> float | None:
    """When the sweep next acts on a task in this state (None: never, until it changes)."""
    if row.status == model.IN_PROGRESS:
        return row.lease_expires_at or 0.0
    if row.status == model.DEFERRED:
        return row.resume_at or 0.0
    if row.status == model.TRIAGE and row.escalated_at is None and row.escalate_at is not None:
        return row.escalate_at
    if row.terminal:
        return row.updated_at + retention
    return None


class DueIndex:
    """(due, task) in due order; an entry counts only while its revision is the task's newest.

    A replaced entry stays in the heap until it is due (a claim's lease entry outlives the task's
    completion by the lease); when replaced entries outnumber live ones the heap is rebuilt from the
    live ones, so memory follows the tasks the sweep still watches, not the writes it has seen."""

    #: Replaced entries tolerated beyond the live ones before a rebuild (amortised O(1) per offer).
    SLACK = 1024

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, str, str]] = []
        self._rev: dict[tuple[str, str], int] = {}

    def __len__(self) -> int:
        return len(self._rev)

    def offer(self, org: str, task_id: str, rev: int, due: float | None) -> None:
        key = (org, task_id)
        if self._rev.get(key, 0) >= rev:  # older, or this very state again (a replay, a fetch applied twice)
            return
        if due is None:
            self._rev.pop(key, None)
            return
        self._rev[key] = rev
        heapq.heappush(self._heap, (due, rev, org, task_id))
        if len(self._heap) > 2 * len(self._rev) + self.SLACK:
            self._compact()

    def _compact(self) -> None:
        # The newest entry per live task (a `later` may have pushed one task twice: keep its earliest).
        live: dict[tuple[str, str], tuple[float, int, str, str]] = {}
        for entry in self._heap:
            key = (entry[2], entry[3])
            if self._rev.get(key) == entry[1] and (key not in live or entry < live[key]):
                live[key] = entry
        self._heap = list(live.values())
        heapq.heapify(self._heap)

    def take(self, now: float, limit: int) -> list[tuple[str, str, int]]:
        out: list[tuple[str, str, int]] = []
        while self._heap and len(out) < limit and self._heap[0][0] <= now:
            _due, rev, org, task_id = heapq.heappop(self._heap)
            if self._rev.get((org, task_id)) == rev:
                out.append((org, task_id, rev))
        return out

    def later(self, org: str, task_id: str, rev: int, due: float) -> None:
        """Look again at `due` (the entry was due but not actionable yet)."""
        if self._rev.get((org, task_id)) == rev:
            heapq.heappush(self._heap, (due, rev, org, task_id))


class Sweeper:
    #: Passes run by every sweeper in this process (whichever replica holds the lease).
    passes_in_process: ClassVar[int] = 0

    def __init__(
        self,
        engine: Engine,
        state: TaskTruth,
        bus: Bus,
        directory: Directory,
        leases: LeaseStore,
        *,
        interval: float,
        retention: float,
        tombstone_ttl: float,
        enabled: bool = True,
        lease_key: str = LEASE_KEY,
        feed: Callable[[], bool] | None = None,
    ) -> None:
        self.engine = engine
        self.state = state
        self.bus = bus
        self.directory = directory
        self.leases = leases
        self.interval = interval
        self.retention = retention
        self.tombstone_ttl = tombstone_ttl
        self.enabled = enabled
        self.lease_key = lease_key
        self.feed = feed
        self._indexing = False  # the index is kept (by the watch, then by the feed)
        self.holder = f"sweep-{uuid.uuid4().hex[:12]}"
        self.index = DueIndex()
        self.passes = 0  # passes this replica ran
        self.pass_done = asyncio.Event()  # set after each pass (tests wait on it)
        self._lease: Lease | None = None
        self._task: asyncio.Task[None] | None = None
        self._watch: Consuming | None = None
        self._watch_name = ""
        self.caught_up = asyncio.Event()  # the watch has replayed every task's last write
        self.watches = 0  # watches this replica started (tests)

    async def start(self) -> None:
        if self.enabled and self._task is None:
            self._task = asyncio.create_task(self._run(), name="loom-task-sweep")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None
        await self._stop_watch()
        if self._lease is not None:
            with contextlib.suppress(Exception):
                await self.leases.release(self._lease)
            self._lease = None

    # --- the due index ------------------------------------------------------------------------

    @property
    def watching(self) -> bool:
        """The index is being kept (this replica holds the lease)."""
        return self._indexing

    def offer_states(self, states: list[tuple[str, str, int, TaskRow | None]]) -> None:
        """The feed's states (the projector's tap): ignored unless the index is being kept."""
        if self._indexing:
            for org, task_id, rev, row in states:
                self.index.offer(org, task_id, rev, None if row is None else due_at(row, self.retention))

    async def _start_watch(self) -> None:
        """A fresh index from a fresh watch (the lease was just taken)."""
        self.index = DueIndex()
        self.caught_up.clear()
        self._indexing = True  # the feed's states count from now: before the replay starts
        self.watches += 1
        name = f"loom-{self.holder}-{self.watches}"
        consumer = named(SWEEP_WATCH, name)
        self._watch = await self.bus.consume(consumer, self._on_states)
        self._watch_name = name
        await self._check_empty()

    async def _end_watch(self) -> None:
        """Stop the watch and delete its consumer; only then is it gone (`_watch` None). (It was
        cleared first: a caller that saw no watch could still find its consumer on the server,
        as tests/tasks/test_sweep.py did once at load.)"""
        if self._watch is not None:
            try:
                await self._watch.stop()
                with contextlib.suppress(Exception):  # else the server removes it once unused
                    await self.bus.js.delete_consumer(truth.STREAM, self._watch_name)
            finally:
                self._watch = None

    async def _stop_watch(self) -> None:
        """The lease is lost: stop decoding writes, drop the index (the next holder has its own)."""
        self._indexing = False
        await self._end_watch()
        self.index = DueIndex()
        self.caught_up.clear()

    async def _watch_lost(self) -> bool:
        """The watch's consumer is gone (a NATS node lost it): its index may miss writes."""
        try:
            await self.bus.js.consumer_info(truth.STREAM, self._watch_name)
        except NotFoundError:
            return True
        except Exception:  # noqa: BLE001 - not answering is not gone
            return False
        return False

    async def _check_empty(self) -> None:
        """A stream with nothing in it replays nothing: the watch is caught up at once."""
        with contextlib.suppress(Exception):  # asked again before the next pass
            info = await self.bus.js.stream_info(truth.STREAM)
            if not info.state.messages:
                self.caught_up.set()

    async def _on_states(self, batch: NatsBatchMessage) -> None:
        for msg in batch.raw_message:
            self._on_state(msg)

    def _on_state(self, msg: Any) -> None:
        rev, pending = position(msg)
        if not pending:  # the last of the replay (or a new write after it)
            self.caught_up.set()
        ids = truth.split_subject(msg.subject)
        if ids is None:
            return
        try:
            st = truth.decode(msg.data, rev)
        except (ValueError, TypeError):
            return
        self.index.offer(ids[0], ids[1], rev, None if st.row is None else due_at(st.row, self.retention))

    # --- the lease ----------------------------------------------------------------------------

    async def _hold(self) -> bool:
        """Take or keep the cluster lease; False when another replica holds it (or, for the
        plane's sweeper, when the projector does not run here: the lease is let go)."""
        if self.feed is not None and not self.feed():
            if self._lease is not None:
                lease, self._lease = self._lease, None
                with contextlib.suppress(Exception):
                    await self.leases.release(lease)
            return False
        ttl = max(self.interval * 3, 3.0)
        try:
            if self._lease is not None and not self._lease.expired:
                self._lease = await self.leases.renew(self._lease, ttl)
            else:
                self._lease = await self.leases.acquire(self.lease_key, self.holder, ttl)
            return True
        except LeaseHeld:
            self._lease = None
            return False

    async def _run(self) -> None:
        while True:
            try:
                if await self._hold():
                    if self._watch is not None and await self._watch_lost():
                        log.warning("task sweep: the state watch's consumer is gone; watching again")
                        await self._stop_watch()
                    if not self._indexing:
                        await self._start_watch()
                    elif not self.caught_up.is_set():
                        await self._check_empty()
                    if self.caught_up.is_set():
                        if self.feed is not None and self._watch is not None:
                            await self._end_watch()  # replayed: the projector's tap from here on
                        await self.sweep_once()
                else:
                    await self._stop_watch()
            except asyncio.CancelledError:
                raise
            except LoomError as exc:
                log.warning("task sweep: %s", exc.code)
            except Exception:
                # the sweep loop outlives a failed pass; the next pass retries
                log.exception("task sweep failed")
            await asyncio.sleep(self.interval)

    # --- the pass -----------------------------------------------------------------------------

    async def sweep_once(self, now: float | None = None) -> SweepReport:
        """Everything due by `now`, BATCH at a time, for up to `interval` (then the lease is
        renewed and the next pass goes on): a pass that took one BATCH and slept retired at most
        BATCH finished tasks a second, fewer than a busy server finishes, and the rest piled up
        in NATS and in the index (issue Q's soak: RSS grew for ten minutes)."""
        now = now if now is not None else time.time()
        report = SweepReport()
        until = time.monotonic() + self.interval
        while due := self.index.take(now, BATCH):
            if not await self._round(due, now, report) or time.monotonic() >= until:
                break
        self.passes += 1
        Sweeper.passes_in_process += 1
        self.pass_done.set()
        self.pass_done = asyncio.Event()
        return report

    async def _round(self, due: list[tuple[str, str, int]], now: float, report: SweepReport) -> bool:
        """One BATCH of due entries: their states read in one request, the finished tasks the
        projection holds retired as one atomic batch (`_retire`), the rest acted on CONCURRENCY
        at a time. False when NATS did not answer (the entries are looked at again next pass)."""
        try:
            states = await self.state.read_many([(org, task_id) for org, task_id, _ in due])
        except LoomError as exc:
            self._again(due, now, report, exc)
            return False
        applied = await self._projected_rev()
        finished: list[TaskRow] = []
        others: list[TaskRow] = []
        for org, task_id, rev in due:
            st = states.get((org, task_id))
            if st is None or st.row is None or st.rev != rev:
                report.skipped += 1  # a newer write is in the index already
            elif not st.row.terminal:
                others.append(st.row)
            elif applied < rev:
                self.index.later(org, task_id, rev, now + self.interval)  # the projection first
                report.skipped += 1
            else:
                finished.append(st.row)
        sem = asyncio.Semaphore(CONCURRENCY)

        async def one(row: TaskRow) -> None:
            async with sem:
                try:
                    await self._act(row, now, applied, report)
                except Skip:
                    report.skipped += 1
                except LoomError as exc:
                    if exc.code in _QUIET:
                        report.skipped += 1
                    else:
                        self._again([(row.org, row.task_id, row.rev)], now, report, exc)

        try:
            retired = await self._retire(finished)
        except kv.BatchRefused:
            others += finished  # one by one: the tasks that changed since they were read lose their compare-and-set
        except LoomError as exc:
            self._again([(row.org, row.task_id, row.rev) for row in finished], now, report, exc)
        else:
            report.retired += retired
        await asyncio.gather(*(one(row) for row in others))
        return True

    def _again(self, due: list[tuple[str, str, int]], now: float, report: SweepReport, exc: LoomError) -> None:
        """Entries whose action failed (NATS not answering): looked at again next pass (dropped,
        a finished task would stay in NATS for ever)."""
        for org, task_id, rev in due:
            self.index.later(org, task_id, rev, now + self.interval)
        report.errors += 1
        log.warning("task sweep: %s on %d due tasks (%s first)", exc.code, len(due), due[0][1])

    async def _retire(self, rows: list[TaskRow]) -> int:
        """Finished tasks replaced by their tombstones as one atomic batch: with every write
        fsynced, a tombstone each cost the disk more than the lifecycles' batched writes, and
        the sweep fell behind (issue Q's soak)."""
        if not rows:
            return 0
        revs = await self.state.tombstone_many([(row.org, row.task_id, row.rev, self._tombstone_ttl(row)) for row in rows])
        for row, rev in zip(rows, revs, strict=True):
            self.index.offer(row.org, row.task_id, rev, None)  # not left to the projector's tap: the tombstone may go first
        return len(rows)

    def _tombstone_ttl(self, row: TaskRow) -> float:
        # A task created without an idempotency_key has no key to keep taken: its tombstone goes
        # after KEYLESS_TOMBSTONE_SECONDS, not the idempotency window (a day), else nats-server
        # held every finished task's subject that long (issue Q's soak).
        return self.tombstone_ttl if row.idempotency_key else min(self.tombstone_ttl, KEYLESS_TOMBSTONE_SECONDS)

    async def sweep_task(self, org: str, task_id: str) -> SweepReport:
        """One task's due work now, as a pass would do it (whatever the index holds)."""
        report = SweepReport()
        st = await self.state.read(org, task_id)
        if st is None or st.row is None:
            return report
        due = due_at(st.row, self.retention)
        now = time.time()
        if due is not None and due <= now:
            with contextlib.suppress(Skip):
                await self._act(st.row, now, await self._projected_rev(), report)
        return report

    async def _projected_rev(self) -> int:
        return await ack_floor(self.bus.js, truth.STREAM, PROJECTOR_DURABLE)  # 0: nothing retires this pass

    async def _act(self, row: TaskRow, now: float, applied: int, report: SweepReport) -> None:
        """Act on `row`, the task's state as just read (its `rev` is the revision acted at)."""
        org, task_id, rev = row.org, row.task_id, row.rev
        if row.terminal:
            if applied < rev:
                self.index.later(org, task_id, rev, now + self.interval)  # the projection first
                raise Skip()
            with contextlib.suppress(WrongRevision):
                retired = await self.state.tombstone(org, task_id, rev, self._tombstone_ttl(row))
                self.index.offer(org, task_id, retired, None)  # not left to the projector's tap: the tombstone may go first
                report.retired += 1
            return
        if row.status == model.IN_PROGRESS:
            inbox = await self.directory.inbox(org, row.inbox)
            max_attempts = inbox.max_attempts if inbox else model.DEFAULT_MAX_ATTEMPTS

            def expire(cur: TaskRow) -> transitions.Change:
                if cur.status != model.IN_PROGRESS or (cur.lease_expires_at or 0.0) > time.time():
                    raise Skip()  # finished, or a heartbeat renewed it
                return transitions.expire(cur, max_attempts, time.time())

            out = await self.engine.mutate(org, task_id, expire, first=row)
            if out.row.status == model.BLOCKED:
                report.blocked += 1
            else:
                report.released += 1
        elif row.status == model.DEFERRED:

            def resume(cur: TaskRow) -> transitions.Change:
                if cur.status != model.DEFERRED or cur.resume_at is None or cur.resume_at > time.time():
                    raise Skip()
                return transitions.resume(cur, None, "resume_at reached", time.time())

            await self.engine.mutate(org, task_id, resume, first=row)
            report.resumed += 1
        elif row.status == model.TRIAGE:

            def escalate(cur: TaskRow) -> transitions.Change:
                change = transitions.escalate(cur, time.time())
                if change is None:
                    raise Skip()
                return change

            await self.engine.mutate(org, task_id, escalate, first=row)
            report.escalated += 1

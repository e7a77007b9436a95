"""The lease sweep (LOOM_TASK_LEASE_SWEEP_ENABLED): one replica at a time, under the cluster
lease `tasks.sweep`.

Each pass (every LOOM_TASK_SWEEP_INTERVAL_SECONDS):
- an expired lease returns its task to todo, and the max_attempts-th expiry blocks it on a
  person (a lease a heartbeat renewed is left alone: the lease row, not the store's copy of
  the claim's expiry, is the judge);
- a deferred task reaching resume_at returns to todo;
- a triage item older than its inbox's triage_escalate_after_seconds is escalated, once.
Every LOOM_TASK_RECONCILE_INTERVAL_SECONDS it also puts right lease rows out of step with their
task, leaving alone anything written in the last LOOM_TASK_RECONCILE_GRACE_SECONDS:
- an unfinished task with no lease row gets one (a create cut off before writing it);
- a lease row a version ahead of its task whose write never landed takes its task's version
  back, by writing the task again at the lease row's version (versions only grow);
- a finished task's lease row goes (they also expire by themselves).
Every change goes through the engine's compare-and-set, so a sweep racing an op loses cleanly.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from dataclasses import dataclass, field

from loom_core.aio import cancel_and_wait
from loom_core.bus import LeaseHeld, LeaseStore
from loom_core.bus.leases import Lease
from loom_core.errors import LoomError

from .. import keys as K
from ..directory import Directory
from ..domain import model, transitions
from ..domain.model import TaskRow
from ..keys import KeyRace, KeyState, TaskKeys
from ..service.engine import Engine, Skip
from ..store import TaskStore

log = logging.getLogger(__name__)

LEASE_KEY = "tasks.sweep"
BATCH = 500
CONCURRENCY = 16


@dataclass(slots=True)
class SweepReport:
    released: int = 0
    blocked: int = 0
    resumed: int = 0
    escalated: int = 0
    skipped: int = 0
    errors: int = 0


@dataclass(slots=True)
class ReconcileReport:
    created: int = 0
    restamped: int = 0
    removed: int = 0
    checked: int = 0
    notes: list[str] = field(default_factory=list)


class Sweeper:
    def __init__(
        self,
        engine: Engine,
        tasks: TaskStore,
        keys: TaskKeys,
        directory: Directory,
        leases: LeaseStore,
        *,
        interval: float,
        reconcile_interval: float,
        grace: float,
        enabled: bool = True,
        lease_key: str = LEASE_KEY,
    ) -> None:
        self.engine = engine
        self.tasks = tasks
        self.keys = keys
        self.directory = directory
        self.leases = leases
        self.interval = interval
        self.reconcile_interval = reconcile_interval
        self.grace = grace
        self.enabled = enabled
        self.lease_key = lease_key
        self.holder = f"sweep-{uuid.uuid4().hex[:12]}"
        self.passes = 0  # passes this replica ran (tests: only the lease holder sweeps)
        self._lease: Lease | None = None
        self._task: asyncio.Task[None] | None = None
        self._last_reconcile = 0.0
        # Tasks whose lease a heartbeat renewed: not re-checked before this time.
        self._renewed: dict[tuple[str, str], float] = {}

    async def start(self) -> None:
        if self.enabled and self._task is None:
            # The first reconcile waits one interval: a replica that just started has nothing
            # in flight to judge by yet.
            self._last_reconcile = time.monotonic()
            self._task = asyncio.create_task(self._run(), name="loom-task-sweep")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None
        if self._lease is not None:
            with contextlib.suppress(Exception):
                await self.leases.release(self._lease)
            self._lease = None

    @property
    def holds_lease(self) -> bool:
        return self._lease is not None and not self._lease.expired

    async def _hold(self) -> bool:
        """Take or keep the cluster lease; False when another replica holds it."""
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
                    await self.sweep_once()
                    if time.monotonic() - self._last_reconcile >= self.reconcile_interval:
                        self._last_reconcile = time.monotonic()
                        await self.reconcile_once()
            except asyncio.CancelledError:
                raise
            except LoomError as exc:
                log.warning("task sweep: %s", exc.code)
            except Exception:
                log.exception("task sweep failed")
            await asyncio.sleep(self.interval)

    # --- the pass -----------------------------------------------------------------------------

    async def sweep_once(self, now: float | None = None) -> SweepReport:
        self.passes += 1
        now = now if now is not None else time.time()
        report = SweepReport()
        rows = await self.tasks.due(now, BATCH)
        sem = asyncio.Semaphore(CONCURRENCY)

        async def one(row: TaskRow) -> None:
            async with sem:
                try:
                    await self._act(row, now, report)
                except Skip:
                    report.skipped += 1
                except LoomError as exc:
                    if exc.code not in ("TASK_TERMINAL", "PRECONDITION_FAILED", "RESOURCE_NOT_FOUND"):
                        report.errors += 1
                        log.warning("task sweep: %s on %s", exc.code, row.task_id)
                    else:
                        report.skipped += 1

        await asyncio.gather(*(one(r) for r in rows))
        cutoff = time.time()
        for key in [k for k, until in self._renewed.items() if until <= cutoff]:
            del self._renewed[key]
        return report

    async def _act(self, row: TaskRow, now: float, report: SweepReport) -> None:
        key = (row.org, row.task_id)
        if row.status == model.IN_PROGRESS:
            if self._renewed.get(key, 0.0) > now:
                raise Skip()
            inbox = await self.directory.inbox(row.org, row.inbox)
            max_attempts = inbox.max_attempts if inbox else model.DEFAULT_MAX_ATTEMPTS

            def expire(cur: TaskRow, st: KeyState | None) -> transitions.Change:
                if cur.status != model.IN_PROGRESS:
                    raise Skip()
                if st is not None and st.state == K.HELD and st.expires_at > time.time():
                    self._renewed[key] = st.expires_at
                    raise Skip()  # a heartbeat renewed it
                if st is not None and st.state != K.HELD and time.time() - st.at < self.grace:
                    raise Skip()  # a write is in flight (its row lands in a moment)
                if st is None and time.time() - cur.updated_at < self.grace:
                    raise Skip()
                return transitions.expire(cur, max_attempts, time.time())

            out = await self.engine.mutate(row.org, row.task_id, expire)
            if out.row.status == model.BLOCKED:
                report.blocked += 1
            else:
                report.released += 1
        elif row.status == model.DEFERRED:

            def resume(cur: TaskRow, _st: KeyState | None) -> transitions.Change:
                if cur.status != model.DEFERRED or cur.resume_at is None or cur.resume_at > time.time():
                    raise Skip()
                return transitions.resume(cur, None, "resume_at reached", time.time())

            await self.engine.mutate(row.org, row.task_id, resume)
            report.resumed += 1
        elif row.status == model.TRIAGE:

            def escalate(cur: TaskRow, _st: KeyState | None) -> transitions.Change:
                change = transitions.escalate(cur, time.time())
                if change is None:
                    raise Skip()
                return change

            await self.engine.mutate(row.org, row.task_id, escalate)
            report.escalated += 1

    # --- reconcile ----------------------------------------------------------------------------

    async def reconcile_once(self, grace: float | None = None) -> ReconcileReport:
        grace = self.grace if grace is None else grace
        report = ReconcileReport()
        now = time.time()
        keys = await self.keys.scan()
        open_rows = {(r.org, r.task_id): r for r in await self.tasks.open_tasks(100_000)}
        report.checked = len(open_rows)
        for ids, row in open_rows.items():
            st = keys.get(ids)
            if now - row.updated_at < grace:
                continue
            try:
                if st is None:
                    if row.status == model.IN_PROGRESS:
                        continue  # the expiry path ends it once its lease time has passed
                    rev = await self.keys.create(row.org, row.task_id, _value_for(row))
                    report.created += 1
                    if row.status == model.TODO:
                        await self.engine.hub.ready(row, rev)
                elif st.v > row.version and now - st.at >= grace and (st.state != K.HELD or st.expires_at <= now):
                    await self._restamp(row, st)
                    report.restamped += 1
            except KeyRace:
                continue
            except LoomError as exc:
                report.notes.append(f"{row.task_id}: {exc.code}")
        # Lease rows of tasks that are finished (or were never stored).
        strays = [ids for ids in keys if ids not in open_rows]
        stored = await self.tasks.status_of(strays)
        for ids in strays:
            st = keys[ids]
            if now - st.at < grace:
                continue
            found = stored.get(ids)
            if found is not None and found[0] not in model.TERMINAL:
                continue  # it became unfinished again since the scan
            try:
                await self.keys.delete(ids[0], ids[1], last=st.revision)
                report.removed += 1
            except KeyRace:
                continue
        return report

    async def _restamp(self, row: TaskRow, st: KeyState) -> None:
        """A lease row ahead of its task (a write that never landed): the task as stored is the
        truth; write it again at the lease row's version so the two agree and versions only grow."""

        def same(cur: TaskRow, now_st: KeyState | None) -> transitions.Change:
            if now_st is None or now_st.revision != st.revision:
                raise Skip()
            if cur.status == model.IN_PROGRESS:
                # A claim's status write that never landed ended with the claim: back to todo.
                return transitions.expire(cur, 10**9, time.time())
            return transitions.Change(cur.copy(updated_at=time.time()), "reconciled", {"lease_row_version": st.v})

        with contextlib.suppress(Skip):
            # The write it stands for is older than the grace: no use waiting for it to land.
            await self.engine.mutate(row.org, row.task_id, same, landing_wait=0.0)


def _value_for(row: TaskRow) -> dict[str, object]:
    if row.status in (model.TODO, model.TRIAGE):
        return K.idle(row.version, row.status)
    return K.parked(row.version, row.status)

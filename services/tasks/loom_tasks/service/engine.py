"""How a task changes: read its state on NATS, decide, write the next state by compare-and-set.

Every op that moves a task goes through `mutate` (or `claim` / `insert_new`, its special cases):
1. read the task's state (store/truth.py: the subject's last message and its revision);
2. decide the next row (domain/transitions), or refuse;
3. write the next value, carrying its event, at the revision read — ONE durable write; a race
   sends us back to 1.
A batch op's moves of distinct tasks go as one atomic batch of such writes (`write_many`), or, refused, one by one.
Nothing else is on the write path. The event on LOOM_TASK_EVENTS (task.updates, webhooks,
subscribers, task.history) and the ClickHouse projection are derived from that write by the
projector (consumers/projector.py), so a crash after the write loses nothing and a crash
before it changed nothing. The wake-up of waiting pulls is a hint sent after the write (a lost
one costs a pull one poll interval, never a task).
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Protocol

from loom_core.bus.kv import BatchRefused
from loom_core.errors import Conflict, ErrorCode, LoomError, NotFound

from ..domain import events as ev
from ..domain import model, transitions
from ..domain.model import Actor, TaskRow
from ..domain.transitions import Change
from ..store.tasks import TaskStore
from ..store.truth import State, TaskTruth, WrongRevision
from .admission import Admission

log = logging.getLogger(__name__)

MUTATE_ATTEMPTS = 50
#: Tasks in progress whose last write this replica made, remembered for the holder's next write.
HELD_CACHE = 20_000


class Skip(Exception):
    """A decision not to change the task after all (the sweep's, when a lease was renewed)."""


Decide = Callable[[TaskRow], Awaitable[Change] | Change]


class Waker(Protocol):
    async def ready(self, row: TaskRow, revision: int = 0) -> None: ...
    async def gone(self, org: str, inbox: str, task_id: str, version: int) -> None: ...
    def together(self) -> AbstractAsyncContextManager[None]: ...


@dataclass(slots=True)
class Committed:
    row: TaskRow
    event: ev.TaskEvent | None


#: A change decided, to write: the change, the revision its task was read at (0: a new task), the row before (None: a new task).
Decided = tuple[Change, int, TaskRow | None]


def _event(change: Change) -> ev.TaskEvent:
    row = change.row
    return ev.build(
        row, change.event, at=row.updated_at, data=change.data, actor=change.actor, actor_agent=change.actor_agent, reason=change.reason
    )


def _claimable(fresh: State | None, candidate: TaskRow, now: float) -> TaskRow | None:
    """The task as read (with its revision) when a pull may still claim it as `candidate`, else None."""
    cur = fresh.row if fresh is not None else None
    if cur is None or cur.status != model.TODO or cur.inbox != candidate.inbox or not cur.visible_to_pull(now):
        return None
    return cur


def no_task(task_id: str) -> NotFound:
    return NotFound(ErrorCode.RESOURCE_NOT_FOUND, "no such task", {"task_id": task_id})


class Engine:
    def __init__(self, truth: TaskTruth, projection: TaskStore, waker: Waker, admission: Admission | None = None) -> None:
        self.truth = truth
        self.projection = projection
        self.waker = waker
        self.admission = admission  # bounded projection lag (service/admission.py)
        # The row (with its revision) of each task in progress whose last write this replica
        # made: a fenced write from the holder is decided on it and written at its revision, so
        # it needs no read first. A stale entry costs nothing but a retry: the compare-and-set
        # at its revision fails, the entry goes, and the write reads the truth.
        self._held: OrderedDict[tuple[str, str], TaskRow] = OrderedDict()
        #: Atomic batches of writes written, and refused (then written one by one): the benchmark's report.
        self.batches_written = 0
        self.batches_refused = 0

    # --- reading

    async def current(self, org: str, task_id: str) -> TaskRow | None:
        """The task as it is now: its state on NATS, or — once a finished task left NATS — the
        projection's row (its `rev` then names the tombstone, so a reopen writes over it)."""
        st = await self.truth.read(org, task_id)
        if st is not None and st.row is not None:
            return st.row
        row = await self.projection.get(org, task_id)
        if row is not None:
            row.rev = st.rev if st is not None else 0
        return row

    def held(self, org: str, task_id: str) -> TaskRow | None:
        """A copy of the task as this replica last wrote it while in progress (with its
        revision), or None. Only for writes that compare-and-set at that revision."""
        row = self._held.get((org, task_id))
        return row.copy() if row is not None else None

    def _remember(self, row: TaskRow) -> None:
        key = (row.org, row.task_id)
        if row.status == model.IN_PROGRESS:
            self._held[key] = row
            self._held.move_to_end(key)
            if len(self._held) > HELD_CACHE:
                self._held.popitem(last=False)
        else:
            self._held.pop(key, None)

    # --- writing

    async def _write(self, change: Change, last: int, before: TaskRow | None) -> Committed:
        row = change.row
        event = _event(change)
        if self.admission is not None:
            await self.admission.admit()
        try:
            rev = await self.truth.write(row, event, last)
        except WrongRevision:
            self._held.pop((row.org, row.task_id), None)
            raise
        if self.admission is not None:
            self.admission.wrote(rev)
        return await self._written(row, rev, event, before)

    async def _written(self, row: TaskRow, rev: int, event: ev.TaskEvent | None, before: TaskRow | None) -> Committed:
        row.rev = rev
        if row.status == model.IN_PROGRESS and not row.fence:
            row.fence = rev
        self._remember(row)
        await self._wake(row, before)
        return Committed(row, event)

    async def write_many(self, moves: Sequence[Decided]) -> list[Committed] | None:
        """Moves of distinct tasks, each (change, the revision it was decided at, the row before),
        written as ONE atomic batch (TaskTruth.write_many): a batch op's hundred writes cost one
        answer from the stream instead of a hundred. Their commits in order, or None when nothing
        was written (a move lost its race, the stream takes no batches, fewer than two moves, a
        task named twice): the caller then makes each move on its own, as one write each."""
        if len(moves) < 2 or not self.truth.atomic or len({(m[0].row.org, m[0].row.task_id) for m in moves}) < len(moves):
            return None
        events = [_event(change) for change, _, _ in moves]
        if self.admission is not None:
            await self.admission.admit()
        try:
            revs = await self.truth.write_many([(change.row, event, last) for (change, last, _), event in zip(moves, events, strict=True)])
        except BatchRefused:
            self.batches_refused += 1
            return None
        self.batches_written += 1
        if self.admission is not None:
            self.admission.wrote(revs[-1])
        async with self.waker.together():  # the batch's wake-ups as one message
            return [
                await self._written(change.row, rev, event, before)
                for (change, _, before), rev, event in zip(moves, revs, events, strict=True)
            ]

    async def _wake(self, row: TaskRow, before: TaskRow | None) -> None:
        if before is not None and before.status == model.TODO and (row.status != model.TODO or before.inbox != row.inbox):
            await self.waker.gone(row.org, before.inbox, row.task_id, row.version)
        if row.status == model.TODO:
            await self.waker.ready(row, row.rev)

    @staticmethod
    async def decided(row: TaskRow, decide: Decide) -> Decided:
        """`decide` on (a copy of) `row`, as read with its revision: the move to write at that revision."""
        out = decide(row.copy())
        change = await out if asyncio.iscoroutine(out) else out
        assert isinstance(change, Change)
        change.row.version = row.version + 1
        return change, row.rev, row

    async def mutate(self, org: str, task_id: str, decide: Decide, *, first: TaskRow | None = None) -> Committed:
        """Read, decide, compare-and-set: the one way a task changes (claims aside). `first`: the
        task as the caller has just read it (with its rev), tried before reading again."""
        for attempt in range(MUTATE_ATTEMPTS):
            row = first if first is not None and attempt == 0 else await self.current(org, task_id)
            if row is None:
                raise no_task(task_id)
            change, last, before = await self.decided(row, decide)
            try:
                return await self._write(change, last, before)
            except WrongRevision:
                if attempt:
                    await asyncio.sleep(0.002 * min(attempt, 20))
        raise Conflict(
            ErrorCode.PRECONDITION_FAILED, "the task kept changing under this call; retry", {"task_id": task_id, "reason": "contention"}
        )

    async def touch(self, row: TaskRow) -> int:
        """A write that is no transition (a heartbeat): same version, no event. WrongRevision on a race."""
        try:
            rev = await self.truth.write(row, None, row.rev)
        except WrongRevision:
            self._held.pop((row.org, row.task_id), None)
            raise
        if self.admission is not None:  # counted, not held back: a heartbeat keeps a lease alive
            self.admission.wrote(rev)
        row.rev = rev
        self._remember(row)
        return rev

    async def claim(self, row: TaskRow, actor: Actor, lease_seconds: int, now: float) -> Committed | None:
        """Claim a candidate: None when it is no longer claimable (someone else won it, or it
        moved on). A candidate that names its revision (a wake-up or the projection does) is
        tried at that revision first, so an uncontended claim is a single compare-and-set."""
        for attempt in range(2):
            if not row.rev or attempt:
                fresh = await self.truth.read(row.org, row.task_id)
                if fresh is not None and fresh.rev == row.rev and attempt:
                    return None
                cur = _claimable(fresh, row, now)
                if cur is None:
                    return None
                row = cur
            try:
                return await self._write(*self._claiming(row, actor, lease_seconds, now))
            except WrongRevision:
                continue
        return None

    async def claim_many(self, rows: list[TaskRow], actor: Actor, lease_seconds: int, now: float) -> list[Committed | BaseException | None]:
        """Claim candidates of a pull (distinct tasks): each claim's commit, None (no longer
        claimable) or what it raised. When every candidate names its revision, the claims go as
        one atomic write first; when that is refused (another claim won one of them), each is
        tried on its own as `claim` tries it."""
        if len(rows) == 1:
            # The pull's lone candidate (a wake-up's): claimed in the pull's own task, not one
            # gather makes for it (a turn of the loop on the wake path).
            try:
                return [await self.claim(rows[0], actor, lease_seconds, now)]
            except Exception as exc:  # noqa: BLE001 - answered as the gather below answers it
                return [exc]
        if not all(row.rev for row in rows):
            return await self._claim_each(rows, actor, lease_seconds, now)
        try:
            batch = await self.write_many([self._claiming(row, actor, lease_seconds, now) for row in rows])
            if batch is not None:
                return list(batch)
            # Refused: a claim lost its race, most often most of them (a pull on another
            # replica took the same candidates and won them all). One read of them all, and
            # those still claimable go as one batch again, instead of a claim each and a read
            # each lost one (the batched benchmark: ~3.5 NATS messages a lifecycle).
            fresh = await self.truth.read_many([(row.org, row.task_id) for row in rows])
        except LoomError as exc:  # not answered: nor is any of the claims
            return [exc] * len(rows)
        current = [_claimable(fresh.get((row.org, row.task_id)), row, now) for row in rows]
        still = [cur for cur in current if cur is not None]
        try:
            batch = await self.write_many([self._claiming(cur, actor, lease_seconds, now) for cur in still])
        except LoomError as exc:
            return [None if cur is None else exc for cur in current]
        claims = iter(batch if batch is not None else await self._claim_each(still, actor, lease_seconds, now))
        return [None if cur is None else next(claims) for cur in current]

    async def _claim_each(
        self, rows: list[TaskRow], actor: Actor, lease_seconds: int, now: float
    ) -> list[Committed | BaseException | None]:
        return await asyncio.gather(*(self.claim(row, actor, lease_seconds, now) for row in rows), return_exceptions=True)

    @staticmethod
    def _claiming(row: TaskRow, actor: Actor, lease_seconds: int, now: float) -> Decided:
        change = transitions.claim(row, actor, 0, lease_seconds, now)
        change.row.version = row.version + 1
        return change, row.rev, row

    async def insert_new(self, row: TaskRow, change: Change) -> Committed | None:
        """A new task: its first value, written only if its subject holds none. None when it
        does (an idempotent create's task_id names an existing task)."""
        try:
            return await self._write(change, 0, None)
        except WrongRevision:
            return None

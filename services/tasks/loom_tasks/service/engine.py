"""How a task changes: read its lease row, decide, compare-and-set the lease row, write the row
and its event, tell the other replicas. Every op that moves a task goes through `mutate` (or
`claim`, its fast path), so they all serialise on the task's lease row the same way.

Order of a change (see keys.py for why):
1. read the lease row (state, v) — absent for a task with no live key;
2. load the task row at version v (this replica's cache, else the store; a row still landing
   from the previous writer is waited for briefly);
3. decide the next row (domain/transitions), or refuse;
4. write the lease row's next value at the revision read — a race sends us back to 1;
5. write the row at version v+1 (group commit);
6. publish the event (JetStream: the updates cursor, NATS subscribers, webhooks, and — through
   consumers/history.py — task.history) and the wake-up / gone notice.
A crash between 4 and 5 leaves the lease row one version ahead of the store; the sweep's
reconcile puts that right after its grace.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from loom_core.errors import Conflict, NotFound

from .. import keys as K
from ..consumers.wake import WakeHub
from ..domain import events as ev
from ..domain import model, transitions
from ..domain.model import Actor, TaskRow
from ..domain.transitions import Change
from ..events import EventPublisher
from ..keys import KeyRace, KeyState, TaskKeys
from ..store import BatchWriter, TaskStore
from ..store.tasks import to_store

log = logging.getLogger(__name__)

MUTATE_ATTEMPTS = 50
#: How long a reader waits for a row the previous writer announced (lease row v) to land.
LANDING_WAIT_SECONDS = 3.0
#: Lease rows of finished tasks go by themselves after this long.
FINISHED_KEY_TTL_SECONDS = 900
CACHE_ROWS = 50_000


class Skip(Exception):
    """A decision not to change the task after all (the sweep's, when a lease was renewed)."""


Decide = Callable[[TaskRow, KeyState | None], Awaitable[Change] | Change]


@dataclass(slots=True)
class Committed:
    row: TaskRow
    event: dict[str, Any]


class Hints:
    """The lease rows this replica last wrote, with their revisions: a first guess that saves a
    read. Every write is compare-and-set at the guessed revision, so a stale guess only costs
    the read it tried to save."""

    def __init__(self, size: int = CACHE_ROWS) -> None:
        self.size = size
        self._states: OrderedDict[tuple[str, str], KeyState] = OrderedDict()

    def get(self, org: str, task_id: str) -> KeyState | None:
        return self._states.get((org, task_id))

    def put(self, org: str, task_id: str, value: dict[str, Any], revision: int) -> None:
        key = (org, task_id)
        self._states[key] = K.state_of(value, revision)
        self._states.move_to_end(key)
        while len(self._states) > self.size:
            self._states.popitem(last=False)

    def forget(self, org: str, task_id: str) -> None:
        self._states.pop((org, task_id), None)


class RowCache:
    """The newest row this replica wrote or read, per task (a hint: always checked against the
    lease row's v before use)."""

    def __init__(self, size: int = CACHE_ROWS) -> None:
        self.size = size
        self._rows: OrderedDict[tuple[str, str], TaskRow] = OrderedDict()

    def get(self, org: str, task_id: str) -> TaskRow | None:
        return self._rows.get((org, task_id))

    def put(self, row: TaskRow) -> None:
        key = (row.org, row.task_id)
        have = self._rows.get(key)
        if have is not None and have.version > row.version:
            return
        self._rows[key] = row
        self._rows.move_to_end(key)
        while len(self._rows) > self.size:
            self._rows.popitem(last=False)


def key_value_for(row: TaskRow, before: KeyState | None, holder: tuple[str, str, float, int] | None = None) -> dict[str, Any]:
    """The lease row's value for `row` (its version already set)."""
    if row.status in (model.TODO, model.TRIAGE):
        return K.idle(row.version, row.status)
    if row.status == model.IN_PROGRESS:
        if holder is not None:
            subject, agent, expires_at, lease = holder
            return K.held(row.version, subject, agent, expires_at, lease)
        if before is not None and before.state == K.HELD:
            return K.held(row.version, before.holder, before.agent, before.expires_at, before.lease_seconds, fence=before.fence)
        # A claim whose lease row was lost: the row's own record of it (the sweep expires it).
        return K.held(row.version, row.claimed_by, row.claimed_agent, row.lease_expires_at or 0.0, row.lease_seconds, fence=row.fence)
    return K.parked(row.version, row.status)


class Engine:
    def __init__(self, tasks: TaskStore, writer: BatchWriter, keys: TaskKeys, publisher: EventPublisher, hub: WakeHub) -> None:
        self.tasks = tasks
        self.writer = writer
        self.keys = keys
        self.publisher = publisher
        self.hub = hub
        self.cache = RowCache()
        self.hints = Hints()

    # --- reading

    async def read(self, org: str, task_id: str) -> TaskRow | None:
        """The stored row, fresh from the store."""
        row = await self.tasks.get(org, task_id)
        if row is not None:
            self.cache.put(row)
        return row

    async def load(self, org: str, task_id: str, want: int, landing_wait: float = LANDING_WAIT_SECONDS) -> TaskRow | None:
        """The row at version `want` (the lease row's v): cached, stored, or still landing."""
        row = self.cache.get(org, task_id)
        if row is not None and row.version == want:
            return row.copy()
        deadline = time.monotonic() + landing_wait
        delay = 0.005
        while True:
            row = await self.tasks.get(org, task_id)
            if row is None or row.version >= want or time.monotonic() >= deadline:
                break
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.1)
        if row is not None:
            self.cache.put(row)
            return row.copy()
        return None

    # --- writing

    async def commit(
        self, change: Change, before_status: str, *, event: dict[str, Any] | None = None, behind: bool = False, revision: int = 0
    ) -> Committed:
        """Steps 5 and 6 for a change whose lease row is already written. `behind`: the row is
        written behind (the lease row already holds the change durably; see `claim`)."""
        row = change.row
        now = row.updated_at
        event = event or ev.build(row, change.event, at=now, data=change.data, actor=change.actor, actor_agent=change.actor_agent)
        self.cache.put(row)
        await self.writer.write([to_store(row)], wait=not behind)
        await self.publisher.publish(event)
        left = before_inbox(change)
        if before_status == model.TODO and (row.status != model.TODO or left != row.inbox):
            await self.hub.gone(row.org, left, row.task_id, row.version)
        if row.status == model.TODO:
            await self.hub.ready(row, revision)
        return Committed(row, event)

    async def mutate(
        self,
        org: str,
        task_id: str,
        decide: Decide,
        *,
        finished_ttl: float = FINISHED_KEY_TTL_SECONDS,
        landing_wait: float = LANDING_WAIT_SECONDS,
        first: tuple[KeyState, TaskRow] | None = None,
    ) -> Committed:
        """Read, decide, compare-and-set, write: the one way a task changes (claims aside).
        `first`: a lease row and its row the caller has just read, tried before reading again."""
        for attempt in range(MUTATE_ATTEMPTS):
            if first is not None and attempt == 0 and first[1].version <= first[0].v:
                st, row = first[0], first[1].copy()
                base = max(st.v, row.version)
            else:
                st, row, base = await self._current(org, task_id, landing_wait)
            before_status = row.status
            out = decide(row.copy(), st)
            change = await out if asyncio.iscoroutine(out) else out
            assert isinstance(change, Change)
            change.row.version = base + 1
            value = key_value_for(change.row, st)
            ttl = finished_ttl if change.row.terminal else None
            try:
                if st is None:
                    rev = await self.keys.create(org, task_id, value, ttl=ttl)
                else:
                    rev = await self.keys.update(org, task_id, value, last=st.revision, ttl=ttl)
            except KeyRace:
                self.hints.forget(org, task_id)
                if attempt:
                    await asyncio.sleep(0.002 * min(attempt, 20))
                continue
            self.hints.put(org, task_id, value, rev)
            return await self.commit(change, before_status, revision=rev)
        raise Conflict("PRECONDITION_FAILED", "the task kept changing under this call; retry", {"task_id": task_id, "reason": "contention"})

    async def _current(self, org: str, task_id: str, landing_wait: float) -> tuple[KeyState | None, TaskRow, int]:
        """The lease row, the task row it stands for, and the version the next write builds on."""
        st = await self.keys.get(org, task_id)
        row = await self.read(org, task_id) if st is None else await self.load(org, task_id, st.v, landing_wait)
        if row is None:
            raise NotFound("RESOURCE_NOT_FOUND", "no such task", {"task_id": task_id})
        return st, row, row.version if st is None else max(st.v, row.version)

    async def claim(self, row: TaskRow, actor: Actor, lease_seconds: int, now: float, revision: int = 0) -> Committed | None:
        """Claim a candidate row: None when it is no longer claimable (someone else won it, or
        it moved on). The lease row says whether the candidate is current, so no store read.
        `revision`: the lease row's revision when the candidate was announced (a wake-up carries
        it), tried first so an uncontended claim is a single compare-and-set."""
        if revision or self.hints.get(row.org, row.task_id) is not None:
            hint = self.hints.get(row.org, row.task_id)
            guess = K.state_of(K.idle(row.version, model.TODO), revision) if revision else hint
            if guess is not None and guess.state == K.IDLE and guess.v == row.version and guess.status == model.TODO:
                got = await self._claim_at(row, guess, actor, lease_seconds, now)
                if got is not None:
                    return got
        st = await self.keys.get(row.org, row.task_id)
        if st is None or st.state != K.IDLE or st.status != model.TODO:
            return None
        if st.v != row.version:
            fresh = await self.load(row.org, row.task_id, st.v)
            if fresh is None or fresh.version != st.v or fresh.status != model.TODO or fresh.inbox != row.inbox:
                return None
            row = fresh
        return await self._claim_at(row, st, actor, lease_seconds, now)

    async def _claim_at(self, row: TaskRow, st: KeyState, actor: Actor, lease_seconds: int, now: float) -> Committed | None:
        expires = now + lease_seconds
        value = K.held(st.v + 1, actor.subject, actor.agent, expires, lease_seconds)
        try:
            fence = await self.keys.update(row.org, row.task_id, value, last=st.revision)
        except KeyRace:
            self.hints.forget(row.org, row.task_id)
            return None
        self.hints.put(row.org, row.task_id, value, fence)
        change = transitions.claim(row, actor, fence, lease_seconds, now)
        change.row.version = st.v + 1
        # The claim is already durable in the lease row (held, v+1, the fence): its task row is
        # written behind, off the pull's path. Readers that need the current row wait for
        # version v+1 to land (load), and a row that never lands (the replica died first) is
        # what the sweep's reconcile restores: the lease row a version ahead goes back to todo.
        return await self.commit(change, model.TODO, behind=True)

    async def insert_new(self, row: TaskRow, change: Change) -> Committed:
        """A created task: its row and event first, then its lease row (a create cut off in
        between leaves a task with no lease row, which the sweep's reconcile writes)."""
        now = row.updated_at
        event = ev.build(row, change.event, at=now, data=change.data, actor=change.actor, actor_agent=change.actor_agent)
        await self.writer.write([to_store(row)])
        self.cache.put(row)
        value = key_value_for(row, None)
        rev = 0
        try:
            rev = await self.keys.create(row.org, row.task_id, value)
            self.hints.put(row.org, row.task_id, value, rev)
        except KeyRace:
            pass  # someone (a cancel) already moved it; their lease row stands
        await self.publisher.publish(event)
        if row.status == model.TODO and rev:
            await self.hub.ready(row, rev)
        return Committed(row, event)


def before_inbox(change: Change) -> str:
    """The inbox a task left (reassign moves it), for the gone notice."""
    return str(change.data.get("from_inbox") or change.row.inbox)

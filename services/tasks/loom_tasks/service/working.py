"""Working (the owner's ops): pull, claim, heartbeat, progress, complete, fail, defer, block.

Every owner write presents the claim's fence. The lease row is the judge: a write stands only
when the lease row still holds that fence, and it replaces the lease row by compare-and-set
before the task row is written, so a sweep or a second writer racing it loses cleanly. A late
write from a holder whose lease ran out but that nobody has taken over yet still stands (its
fence is still the current one); once the sweep or another claim moved the task, the old fence
gets 409 TASK_FENCE_STALE.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any

from loom_core.chain import CallContext
from loom_core.errors import Conflict, ErrorCode, LoomError, Unavailable, count_or_default
from loom_core.roles import Role

from ..domain import events as ev
from ..domain import model, transitions
from ..domain import validate as v
from ..domain.model import Actor, InboxRow, TaskRow
from ..events import READ_WAIT_SECONDS
from ..store.truth import WrongRevision
from .access import no_task
from .deps import Deps
from .engine import Committed, Decided

# A fenced state change: the row, who acts, now (epoch seconds), the inbox (when asked for) -> the change.
Move = Callable[[TaskRow, Actor, float, InboxRow | None], transitions.Change]

MAX_PULL = 100


def stale(task_id: str, fence: int) -> Conflict:
    return Conflict(
        ErrorCode.TASK_FENCE_STALE,
        "this fence no longer holds the task (its lease expired and moved on, or another claim took it)",
        {"task_id": task_id, "fence": fence},
    )


def not_open(row: TaskRow, now: float) -> Conflict:
    """A todo task whose not_before is still ahead: hidden from pull, and refused to a claim by id
    until then (retry at `not_before`)."""
    opens = v.format_time(row.not_before)
    return Conflict(
        ErrorCode.PRECONDITION_FAILED,
        f"the task is not open to claims before {opens}",
        {
            "task_id": row.task_id,
            "reason": "not_before",
            "not_before": opens,
            "retry_after_s": round(max((row.not_before or now) - now, 0), 3),
        },
    )


def check_fence(row: TaskRow, fence: int) -> None:
    """A fenced write stands while the task is held under that fence (even past its lease's
    expiry, until the sweep or another claim moved it)."""
    if row.status != model.IN_PROGRESS:
        if row.terminal:
            raise transitions.terminal(row)
        raise stale(row.task_id, fence)
    if row.fence != fence:
        raise stale(row.task_id, fence)


class WorkingOps:
    def __init__(self, deps: Deps) -> None:
        self.d = deps

    # --- pull and claim ----------------------------------------------------------------------

    async def pull(
        self, ctx: CallContext, inbox_name: str, kinds: Sequence[str], status: str, wait_seconds: int, lease_seconds: int, max_tasks: int
    ) -> list[TaskRow]:
        v.inbox_name(inbox_name)
        kinds = [v.kind(k, "kinds") for k in kinds]
        wait = v.wait_seconds(wait_seconds)
        want = count_or_default("max_tasks", max_tasks, 1, MAX_PULL)
        inbox = await self.d.access.inbox(ctx, inbox_name, Role.WRITER)
        if status not in ("", model.TODO, model.TRIAGE):
            raise v.invalid_field("status", "todo (claim) or triage (list review items)")
        if status == model.TRIAGE:
            return await self._triage(inbox, kinds, wait, want)
        lease = v.lease_seconds(lease_seconds, inbox.default_lease_seconds)
        actor = Actor(ctx.subject, ctx.agent_label, owner=True)
        hub = self.d.hub
        q = hub.queue(ctx.org, inbox.name)
        deadline = time.monotonic() + wait
        force = False
        with q.pulling(want):
            while True:
                # Time left to wait: the store's answer need not come first (service/wake.py `refresh`).
                waits = deadline - time.monotonic() > 0
                claimed = await self._claim_some(inbox, q, kinds, actor, lease, want, force, waits)
                remaining = deadline - time.monotonic()
                if claimed or remaining <= 0:
                    ctx.out_hits = len(claimed)
                    return claimed
                timeout = min(remaining, self.d.settings.task_pull_poll_seconds)
                due = q.next_due(time.time())
                if due is not None:
                    timeout = min(timeout, max(due - time.time(), 0.01))
                # Rows another replica's pulls were to claim are this pull's to take once their grace is over.
                promised = q.promised_for()
                looks_again = promised is not None and promised < timeout
                if looks_again:
                    timeout = max(promised or 0.0, 0.01)
                woken = await q.wait(timeout)
                # Woken: the wake-up brought the row, no store read needed. Timed out: re-read.
                force = not woken and not looks_again

    async def _claim_some(
        self, inbox: InboxRow, q: Any, kinds: Sequence[str], actor: Actor, lease: int, want: int, force: bool, waits: bool
    ) -> list[TaskRow]:
        hub = self.d.hub
        await hub.refresh(inbox.org, inbox.name, q, force=force, waits=waits)
        out: list[TaskRow] = []
        tried_filtered = False
        while len(out) < want:
            now = time.time()
            candidates = q.ordered(kinds, now, want - len(out))
            if not candidates:
                if kinds and not q.complete and not tried_filtered:
                    # The queue holds the first rows of every kind; ask for these kinds alone.
                    tried_filtered = True
                    await hub.refresh(inbox.org, inbox.name, q, kinds=kinds, force=True)
                    continue
                break
            # Claim the next candidates at once (each its own compare-and-set), in pull order.
            chunk = candidates[: want - len(out)]
            for row in chunk:
                q.reserved.add(row.task_id)
            try:
                results = await self.d.engine.claim_many(
                    [row.copy(rev=q.revs.get(row.task_id) or row.rev) for row in chunk], actor, lease, time.time()
                )
            finally:
                for row in chunk:
                    q.reserved.discard(row.task_id)
            failure: BaseException | None = None
            for row, got in zip(chunk, results, strict=True):
                if isinstance(got, BaseException):
                    failure = failure or got
                    continue
                q.drop(row.task_id, None if got is None else got.row.version)
                if got is not None:
                    out.append(got.row)
            if failure is not None:
                if not out:
                    raise failure
                break  # answer with what this call holds; the rest can be pulled again
        q.claimed(len(out))
        return out

    async def _triage(self, inbox: InboxRow, kinds: Sequence[str], wait: int, want: int) -> list[TaskRow]:
        """Review items, unclaimed: nothing changes, the owner decides with accept / wont_do."""
        deadline = time.monotonic() + wait
        q = self.d.hub.queue(inbox.org, inbox.name)
        await self.d.projected()
        while True:
            rows = await self.d.tasks.in_status(inbox.org, inbox.name, model.TRIAGE, kinds, want)
            remaining = deadline - time.monotonic()
            if rows or remaining <= 0:
                return rows
            await q.wait(min(remaining, self.d.settings.task_pull_poll_seconds))

    async def claim(self, ctx: CallContext, task_id: str, lease_seconds: int) -> TaskRow:
        v.task_id(task_id)
        row = await self.d.engine.current(ctx.org, task_id)
        if row is None:
            raise no_task(task_id)
        actor = await self.d.access.owner(ctx, row)
        inbox = await self.d.directory.inbox(ctx.org, row.inbox)
        lease = v.lease_seconds(lease_seconds, inbox.default_lease_seconds if inbox else model.DEFAULT_LEASE_SECONDS)
        for _ in range(3):
            if row.status != model.TODO:
                if row.terminal:
                    raise transitions.terminal(row)
                raise Conflict(
                    ErrorCode.PRECONDITION_FAILED,
                    f"only a todo task can be claimed; this one is {row.status}",
                    {"task_id": task_id, "status": row.status, "reason": "status"},
                    retry=False,
                )
            now = time.time()
            if not row.visible_to_pull(now):
                raise not_open(row, now)
            got = await self.d.engine.claim(row, actor, lease, now)
            if got is not None:
                return got.row
            fresh = await self.d.engine.current(ctx.org, task_id)
            if fresh is None:
                raise no_task(task_id)
            row = fresh
        raise Conflict(ErrorCode.PRECONDITION_FAILED, "another claim won the task", {"task_id": task_id, "reason": "claimed"}, retry=False)

    # --- fenced writes -------------------------------------------------------------------------

    async def _held(self, ctx: CallContext, task_id: str, fence: int, *, remembered: bool = False) -> tuple[TaskRow, Actor]:
        """The task a fenced write acts on, read from its state on NATS, or the refusal: 404,
        403, 409 TASK_TERMINAL, 409 TASK_FENCE_STALE. `remembered`: the caller writes by
        compare-and-set at the row's revision, so the row this replica last wrote under this
        fence serves (no read); anything else (no such row, another fence) reads the truth."""
        v.task_id(task_id)
        v.fence(fence)
        if remembered:
            mine = self.d.engine.held(ctx.org, task_id)
            if mine is not None and mine.fence == fence:
                actor = await self.d.access.owner(ctx, mine)
                return mine, actor
        row = await self.d.engine.current(ctx.org, task_id)
        if row is None:
            raise no_task(task_id)
        actor = await self.d.access.owner(ctx, row)
        check_fence(row, fence)
        return row, actor

    async def heartbeat(self, ctx: CallContext, task_id: str, fence: int, lease_seconds: int) -> tuple[int, float]:
        for _ in range(20):
            row, _actor = await self._held(ctx, task_id, fence, remembered=True)
            lease = v.lease_seconds(lease_seconds, row.lease_seconds or model.DEFAULT_LEASE_SECONDS)
            expires = time.time() + lease
            try:
                await self.d.engine.touch(row.copy(lease_expires_at=expires, lease_seconds=lease))
            except WrongRevision:
                continue  # a concurrent heartbeat or update: read again
            return fence, expires
        raise Conflict(ErrorCode.PRECONDITION_FAILED, "the task kept changing under this heartbeat; retry", {"task_id": task_id})

    async def progress(self, ctx: CallContext, task_id: str, fence: int, note: str, percent: int) -> str:
        row, actor = await self._held(ctx, task_id, fence)
        note = v.text(note, "note", v.MAX_NOTE)
        if percent < 0 or percent > 100:
            raise v.invalid_field("percent", "between 0 and 100")
        now = time.time()
        data: dict[str, Any] = {"note": note}
        if percent:
            data["percent"] = percent
        # A note changes no state: its event goes to the event stream directly, once the events
        # of the task's writes before it (its claim's) are there, so a subscriber never reads a
        # note before the claim it belongs to.
        admission = self.d.engine.admission
        if admission is not None and not await admission.reached(row.rev, READ_WAIT_SECONDS):
            raise Unavailable(
                ErrorCode.BACKEND_UNAVAILABLE,
                "the task's earlier events are not published yet; retry",
                {"reason": "projection_behind", "retry_after_s": 1},
            )
        event = ev.build(row, "progress", at=now, data=data, actor=actor.subject, actor_agent=actor.agent, eid=ev.progress_event_id(row))
        await self.d.publisher.publish(event)
        return str(event["event_id"])

    async def _fenced(self, ctx: CallContext, task_id: str, fence: int, move: Move, *, with_inbox: bool = False) -> TaskRow:
        """A state change by the claim's holder: the fence checked against the task's state."""
        first, actor = await self._held(ctx, task_id, fence, remembered=True)
        inbox = await self.d.directory.inbox(ctx.org, first.inbox) if with_inbox else None
        out = await self.d.engine.mutate(ctx.org, task_id, _fenced_by(fence, move, actor, inbox), first=first)
        return out.row

    async def _fenced_many(
        self, ctx: CallContext, moves: list[tuple[str, int, Move] | LoomError]
    ) -> list[tuple[TaskRow | None, LoomError | None]]:
        """Fenced state changes of several tasks (a batch op's), each decided as `_fenced` decides
        it, written as one atomic batch; when that is refused (a task moved meanwhile, or named
        twice), each written on its own as `_fenced` writes it. Each answered on its own."""

        async def decided(task_id: str, fence: int, move: Move) -> Decided | LoomError:
            try:
                first, actor = await self._held(ctx, task_id, fence, remembered=True)
                return await self.d.engine.decided(first, _fenced_by(fence, move, actor, None))
            except LoomError as exc:
                return exc

        decisions = await asyncio.gather(*(decided(*m) if not isinstance(m, LoomError) else _answer(m) for m in moves))
        batch: list[Committed] | LoomError | None
        try:
            batch = await self.d.engine.write_many([d for d in decisions if not isinstance(d, LoomError)])
        except LoomError as exc:  # not answered: nor is any of the moves
            batch = exc

        async def one(m: tuple[str, int, Move] | LoomError, d: Decided | LoomError) -> tuple[TaskRow | None, LoomError | None]:
            if isinstance(d, LoomError):
                return None, d
            if isinstance(batch, LoomError):
                return None, batch
            if batch is not None:
                return d[0].row, None
            assert not isinstance(m, LoomError)
            try:
                return await self._fenced(ctx, *m), None
            except LoomError as exc:
                return None, exc

        return list(await asyncio.gather(*(one(m, d) for m, d in zip(moves, decisions, strict=True))))

    async def complete(self, ctx: CallContext, task_id: str, fence: int, outcome: dict[str, Any], reason: str = "") -> TaskRow:
        return await self._fenced(ctx, task_id, fence, _completing(outcome, reason))

    async def complete_many(
        self, ctx: CallContext, items: list[tuple[str, int, dict[str, Any], str]]
    ) -> list[tuple[TaskRow | None, LoomError | None]]:
        """task.complete_many: each (task_id, fence, outcome, reason) as task.complete takes it, answered on its own."""
        v.batch_size(len(items), "tasks")
        moves: list[tuple[str, int, Move] | LoomError] = []
        for task_id, fence, outcome, reason in items:
            try:
                moves.append((task_id, fence, _completing(outcome, reason)))
            except LoomError as exc:
                moves.append(exc)
        return await self._fenced_many(ctx, moves)

    async def fail(self, ctx: CallContext, task_id: str, fence: int, reason: str) -> TaskRow:
        why = v.reason(reason, required=True)
        return await self._fenced(ctx, task_id, fence, lambda row, actor, now, _inbox: transitions.fail(row, actor, why, now))

    async def defer(self, ctx: CallContext, task_id: str, fence: int, resume_at: str, reason: str) -> TaskRow:
        when = v.parse_time(resume_at, "resume_at")
        if when is None:
            raise v.invalid_field("resume_at", "required: when the task comes back to todo")
        why = v.reason(reason, required=True)

        def move(row: TaskRow, actor: Actor, now: float, inbox: InboxRow | None) -> transitions.Change:
            return transitions.defer(row, actor, when, why, inbox.max_defers if inbox else model.DEFAULT_MAX_DEFERS, now)

        return await self._fenced(ctx, task_id, fence, move, with_inbox=True)

    async def block(self, ctx: CallContext, task_id: str, fence: int, blocked_on: str, reason: str) -> TaskRow:
        on = v.blocked_on(blocked_on)
        why = v.reason(reason, required=True)
        return await self._fenced(ctx, task_id, fence, lambda row, actor, now, _inbox: transitions.block(row, actor, on, why, now))


def _fenced_by(fence: int, move: Move, actor: Actor, inbox: InboxRow | None) -> Callable[[TaskRow], transitions.Change]:
    """The holder's `move`, decided on the task's state: refused unless `fence` still holds it."""

    def decide(row: TaskRow) -> transitions.Change:
        check_fence(row, fence)
        return move(row, actor, time.time(), inbox)

    return decide


def _completing(outcome: dict[str, Any], reason: str) -> Move:
    """task.complete's move (its arguments checked first)."""
    outcome = v.payload(outcome, "outcome")
    why = v.reason(reason, required=False)
    return lambda row, actor, now, _inbox: transitions.complete(row, actor, outcome, now, why)


async def _answer(error: LoomError) -> LoomError:
    return error

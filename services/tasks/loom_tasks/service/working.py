"""Working (the owner's ops): pull, claim, heartbeat, progress, complete, fail, defer, block.

Every owner write presents the claim's fence. The lease row is the judge: a write stands only
when the lease row still holds that fence, and it replaces the lease row by compare-and-set
before the task row is written, so a sweep or a second writer racing it loses cleanly. A late
write from a holder whose lease ran out but that nobody has taken over yet still stands (its
fence is still the current one); once the sweep or another claim moved the task, the old fence
gets 409 TASK_FENCE_STALE.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from loom_core.chain import CallContext
from loom_core.errors import Conflict
from loom_core.roles import Role

from .. import keys as K
from ..domain import events as ev
from ..domain import model, transitions
from ..domain import validate as v
from ..domain.model import Actor, InboxRow, TaskRow
from ..keys import KeyRace, KeyState
from .access import no_task
from .deps import Deps

MAX_PULL = 100


def stale(task_id: str, fence: int) -> Conflict:
    return Conflict(
        "TASK_FENCE_STALE",
        "this fence no longer holds the task (its lease expired and moved on, or another claim took it)",
        {"task_id": task_id, "fence": fence},
    )


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
        if max_tasks < 0 or max_tasks > MAX_PULL:
            raise v.invalid_field("max_tasks", f"between 1 and {MAX_PULL}")
        want = max_tasks or 1
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
        while True:
            claimed = await self._claim_some(inbox, q, kinds, actor, lease, want, force)
            remaining = deadline - time.monotonic()
            if claimed or remaining <= 0:
                ctx.out_hits = len(claimed)
                return claimed
            timeout = min(remaining, self.d.settings.task_pull_poll_seconds)
            due = q.next_due(time.time())
            if due is not None:
                timeout = min(timeout, max(due - time.time(), 0.01))
            woken = await q.wait(timeout)
            # Woken: the wake-up brought the row, no store read needed. Timed out: re-read.
            force = not woken

    async def _claim_some(
        self, inbox: InboxRow, q: Any, kinds: Sequence[str], actor: Actor, lease: int, want: int, force: bool
    ) -> list[TaskRow]:
        hub = self.d.hub
        await hub.refresh(inbox.org, inbox.name, q, force=force)
        out: list[TaskRow] = []
        tried_filtered = False
        while len(out) < want:
            now = time.time()
            candidates = q.ordered(kinds, now)
            if not candidates:
                if kinds and not q.complete and not tried_filtered:
                    # The queue holds the first rows of every kind; ask for these kinds alone.
                    tried_filtered = True
                    await hub.refresh(inbox.org, inbox.name, q, kinds=kinds, force=True)
                    continue
                break
            progressed = False
            for row in candidates:
                if len(out) >= want:
                    break
                q.reserved.add(row.task_id)
                try:
                    got = await self.d.engine.claim(row, actor, lease, time.time(), q.revs.get(row.task_id, 0))
                finally:
                    q.reserved.discard(row.task_id)
                q.drop(row.task_id, None if got is None else got.row.version)
                if got is not None:
                    out.append(got.row)
                    progressed = True
            if not progressed:
                break
        return out

    async def _triage(self, inbox: InboxRow, kinds: Sequence[str], wait: int, want: int) -> list[TaskRow]:
        """Review items, unclaimed: nothing changes, the owner decides with accept / wont_do."""
        deadline = time.monotonic() + wait
        q = self.d.hub.queue(inbox.org, inbox.name)
        while True:
            rows = await self.d.tasks.in_status(inbox.org, inbox.name, model.TRIAGE, kinds, want)
            remaining = deadline - time.monotonic()
            if rows or remaining <= 0:
                return rows
            await q.wait(min(remaining, self.d.settings.task_pull_poll_seconds))

    async def claim(self, ctx: CallContext, task_id: str, lease_seconds: int) -> TaskRow:
        v.task_id(task_id)
        row = await self.d.engine.read(ctx.org, task_id)
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
                    "PRECONDITION_FAILED",
                    f"only a todo task can be claimed; this one is {row.status}",
                    {"task_id": task_id, "status": row.status, "reason": "status"},
                )
            got = await self.d.engine.claim(row, actor, lease, time.time())
            if got is not None:
                return got.row
            st = await self.d.keys.get(ctx.org, task_id)
            fresh = await self.d.engine.load(ctx.org, task_id, st.v) if st else await self.d.engine.read(ctx.org, task_id)
            if fresh is None:
                raise no_task(task_id)
            if st is None and fresh.status == model.TODO:
                raise Conflict(
                    "PRECONDITION_FAILED",
                    "the task is not claimable yet (its lease row is being written); retry",
                    {"task_id": task_id, "reason": "no_lease_row"},
                )
            row = fresh
        raise Conflict("PRECONDITION_FAILED", "another claim won the task", {"task_id": task_id, "reason": "claimed"})

    # --- fenced writes -------------------------------------------------------------------------

    async def _held(self, ctx: CallContext, task_id: str, fence: int, *, fresh: bool = False) -> tuple[KeyState, TaskRow, Actor]:
        """The lease row and task a fenced write acts on, or the refusal: 404, 403,
        409 TASK_TERMINAL, 409 TASK_FENCE_STALE."""
        v.task_id(task_id)
        v.fence(fence)
        # This replica's own claim or heartbeat is a good first guess (the write that follows
        # is compare-and-set at its revision); anything else is read.
        # `fresh`: a write with no compare-and-set of its own (a progress note) reads the lease row.
        hint = None if fresh else self.d.engine.hints.get(ctx.org, task_id)
        st = hint if hint is not None and hint.state == K.HELD and hint.fence == fence else await self.d.keys.get(ctx.org, task_id)
        row = await self.d.engine.load(ctx.org, task_id, st.v) if st is not None else await self.d.engine.read(ctx.org, task_id)
        if st is not None and st is hint and row is not None and row.version != st.v:
            # The task moved on elsewhere (another replica's write): the guess is stale.
            self.d.engine.hints.forget(ctx.org, task_id)
            st = await self.d.keys.get(ctx.org, task_id)
            row = await self.d.engine.load(ctx.org, task_id, st.v) if st is not None else await self.d.engine.read(ctx.org, task_id)
        if row is None:
            raise no_task(task_id)
        actor = await self.d.access.owner(ctx, row)
        if st is None or st.state != K.HELD:
            status = st.status if st is not None else row.status
            if status in model.TERMINAL:
                raise transitions.terminal(row.copy(status=status))
            raise stale(task_id, fence)
        if st.fence != fence:
            raise stale(task_id, fence)
        return st, row, actor

    async def heartbeat(self, ctx: CallContext, task_id: str, fence: int, lease_seconds: int) -> tuple[int, float]:
        for _ in range(20):
            st, _row, _actor = await self._held(ctx, task_id, fence)
            lease = v.lease_seconds(lease_seconds, st.lease_seconds or model.DEFAULT_LEASE_SECONDS)
            expires = time.time() + lease
            value = K.held(st.v, st.holder, st.agent, expires, lease, fence=st.fence)
            try:
                rev = await self.d.keys.update(ctx.org, task_id, value, last=st.revision)
            except KeyRace:
                self.d.engine.hints.forget(ctx.org, task_id)
                continue  # a concurrent heartbeat or update: read again
            self.d.engine.hints.put(ctx.org, task_id, value, rev)
            return fence, expires
        raise Conflict("PRECONDITION_FAILED", "the task kept changing under this heartbeat; retry", {"task_id": task_id})

    async def progress(self, ctx: CallContext, task_id: str, fence: int, note: str, percent: int) -> str:
        _st, row, actor = await self._held(ctx, task_id, fence, fresh=True)
        note = v.text(note, "note", v.MAX_NOTE)
        if percent < 0 or percent > 100:
            raise v.invalid_field("percent", "between 0 and 100")
        now = time.time()
        data: dict[str, Any] = {"note": note}
        if percent:
            data["percent"] = percent
        event = ev.build(row, "progress", at=now, data=data, actor=actor.subject, actor_agent=actor.agent, eid=ev.progress_event_id(row))
        await self.d.engine.publisher.publish(event)
        return str(event["event_id"])

    async def _fenced(self, ctx: CallContext, task_id: str, fence: int, move: Any, *, with_inbox: bool = False) -> TaskRow:
        """A state change by the claim's holder: fence checked against the lease row."""
        st, first, actor = await self._held(ctx, task_id, fence)
        inbox = await self.d.directory.inbox(ctx.org, first.inbox) if with_inbox else None

        def decide(row: TaskRow, st: KeyState | None) -> transitions.Change:
            if st is None or st.state != K.HELD:
                if (st.status if st is not None else row.status) in model.TERMINAL:
                    raise transitions.terminal(row)
                raise stale(task_id, fence)
            if st.fence != fence:
                raise stale(task_id, fence)
            return move(row, actor, time.time(), inbox)

        out = await self.d.engine.mutate(ctx.org, task_id, decide, first=(st, first))
        return out.row

    async def complete(self, ctx: CallContext, task_id: str, fence: int, outcome: dict[str, Any]) -> TaskRow:
        outcome = v.payload(outcome, "outcome")
        return await self._fenced(ctx, task_id, fence, lambda row, actor, now, _inbox: transitions.complete(row, actor, outcome, now))

    async def fail(self, ctx: CallContext, task_id: str, fence: int, reason: str) -> TaskRow:
        why = v.reason(reason, required=True)
        return await self._fenced(ctx, task_id, fence, lambda row, actor, now, _inbox: transitions.fail(row, actor, why, now))

    async def defer(self, ctx: CallContext, task_id: str, fence: int, resume_at: str, reason: str) -> TaskRow:
        when = v.parse_time(resume_at, "resume_at")
        if when is None:
            raise v.invalid_field("resume_at", "required: when the task comes back to todo")
        why = v.reason(reason, required=False)

        def move(row: TaskRow, actor: Actor, now: float, inbox: InboxRow | None) -> transitions.Change:
            return transitions.defer(row, actor, when, why, inbox.max_defers if inbox else model.DEFAULT_MAX_DEFERS, now)

        return await self._fenced(ctx, task_id, fence, move, with_inbox=True)

    async def block(self, ctx: CallContext, task_id: str, fence: int, blocked_on: str, reason: str) -> TaskRow:
        on = v.blocked_on(blocked_on)
        why = v.reason(reason, required=True)
        return await self._fenced(ctx, task_id, fence, lambda row, actor, now, _inbox: transitions.block(row, actor, on, why, now))

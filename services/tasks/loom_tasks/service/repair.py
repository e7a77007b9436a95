"""Triage and repair (the owner's ops): accept, wont_do, unblock, resume, reopen, update,
reassign. None needs a fence; each is one compare-and-set of the task's state like any
change, so a claim holder's later writes get 409 TASK_FENCE_STALE when one of these ended its
claim (wont_do, reassign)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from loom_core.chain import CallContext
from loom_core.errors import Conflict, ErrorCode, Forbidden, ValidationFailed
from loom_core.roles import Role

from ..domain import model, transitions, trust
from ..domain import validate as v
from ..domain.model import Actor, TaskRow
from .access import no_inbox
from .deps import Deps

Move = Callable[[TaskRow, Actor, float], transitions.Change]


# The owner's moves that carry a reason, by op leaf: the transition, and whether the reason is required.
REASONED_MOVES: dict[str, tuple[Callable[[TaskRow, Actor, str, float], transitions.Change], bool]] = {
    "accept": (transitions.accept, False),
    "wont_do": (transitions.wont_do, True),
    "unblock": (transitions.unblock, False),
    "resume": (transitions.resume, False),
    "reopen": (transitions.reopen, False),
}


@dataclass(slots=True)
class RepairOps:
    d: Deps

    async def _owner_move(self, ctx: CallContext, task_id: str, move: Move) -> TaskRow:
        v.task_id(task_id)

        async def decide(row: TaskRow) -> transitions.Change:
            actor = await self.d.access.owner(ctx, row)
            return move(row, actor, time.time())

        out = await self.d.engine.mutate(ctx.org, task_id, decide)
        return out.row

    async def reasoned_move(self, ctx: CallContext, move: str, task_id: str, reason: str) -> TaskRow:
        """task.accept, task.wont_do, task.unblock, task.resume or task.reopen (`move`, the op's leaf)."""
        transition, required = REASONED_MOVES[move]
        why = v.reason(reason, required=required)
        return await self._owner_move(ctx, task_id, lambda row, actor, now: transition(row, actor, why, now))

    async def update(
        self,
        ctx: CallContext,
        task_id: str,
        if_match_version: int,
        *,
        title: str | None,
        brief: dict[str, Any] | None,
        priority: int | None,
        deadline: str | None,
        not_before: str | None,
    ) -> TaskRow:
        if if_match_version <= 0:
            raise v.invalid_field("if_match_version", "required: the version you last read")
        changes: dict[str, Any] = {}
        if title is not None:
            changes["title"] = v.text(title, "title", v.MAX_TITLE)
        if brief is not None:
            changes["brief"] = v.payload(brief, "brief")
        if priority is not None:
            changes["priority"] = v.priority(priority)
        if deadline is not None:
            changes["deadline"] = v.parse_time(deadline, "deadline")
        if not_before is not None:
            changes["not_before"] = v.parse_time(not_before, "not_before")
        if not changes:
            raise ValidationFailed(
                "nothing to update: name title, brief, priority, deadline or not_before", {"field": "(body)", "reason": "empty"}
            )
        return await self._owner_move(ctx, task_id, lambda row, actor, now: transitions.update(row, actor, if_match_version, changes, now))

    async def reassign(self, ctx: CallContext, task_id: str, to_inbox: str, reason: str) -> TaskRow:
        v.inbox_name(to_inbox, "to_inbox")
        why = v.reason(reason, required=True)
        target = await self.d.directory.inbox(ctx.org, to_inbox)
        if target is None:
            raise no_inbox(to_inbox)
        # The owner hands the task on as a poster of the target inbox would: the target's
        # posters list or writer there, and the target's trust for the caller.
        role = await self.d.access.role_on(ctx, target.namespace)
        if role < Role.WRITER and ctx.subject not in target.posters:
            if role < Role.VIEWER:
                raise no_inbox(to_inbox)
            raise Forbidden(ErrorCode.AUTH_INSUFFICIENT, f"you may not post to inbox {to_inbox!r}", {"reason": "poster", "inbox": to_inbox})
        policies = await self.d.directory.policies(ctx.org, target.name)

        def move(row: TaskRow, actor: Actor, now: float) -> transitions.Change:
            # Refusals that depend on the task's state, not on the request's shape: 409s.
            if row.inbox == target.name:
                raise Conflict(
                    ErrorCode.PRECONDITION_FAILED,
                    f"the task is already in inbox {to_inbox!r}",
                    {"task_id": row.task_id, "reason": "same_inbox", "inbox": to_inbox},
                )
            decision = trust.decide(
                policies, subject=ctx.subject, agent=ctx.agent, kind=row.kind, writer_on_owner_namespace=role >= Role.WRITER
            )
            if decision.mode == "deny":
                raise Forbidden(
                    ErrorCode.TASK_POSTER_DENIED,
                    f"inbox {to_inbox!r} does not take {row.kind!r} tasks from you",
                    {"inbox": to_inbox, "kind": row.kind},
                )
            if row.disclosure not in target.accept_disclosure:
                raise Conflict(
                    ErrorCode.PRECONDITION_FAILED,
                    f"the task's disclosure {row.disclosure!r} is not one inbox {to_inbox!r} accepts ({', '.join(target.accept_disclosure)})",
                    {
                        "task_id": row.task_id,
                        "reason": "disclosure",
                        "disclosure": row.disclosure,
                        "accepted": list(target.accept_disclosure),
                    },
                )
            status = model.TODO if decision.mode == "auto" else model.TRIAGE
            return transitions.reassign(row, actor, target, status, why, now)

        return await self._owner_move(ctx, task_id, move)

"""Posting (the sender's ops): task.create, task.cancel (task.updates: service/watching.py)."""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from dataclasses import dataclass
from typing import Any

from loom_core.chain import CallContext
from loom_core.errors import ErrorCode, Forbidden, LoomError, NotFound, Unavailable, ValidationFailed
from loom_core.roles import Role

from ..domain import model, transitions, trust
from ..domain import validate as v
from ..domain.model import Actor, TaskRow
from ..store.truth import idempotent_task_id
from .access import no_inbox
from .deps import Deps
from .engine import Committed

log = logging.getLogger(__name__)

UPDATES_FETCH = 256


def new_task_id() -> str:
    """Time-ordered (ms, hex) then random: 24 lower-case hex characters."""
    return f"{int(time.time() * 1000):012x}{secrets.token_hex(6)}"


@dataclass(slots=True)
class NewTask:
    inbox: str
    kind: str
    title: str
    brief: dict[str, Any]
    disclosure: str
    priority: int
    deadline: str
    not_before: str
    origin: str
    parent_task_id: str
    idempotency_key: str


@dataclass(slots=True)
class PostingOps:
    d: Deps

    async def create(self, ctx: CallContext, req: NewTask) -> tuple[TaskRow, bool]:
        return await self._insert(ctx, *await self._new(ctx, req))

    async def _new(self, ctx: CallContext, req: NewTask) -> tuple[TaskRow, transitions.Change]:
        """The task `req` asks for and its creation, decided (checked, allowed), not yet written."""
        v.inbox_name(req.inbox)
        kind = v.kind(req.kind)
        title = v.text(req.title, "title", v.MAX_TITLE)
        brief = v.payload(req.brief, "brief")
        priority = v.priority(req.priority)
        deadline = v.parse_time(req.deadline, "deadline")
        not_before = v.parse_time(req.not_before, "not_before")
        origin = v.text(req.origin, "origin", v.MAX_ORIGIN)
        parent = req.parent_task_id and v.task_id(req.parent_task_id)
        key = v.idempotency_key(req.idempotency_key)

        inbox = await self.d.directory.inbox(ctx.org, req.inbox)
        if inbox is None:
            raise no_inbox(req.inbox)
        role = await self.d.access.role_on(ctx, inbox.namespace)
        listed = ctx.subject in inbox.posters
        if role < Role.WRITER and not listed:
            if role >= Role.VIEWER:
                raise Forbidden(
                    ErrorCode.AUTH_INSUFFICIENT,
                    f"you may read inbox {inbox.name!r} but not post to it",
                    {"reason": "poster", "inbox": inbox.name, "role": role.label},
                )
            raise no_inbox(req.inbox)
        writer = role >= Role.WRITER
        decision = trust.decide(
            await self.d.directory.policies(ctx.org, inbox.name),
            subject=ctx.subject,
            agent=ctx.agent,
            kind=kind,
            writer_on_owner_namespace=writer,
        )
        if decision.mode == "deny":
            raise Forbidden(
                ErrorCode.TASK_POSTER_DENIED,
                f"inbox {inbox.name!r} does not take {kind!r} tasks from this poster",
                {"inbox": inbox.name, "poster": ctx.subject, "kind": kind},
            )
        disclosure = v.disclosure(req.disclosure, inbox.accept_disclosure)
        missing = trust.missing_evidence(brief, decision.require_evidence)
        if missing:
            raise ValidationFailed(
                f"brief: missing evidence {', '.join(missing)}",
                {"field": "brief", "reason": "missing evidence", "missing": missing},
            )
        now = time.time()
        status = model.TODO if decision.mode == "auto" else model.TRIAGE
        row = TaskRow(
            org=ctx.org,
            task_id=new_task_id(),
            inbox=inbox.name,
            namespace=inbox.namespace,
            owner_agent=inbox.owner_agent,
            kind=kind,
            title=title,
            brief=brief,
            status=status,
            disclosure=disclosure,
            priority=priority,
            deadline=deadline,
            not_before=not_before,
            origin=origin,
            parent_task_id=parent,
            poster=ctx.subject,
            poster_agent=ctx.agent,
            poster_namespace=ctx.namespace,
            idempotency_key=key,
            escalate_at=now + inbox.triage_escalate_after_seconds if status == model.TRIAGE else None,
            created_at=now,
            updated_at=now,
            version=1,
        )
        actor = Actor(ctx.subject, ctx.agent, owner=writer)
        if key:
            # One key, one task: the task_id comes from the key, and the create below writes
            # only if that task holds no state yet (the idempotency check is the write itself).
            row.task_id = idempotent_task_id(ctx.org, ctx.subject, key)
        return row, transitions.created(row, actor)

    async def _insert(self, ctx: CallContext, row: TaskRow, change: transitions.Change) -> tuple[TaskRow, bool]:
        """Write a new task: (the task, True), or (the task its idempotency_key named before, False)."""
        committed = await self.d.engine.insert_new(row, change)
        if committed is not None:
            return committed.row, True
        existing = await self.d.engine.current(ctx.org, row.task_id)
        if existing is None:
            raise Unavailable(ErrorCode.BACKEND_UNAVAILABLE, "the task with this idempotency_key is not readable yet; retry")
        return existing, False

    async def create_many(self, ctx: CallContext, items: list[NewTask]) -> list[tuple[TaskRow | None, bool, LoomError | None]]:
        """task.create_many: each item as task.create would take it, answered on its own."""
        v.batch_size(len(items), "tasks")

        async def decided(item: NewTask) -> tuple[TaskRow, transitions.Change] | LoomError:
            try:
                return await self._new(ctx, item)
            except LoomError as exc:
                return exc

        news = await asyncio.gather(*(decided(i) for i in items))
        # The allowed creates as one atomic write; when it is refused (an idempotency_key that
        # names a task already, or named twice) each is written on its own as task.create writes it.
        batch: list[Committed] | LoomError | None
        try:
            batch = await self.d.engine.write_many([(new[1], 0, None) for new in news if not isinstance(new, LoomError)])
        except LoomError as exc:  # not answered: nor is any of the creates
            batch = exc

        async def one(new: tuple[TaskRow, transitions.Change] | LoomError) -> tuple[TaskRow | None, bool, LoomError | None]:
            if isinstance(new, LoomError):
                return None, False, new
            if isinstance(batch, LoomError):
                return None, False, batch
            if batch is not None:
                return new[1].row, True, None
            try:
                row, created = await self._insert(ctx, *new)
                return row, created, None
            except LoomError as exc:
                return None, False, exc

        return list(await asyncio.gather(*(one(new) for new in news)))

    async def cancel(self, ctx: CallContext, task_id: str, reason: str) -> TaskRow:
        v.task_id(task_id)
        why = v.reason(reason, required=True)

        async def decide(row: TaskRow) -> transitions.Change:
            role = await self.d.access.role_on(ctx, row.namespace)
            if role < Role.VIEWER and row.poster != ctx.subject:
                raise NotFound(ErrorCode.RESOURCE_NOT_FOUND, "no such task", {"task_id": task_id})
            return transitions.cancel(row, Actor(ctx.subject, ctx.agent_label, owner=role >= Role.WRITER), why, time.time())

        out: Committed = await self.d.engine.mutate(ctx.org, task_id, decide)
        return out.row

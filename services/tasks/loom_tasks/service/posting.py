"""Posting (the sender's ops): task.create, task.cancel, task.updates."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import secrets
import time
from dataclasses import dataclass
from typing import Any

from loom_core.bus import LeaseHeld
from loom_core.chain import CallContext
from loom_core.errors import Conflict, Forbidden, LoomError, NotFound, Unavailable, ValidationFailed
from loom_core.roles import Role
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from ..domain import events as ev
from ..domain import model, transitions, trust
from ..domain import validate as v
from ..domain.model import Actor, TaskRow
from ..events import STREAM, org_filter
from .access import no_inbox
from .deps import Deps
from .engine import Committed

log = logging.getLogger(__name__)

IDEMPOTENCY_LEASE_SECONDS = 30.0
UPDATES_FETCH = 256


def idempotency_lease_key(org: str, poster: str, key: str) -> str:
    """The lease a create with an idempotency_key runs under: one per (org, poster, key)."""
    digest = hashlib.sha256(f"{poster}\x00{key}".encode()).hexdigest()[:40]
    return f"tasks.idem.{org}.{digest}"


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


class PostingOps:
    def __init__(self, deps: Deps) -> None:
        self.d = deps

    async def create(self, ctx: CallContext, req: NewTask) -> tuple[TaskRow, bool]:
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
                    "AUTH_INSUFFICIENT",
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
                "TASK_POSTER_DENIED",
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
        if not key:
            committed = await self.d.engine.insert_new(row, transitions.created(row, actor))
            return committed.row, True
        return await self._create_once(ctx, row, actor, key)

    async def _create_once(self, ctx: CallContext, row: TaskRow, actor: Actor, key: str) -> tuple[TaskRow, bool]:
        """One task per (poster, key): creates with one key run one at a time under a lease."""
        leases = self.d.runtime.leases
        lease_key = idempotency_lease_key(ctx.org, ctx.subject, key)
        wait = self.d.settings.task_idempotency_wait_seconds
        try:
            lease = await leases.wait_acquire(lease_key, ctx.request_id, IDEMPOTENCY_LEASE_SECONDS, timeout=wait)
        except LeaseHeld:
            raise Conflict(
                "PRECONDITION_FAILED",
                f"another create with this idempotency_key is still running after {wait:g} s; retry",
                {"reason": "idempotency_key_busy", "idempotency_key": key},
            ) from None
        except Unavailable:
            raise Unavailable("BACKEND_UNAVAILABLE", "the lease store did not answer; retry the create") from None
        try:
            existing = await self.d.tasks.by_idempotency_key(ctx.org, ctx.subject, key)
            if existing is not None:
                await self._repair_created_event(existing)
                return existing, False
            committed = await self.d.engine.insert_new(row, transitions.created(row, actor))
            return committed.row, True
        finally:
            with contextlib.suppress(LoomError):  # it expires by itself
                await leases.release(lease)

    async def _repair_created_event(self, row: TaskRow) -> None:
        """A create cut off after storing its task may have left its created event out: publish
        it now. Same event_id: inside the stream's duplicate window JetStream keeps one, and
        task.history keeps the first row of an event_id."""
        first = row.copy(version=1, status=model.TRIAGE if row.escalate_at is not None else model.TODO)
        eid = ev.event_id(first, "created")
        if await self.d.tasks.has_event(row.org, row.task_id, eid):
            return
        event = ev.build(first, "created", at=row.created_at, actor=row.poster, actor_agent=row.poster_agent)
        await self.d.engine.publisher.publish(event)

    async def cancel(self, ctx: CallContext, task_id: str, reason: str) -> TaskRow:
        v.task_id(task_id)
        why = v.reason(reason, required=True)

        async def decide(row: TaskRow, _st: object) -> transitions.Change:
            role = await self.d.access.role_on(ctx, row.namespace)
            if role < Role.VIEWER and row.poster != ctx.subject:
                raise NotFound("RESOURCE_NOT_FOUND", "no such task", {"task_id": task_id})
            return transitions.cancel(row, Actor(ctx.subject, ctx.agent_label, owner=role >= Role.WRITER), why, time.time())

        out: Committed = await self.d.engine.mutate(ctx.org, task_id, decide)
        return out.row

    async def updates(self, ctx: CallContext, since_seq: int, wait_seconds: int, limit: int) -> tuple[list[dict[str, Any]], int]:
        """The caller's own tasks' events after `since_seq`, read from the stream itself."""
        if since_seq < 0:
            raise ValidationFailed("since_seq: 0 or more", {"field": "since_seq", "reason": "negative"})
        wait = v.wait_seconds(wait_seconds)
        limit = max(1, min(limit or 100, 1000))
        js = self.d.runtime.bus.js
        config = ConsumerConfig(
            name=f"updates-{secrets.token_hex(8)}",
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE if since_seq else DeliverPolicy.ALL,
            opt_start_seq=since_seq + 1 if since_seq else None,
            ack_policy=AckPolicy.NONE,
            filter_subject=org_filter(ctx.org),
            inactive_threshold=60.0,
            mem_storage=True,
            num_replicas=1,
        )
        try:
            info = await js.add_consumer(STREAM, config)
            sub = await js.pull_subscribe_bind(consumer=config.name, stream=STREAM)
        except Exception as exc:
            raise Unavailable("BACKEND_UNAVAILABLE", "the event stream did not answer") from exc
        events: list[dict[str, Any]] = []
        next_seq = since_seq
        pending = int(info.num_pending or 0)
        deadline = time.monotonic() + wait
        try:
            while len(events) < limit:
                caught_up = pending <= 0
                remaining = deadline - time.monotonic()
                if caught_up and (events or remaining <= 0):
                    break
                timeout = max(remaining, 0.05) if caught_up else 5.0
                try:
                    msgs = await sub.fetch(min(UPDATES_FETCH, max(pending, 1)) if not caught_up else UPDATES_FETCH, timeout=timeout)
                except TimeoutError:
                    msgs = []
                except Exception as exc:
                    if "Timeout" not in type(exc).__name__:
                        raise Unavailable("BACKEND_UNAVAILABLE", "the event stream did not answer") from exc
                    msgs = []
                if not msgs:
                    if caught_up:
                        break
                    continue
                for m in msgs:
                    seq = int(m.metadata.sequence.stream)
                    pending = int(m.metadata.num_pending)
                    if seq <= next_seq:
                        continue
                    next_seq = seq
                    try:
                        body = json.loads(m.data)
                    except ValueError:
                        continue
                    if isinstance(body, dict) and body.get("poster") == ctx.subject:
                        body["seq"] = seq
                        events.append(body)
                        if len(events) >= limit:
                            break
        finally:
            try:
                await sub.unsubscribe()
                await js.delete_consumer(STREAM, config.name)
            except Exception:  # noqa: BLE001 - the consumer goes after its inactive threshold anyway
                log.debug("updates consumer not deleted")
        ctx.out_hits = len(events)
        return events, next_seq

"""Reading the event stream after a cursor: task.updates (the caller's own tasks) and task.watch
(one task's or one inbox's events; GET /v1/task/watch streams it as server-sent events).

Both read LOOM_TASK_EVENTS itself from the cursor, so a replay from an old cursor returns the
same events and no replica's event is skipped; the cursor (`seq`) is the stream sequence.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any

import nats.errors
from loom_core.bus.position import position
from loom_core.bus.task_subjects import event_subject, org_filter
from loom_core.chain import CallContext
from loom_core.errors import ErrorCode, Unavailable, ValidationFailed
from loom_core.roles import Role
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.client import JetStreamContext

from ..domain import validate as v
from ..events import STREAM
from .access import no_inbox, no_task
from .deps import Deps

log = logging.getLogger(__name__)

FETCH = 256

Keep = Callable[[dict[str, Any]], bool]


def check_cursor(since_seq: int, limit: int) -> int:
    if since_seq < 0:
        raise ValidationFailed("since_seq: 0 or more", {"field": "since_seq", "reason": "negative"})
    return max(1, min(limit or 100, 1000))


def _field_is(name: str, value: str) -> Keep:
    """Keep the events whose `name` is `value`."""
    return lambda event: event.get(name) == value


def _every(_event: dict[str, Any]) -> bool:
    return True


async def read_events(
    js: JetStreamContext,
    projected: Callable[[], Awaitable[bool]],
    subject_filter: str,
    since_seq: int,
    wait: float,
    limit: int,
    keep: Keep,
) -> tuple[list[dict[str, Any]], int]:
    """The events on `subject_filter` after `since_seq` that `keep` accepts (at most `limit`),
    waiting up to `wait` seconds for a first one, and the cursor to save after them.

    Read-your-writes: the events of every state write made before the call are on the stream
    first (the projector derives them). Not a bus consumer: a one-shot read from the cursor on
    an ephemeral consumer deleted before returning (a cancelled call included)."""
    await projected()
    config = ConsumerConfig(
        name=f"updates-{secrets.token_hex(8)}",
        deliver_policy=DeliverPolicy.BY_START_SEQUENCE if since_seq else DeliverPolicy.ALL,
        opt_start_seq=since_seq + 1 if since_seq else None,
        ack_policy=AckPolicy.NONE,
        filter_subject=subject_filter,
        inactive_threshold=60.0,
        mem_storage=True,
        num_replicas=1,
    )
    try:
        info = await js.add_consumer(STREAM, config)
        sub = await js.pull_subscribe_bind(consumer=config.name, stream=STREAM)
    except asyncio.CancelledError:
        # Cancelled while the server may have made it: deleted all the same.
        await asyncio.shield(asyncio.ensure_future(_delete(js, None, str(config.name))))
        raise
    except Exception as exc:
        # the NATS adapter boundary: any failure to open the read is BACKEND_UNAVAILABLE
        raise Unavailable(ErrorCode.BACKEND_UNAVAILABLE, "the event stream did not answer") from exc
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
                msgs = await sub.fetch(min(FETCH, max(pending, 1)) if not caught_up else FETCH, timeout=timeout)
            except TimeoutError:
                msgs = []  # nothing new within the wait (nats-py's timeouts are TimeoutErrors)
            except nats.errors.Error as exc:
                raise Unavailable(ErrorCode.BACKEND_UNAVAILABLE, "the event stream did not answer") from exc
            if not msgs:
                if caught_up:
                    break
                continue
            for m in msgs:
                seq, pending = position(m)
                if seq <= next_seq:
                    continue
                next_seq = seq
                try:
                    body = json.loads(m.data)
                except ValueError:
                    continue
                if isinstance(body, dict) and keep(body):
                    body["seq"] = seq
                    events.append(body)
                    if len(events) >= limit:
                        break
    finally:
        # Its own task, shielded: a call cancelled mid-read (a watcher that went away, under an
        # anyio cancel scope that cancels every await after it) still deletes its consumer.
        await asyncio.shield(asyncio.ensure_future(_delete(js, sub, str(config.name))))
    return events, next_seq


async def _delete(js: JetStreamContext, sub: Any, name: str) -> None:
    try:
        if sub is not None:
            await sub.unsubscribe()
        await js.delete_consumer(STREAM, name)
    except Exception:  # noqa: BLE001 - the consumer goes after its inactive threshold anyway
        log.debug("updates consumer not deleted")


class WatchingOps:
    def __init__(self, deps: Deps) -> None:
        self.d = deps

    async def updates(self, ctx: CallContext, since_seq: int, wait_seconds: int, limit: int) -> tuple[list[dict[str, Any]], int]:
        """task.updates: the caller's own tasks' events after `since_seq`."""
        limit = check_cursor(since_seq, limit)
        wait = v.wait_seconds(wait_seconds)
        me = ctx.subject
        events, next_seq = await read_events(
            self.d.bus.js, self.d.projected, org_filter(ctx.org), since_seq, wait, limit, lambda e: e.get("poster") == me
        )
        self.d.access.auth.check_live(ctx.principal)  # revoked while it waited: nothing handed over
        ctx.out_hits = len(events)
        return events, next_seq

    async def watch(
        self, ctx: CallContext, task_id: str, inbox_name: str, since_seq: int, wait_seconds: int, limit: int
    ) -> tuple[list[dict[str, Any]], int]:
        """task.watch: one task's events (its poster, or a reader of its inbox) or one inbox's
        (a reader sees every task's; a poster who may not read it, its own tasks'), after
        `since_seq`. What the caller may neither read nor post to is answered 404."""
        if bool(task_id) == bool(inbox_name):
            raise ValidationFailed("name exactly one of task_id and inbox", {"field": "task_id", "reason": "exactly one of task_id, inbox"})
        limit = check_cursor(since_seq, limit)
        wait = v.wait_seconds(wait_seconds)
        me = ctx.subject
        keep: Keep
        if task_id:
            v.task_id(task_id)
            row = await self.d.engine.current(ctx.org, task_id)
            if row is None:
                raise no_task(task_id)
            await self.d.access.reader(ctx, row)
            # The org's events, not one inbox's: a reassigned task's next events are in another.
            subject_filter = org_filter(ctx.org)
            keep = _field_is("task_id", task_id)
        else:
            v.inbox_name(inbox_name)
            inbox = await self.d.directory.inbox(ctx.org, inbox_name)
            if inbox is None:
                raise no_inbox(inbox_name)
            role = await self.d.access.role_on(ctx, inbox.namespace)
            subject_filter = event_subject(ctx.org, inbox.namespace, inbox.name, "*")
            if role >= Role.VIEWER:
                keep = _every
            elif me in inbox.posters:
                keep = _field_is("poster", me)
            else:
                raise no_inbox(inbox_name)
        events, next_seq = await read_events(self.d.bus.js, self.d.projected, subject_filter, since_seq, wait, limit, keep)
        self.d.access.auth.check_live(ctx.principal)  # revoked while it waited: nothing handed over
        ctx.out_hits = len(events)
        return events, next_seq

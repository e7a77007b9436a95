"""Reading the event stream after a cursor: task.updates (the caller's own tasks) and task.watch
(one task's or one inbox's events; GET /v1/task/watch streams it as server-sent events).

Both read LOOM_TASK_EVENTS itself from the cursor (by direct get: no consumer per call), so a
replay from an old cursor returns the same events and no replica's event is skipped; the cursor
(`seq`) is the stream sequence. A call with nothing to return yet waits on the replica's one
reader of new events (consumers/tail.py), after the checks of who may read what.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from loom_core.bus import direct
from loom_core.bus.replicas import BusJetStream
from loom_core.bus.task_subjects import event_subject, org_filter
from loom_core.chain import CallContext
from loom_core.errors import ValidationFailed
from loom_core.roles import Role

from ..consumers.tail import EventTail, Keep
from ..domain import validate as v
from ..domain.events import TaskEvent, from_wire
from ..events import STREAM
from .access import no_inbox, no_task
from .deps import Deps

FETCH = 256


def check_cursor(since_seq: int, limit: int) -> int:
    if since_seq < 0:
        raise ValidationFailed("since_seq: 0 or more", {"field": "since_seq", "reason": "negative"})
    return max(1, min(limit or 100, 1000))


def _field_is(name: str, value: str) -> Keep:
    """Keep the events whose `name` is `value`."""
    return lambda event: event.get(name) == value


def _every(_event: TaskEvent) -> bool:
    return True


async def read_events(
    js: BusJetStream,
    tail: EventTail,
    projected: Callable[[], Awaitable[bool]],
    subject_filter: str,
    since_seq: int,
    wait: float,
    limit: int,
    keep: Keep,
) -> tuple[list[TaskEvent], int]:
    """The events on `subject_filter` after `since_seq` that `keep` accepts (at most `limit`),
    waiting up to `wait` seconds for a first one, and the cursor to save after them.

    Read-your-writes: the events of every state write made before the call are on the stream
    first (the projector derives them). What is stored is read by direct get (no consumer);
    a call that finds nothing waits on the replica's one `EventTail` (consumers/tail.py),
    registered before the read so nothing stored meanwhile is missed."""
    await projected()
    async with tail.waiting(subject_filter, since_seq, keep, limit) as waiter:
        events, next_seq = await _stored_events(js, subject_filter, since_seq, limit, keep)
        waiter.caught_up_to(next_seq)
        if events or wait <= 0:
            return events, next_seq
        deadline = asyncio.get_running_loop().time() + wait
        while not waiter.events:
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                break
            waiter.arrived.clear()
            try:
                await asyncio.wait_for(waiter.arrived.wait(), left)
            except TimeoutError:
                break
        return list(waiter.events), max(next_seq, waiter.seen)


async def _stored_events(js: BusJetStream, subject_filter: str, since_seq: int, limit: int, keep: Keep) -> tuple[list[TaskEvent], int]:
    """What is stored on `subject_filter` after `since_seq` that `keep` accepts (at most
    `limit`), and the sequence of the last event read."""
    events: list[TaskEvent] = []
    next_seq = since_seq
    while len(events) < limit:
        stored = await direct.read_after(js, STREAM, subject_filter, next_seq, FETCH)
        for m in stored:
            next_seq = m.seq
            body = from_wire(m.data)
            if body is not None and keep(body):
                body["seq"] = m.seq
                events.append(body)
                if len(events) >= limit:
                    break
        if len(stored) < FETCH:
            break
    return events, next_seq


@dataclass(slots=True)
class WatchingOps:
    d: Deps

    async def updates(self, ctx: CallContext, since_seq: int, wait_seconds: int, limit: int) -> tuple[list[TaskEvent], int]:
        """task.updates: the caller's own tasks' events after `since_seq`."""
        limit = check_cursor(since_seq, limit)
        wait = v.wait_seconds(wait_seconds)
        me = ctx.subject
        events, next_seq = await read_events(
            self.d.bus.js, self.d.tail, self.d.projected, org_filter(ctx.org), since_seq, wait, limit, lambda e: e.get("poster") == me
        )
        self.d.access.auth.check_live(ctx.principal)  # revoked while it waited: nothing handed over
        ctx.out_hits = len(events)
        return events, next_seq

    async def watch(
        self, ctx: CallContext, task_id: str, inbox_name: str, since_seq: int, wait_seconds: int, limit: int
    ) -> tuple[list[TaskEvent], int]:
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
        events, next_seq = await read_events(self.d.bus.js, self.d.tail, self.d.projected, subject_filter, since_seq, wait, limit, keep)
        self.d.access.auth.check_live(ctx.principal)  # revoked while it waited: nothing handed over
        ctx.out_hits = len(events)
        return events, next_seq

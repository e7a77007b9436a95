"""Reading: task.get, task.list (filters, paging), task.counts, task.history."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from loom_core.chain import CallContext
from loom_core.errors import ErrorCode, Unavailable, ValidationFailed, count_or_default
from loom_core.roles import Role

from ..domain import model
from ..domain import validate as v
from ..domain.events import TaskEvent
from ..domain.model import TaskRow
from ..events import NOTES_DURABLE, READ_WAIT_SECONDS, STREAM, caught_up
from .access import no_task
from .deps import Deps

DEFAULT_LIMIT = 50
#: How long a read waits for the projection to hold the writes made before it.
MAX_LIMIT = 500


_PAGE = re.compile(r"^[0-9]{1,16}-[a-z0-9]{8,64}$")


def encode_page(row: TaskRow) -> str:
    """The listing's position after `row`: "<micros>-<task_id>", the pattern the proto publishes."""
    return f"{round(row.created_at * 1_000_000)}-{row.task_id}"


def decode_page(token: str) -> tuple[int, str] | None:
    if not token:
        return None
    if not _PAGE.match(token):
        raise ValidationFailed("page_token: not a token this op returned", {"field": "page_token", "reason": "invalid"})
    at, _, task_id = token.partition("-")
    return int(at), task_id.rstrip("\n")  # the pattern's `$`, as Python and JSON Schema read it, allows one final newline


@dataclass(slots=True)
class ReadingOps:
    d: Deps

    async def get(self, ctx: CallContext, task_id: str) -> TaskRow:
        """The task as it is now (its state on NATS; a finished task that left NATS, from the
        projection). Its lease expiry is the one the last heartbeat wrote."""
        v.task_id(task_id)
        row = await self.d.engine.current(ctx.org, task_id)
        if row is None:
            raise no_task(task_id)
        await self.d.access.reader(ctx, row)
        return row

    async def list_tasks(
        self,
        ctx: CallContext,
        inbox: str,
        statuses: Sequence[str],
        kinds: Sequence[str],
        poster: str,
        mine: bool,
        limit: int,
        page_token: str,
    ) -> tuple[list[TaskRow], str]:
        for s in statuses:
            if s not in model.STATUSES:
                raise ValidationFailed(
                    f"status: {s!r} is not a status", {"field": "status", "reason": "unknown status", "accepted": list(model.STATUSES)}
                )
        kinds = [v.kind(k) for k in kinds]
        size = count_or_default("limit", limit, DEFAULT_LIMIT, MAX_LIMIT)
        after = decode_page(page_token)
        await self._projected()
        namespace: str | None = None
        inbox_name: str | None = None
        poster_filter: str | None = poster or None
        if mine:
            poster_filter = ctx.subject
            if inbox:
                inbox_name = v.inbox_name(inbox)
        elif inbox:
            row = await self.d.access.inbox(ctx, v.inbox_name(inbox), Role.VIEWER)
            inbox_name = row.name
        else:
            namespace = ctx.namespace
        rows = await self.d.tasks.listing(
            ctx.org,
            namespace=namespace,
            inbox=inbox_name,
            poster=poster_filter,
            statuses=statuses,
            kinds=kinds,
            after=after,
            limit=size + 1,
        )
        more = len(rows) > size
        rows = rows[:size]
        ctx.out_hits = len(rows)
        return rows, encode_page(rows[-1]) if more and rows else ""

    async def counts(self, ctx: CallContext, inbox: str) -> dict[str, int]:
        await self._projected()
        if inbox:
            row = await self.d.access.inbox(ctx, v.inbox_name(inbox), Role.VIEWER)
            return await self.d.tasks.counts(ctx.org, namespace=None, inbox=row.name)
        return await self.d.tasks.counts(ctx.org, namespace=ctx.namespace, inbox=None)

    async def history(self, ctx: CallContext, task_id: str, limit: int) -> list[TaskEvent]:
        v.task_id(task_id)
        row = await self.d.engine.current(ctx.org, task_id)
        if row is None:
            raise no_task(task_id)
        await self.d.access.reader(ctx, row)
        size = count_or_default("limit", limit, 200, 1000)
        # The projector writes the events' rows with the task rows, the notes writer those of
        # progress notes: wait (briefly) until both have applied every write made before this
        # call, the caller's own included.
        await self._projected()
        await caught_up(self.d.bus.js, STREAM, NOTES_DURABLE, READ_WAIT_SECONDS)
        events = await self.d.tasks.history(ctx.org, task_id, size)
        ctx.out_hits = len(events)
        return events

    async def _projected(self) -> None:
        """Read-your-writes: wait (bounded) until the projector has applied every state write
        made before this call — so a caller's own last write is in what it reads.

        When the bound passes with the projection still behind, the read is refused with a
        retryable 503 (BACKEND_UNAVAILABLE, reason `projection_behind`) rather than answered
        from a projection that may lack the caller's own acknowledged writes. This happens when
        the NATS node leading the projector's durable consumer dies: the consumer has no leader
        (nothing is delivered, its info does not answer) until JetStream elects one, which
        takes nats-server's Raft election timeout (4 to 9 s, longer on a loaded machine), more
        than this wait."""
        if not await self.d.projected():
            raise Unavailable(
                ErrorCode.BACKEND_UNAVAILABLE,
                "the task projection has not applied the writes made before this read yet; retry",
                {"reason": "projection_behind", "retry_after_s": 1},
            )

"""SQL for tasks and task events (the store only: no rules here)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict, cast

from loom_core import fastjson
from loom_core.store import Store, Where, query_as

from ..domain import model
from ..domain.events import OPTIONAL_TEXT, REQUIRED_TEXT, TEXT_FIELDS, TaskEvent
from ..domain.model import TERMINAL, TaskRow
from ..domain.validate import format_time

TASKS = "{db}.task_state"
EVENTS = "{db}.task_events"

#: created_at comes from the column too: the page cursor compares against the column's value.
SELECT = "doc, rev, toUnixTimestamp64Micro(created_at) AS created_us"


class ProjectedTask(TypedDict):
    """A task_state row: the columns reads filter and sort on, and the whole task as one JSON
    document. The times are seconds (JSONEachRow reads a float as seconds)."""

    org: str
    task_id: str
    inbox: str
    namespace: str
    kind: str
    status: str
    priority: int
    poster: str
    version: int
    deadline: float | None
    not_before: float | None
    created_at: float
    updated_at: float
    rev: int
    doc: str


class SelectedTask(TypedDict):
    """A task_state row as SELECT reads it."""

    doc: str
    rev: int
    created_us: int | None


class _EventColumns(TypedDict):
    """A task_events row's columns but its time; the event's data as JSON text."""

    org: str
    task_id: str
    event_id: str
    kind: str
    namespace: str
    inbox: str
    status: str
    poster: str
    actor: str
    actor_agent: str
    reason: str
    task_kind: str
    title: str
    data: str
    version: int


class EventRow(_EventColumns):
    """A task_events row as written, at the event's own time (seconds)."""

    at: float


class RecordedEvent(_EventColumns):
    """A task_events row as history reads it."""

    at_us: int


def to_store(row: TaskRow, rev: int) -> ProjectedTask:
    """A projection row of `row` as its state's revision `rev` holds it."""
    return ProjectedTask(
        org=row.org,
        task_id=row.task_id,
        inbox=row.inbox,
        namespace=row.namespace,
        kind=row.kind,
        status=row.status,
        priority=row.priority,
        poster=row.poster,
        version=row.version,
        deadline=row.deadline,
        not_before=row.not_before,
        created_at=row.created_at,
        updated_at=row.updated_at,
        rev=rev,
        doc=fastjson.dumps_str(model.stored(row)),
    )


def from_store(d: SelectedTask) -> TaskRow:
    doc = fastjson.loads(d["doc"])
    row = model.from_stored(doc)
    row.rev = int(d.get("rev") or 0)
    created_us = d.get("created_us")
    if created_us is not None:
        row.created_at = int(created_us) / 1_000_000
    return row


def event_row(event: TaskEvent, at: float) -> EventRow:
    """`event` as read off the stream: the fields an older or partial event may lack default to empty."""
    fields: Mapping[str, object] = event
    text = {name: fields[name] for name in REQUIRED_TEXT} | {name: fields.get(name, "") for name in OPTIONAL_TEXT}
    return cast(EventRow, text | {"data": fastjson.dumps_str(event.get("data") or {}), "version": event["version"], "at": at})


@dataclass(slots=True)
class TaskStore:
    store: Store

    async def _tasks(self, where: str, params: Mapping[str, Any]) -> list[TaskRow]:
        """The projection's tasks `where` selects (with its ORDER BY and LIMIT)."""
        rows = await query_as(self.store, SelectedTask, f"SELECT {SELECT} FROM {TASKS} FINAL WHERE {where}", params)
        return [from_store(r) for r in rows]

    async def _in_pull_order(
        self, org: str, inbox: str, status_clause: str, kinds: Sequence[str], limit: int, **params: object
    ) -> list[TaskRow]:
        """An inbox's tasks `status_clause` picks (of `kinds` when named), in pull order."""
        kind_clause = " AND kind IN {kinds:Array(String)}" if kinds else ""
        return await self._tasks(
            f"org = {{org:String}} AND inbox = {{inbox:String}} AND {status_clause}{kind_clause}"
            " ORDER BY priority, isNull(deadline), deadline, created_at, task_id LIMIT {limit:UInt32}",
            {"org": org, "inbox": inbox, "kinds": list(kinds), "limit": limit, **params},
        )

    async def get(self, org: str, task_id: str) -> TaskRow | None:
        rows = await self._tasks("org = {org:String} AND task_id = {id:String}", {"org": org, "id": task_id})
        return rows[0] if rows else None

    async def candidates(self, org: str, inbox: str, horizon: float, kinds: Sequence[str], limit: int) -> list[TaskRow]:
        """Todo tasks of an inbox in pull order, not_before up to `horizon`."""
        todo = "status = 'todo' AND (not_before IS NULL OR not_before <= fromUnixTimestamp64Micro({horizon:Int64}))"
        return await self._in_pull_order(org, inbox, todo, kinds, limit, horizon=int(horizon * 1_000_000))

    async def in_status(self, org: str, inbox: str, status: str, kinds: Sequence[str], limit: int) -> list[TaskRow]:
        return await self._in_pull_order(org, inbox, "status = {status:String}", kinds, limit, status=status)

    async def listing(
        self,
        org: str,
        *,
        namespace: str | None,
        inbox: str | None,
        poster: str | None,
        statuses: Sequence[str],
        kinds: Sequence[str],
        after: tuple[int, str] | None,
        limit: int,
    ) -> list[TaskRow]:
        """Newest first; `after` is the (created_at µs, task_id) of the last row of the previous page."""
        where = _placed(org, namespace, inbox)
        if poster is not None:
            where.add("poster = {poster:String}", poster=poster)
        if statuses:
            where.add("status IN {statuses:Array(String)}", statuses=list(statuses))
        if kinds:
            where.add("kind IN {kinds:Array(String)}", kinds=list(kinds))
        if after is not None:
            where.add(
                "(toUnixTimestamp64Micro(created_at), task_id) < ({after_at:Int64}, {after_id:String})",
                after_at=after[0],
                after_id=after[1],
            )
        return await self._tasks(f"{where} ORDER BY created_at DESC, task_id DESC LIMIT {{limit:UInt32}}", where.bind(limit=limit))

    async def counts(self, org: str, *, namespace: str | None, inbox: str | None) -> dict[str, int]:
        where = _placed(org, namespace, inbox)
        rows = await self.store.query(f"SELECT status, count() AS n FROM {TASKS} FINAL WHERE {where} GROUP BY status", where.params)
        return {r["status"]: int(r["n"]) for r in rows}

    async def write(self, rows: Sequence[ProjectedTask], events: Sequence[EventRow], token: str) -> None:
        """One projector batch: its task rows and event rows, each insert deduplicated by `token`."""
        # Side by side, each in a chDB thread of its own: the projector's cycle waits for the
        # slower one, not for both in turn. Either failing fails the batch (applied again whole).
        async with asyncio.TaskGroup() as both:
            if rows:
                both.create_task(self.store.insert(TASKS, rows, dedup_token=f"{token}-t"))
            if events:
                both.create_task(self.store.insert(EVENTS, events, dedup_token=f"{token}-e"))

    async def open_counts(self, statuses: Sequence[str]) -> dict[tuple[str, str, str], int]:
        """Tasks in `statuses` per (org, inbox, status), every org (the queue-depth gauge)."""
        rows = await self.store.query(
            f"SELECT org, inbox, status, count() AS n FROM {TASKS} FINAL WHERE status IN {{statuses:Array(String)}}"
            " GROUP BY org, inbox, status",
            {"statuses": list(statuses)},
        )
        return {(r["org"], r["inbox"], r["status"]): int(r["n"]) for r in rows}

    async def open_counts_by_inbox(self, org: str, namespace: str) -> dict[str, dict[str, int]]:
        rows = await self.store.query(
            f"SELECT inbox, status, count() AS n FROM {TASKS} FINAL WHERE org = {{org:String}} AND namespace = {{ns:String}}"
            " AND status NOT IN {terminal:Array(String)} GROUP BY inbox, status",
            {"org": org, "ns": namespace, "terminal": sorted(TERMINAL)},
        )
        out: dict[str, dict[str, int]] = {}
        for r in rows:
            out.setdefault(r["inbox"], {})[r["status"]] = int(r["n"])
        return out

    async def history(self, org: str, task_id: str, limit: int) -> list[TaskEvent]:
        rows = await query_as(
            self.store,
            RecordedEvent,
            f"SELECT org, task_id, event_id, kind, namespace, inbox, status, poster, actor, actor_agent, reason,"
            f" task_kind, title, data, version, toUnixTimestamp64Micro(at) AS at_us FROM {EVENTS}"
            " WHERE org = {org:String} AND task_id = {id:String}"
            " ORDER BY at, version LIMIT 1 BY event_id LIMIT {limit:UInt32}",
            {"org": org, "id": task_id, "limit": limit},
        )
        return [_recorded(r) for r in rows]

    async def has_event(self, org: str, task_id: str, event_id: str) -> bool:
        rows = await self.store.query(
            f"SELECT 1 AS x FROM {EVENTS} WHERE org = {{org:String}} AND task_id = {{id:String}} AND event_id = {{eid:String}} LIMIT 1",
            {"org": org, "id": task_id, "eid": event_id},
        )
        return bool(rows)


def _recorded(r: RecordedEvent) -> TaskEvent:
    fields: Mapping[str, object] = r
    return cast(
        TaskEvent,
        {name: fields[name] for name in TEXT_FIELDS}
        | {
            "at": format_time(int(r["at_us"]) / 1_000_000),
            "version": r["version"],
            "data": json.loads(r["data"]) if r["data"] else {},
        },
    )


def _placed(org: str, namespace: str | None, inbox: str | None) -> Where:
    """Tasks of an org, narrowed to a namespace and an inbox when named."""
    where = Where("org = {org:String}", org=org)
    if namespace is not None:
        where.add("namespace = {ns:String}", ns=namespace)
    if inbox is not None:
        where.add("inbox = {inbox:String}", inbox=inbox)
    return where

"""SQL for tasks and task events (the store only: no rules here)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from loom_core.store import Store

from ..domain.model import TERMINAL, TaskRow

TASKS = "{db}.tasks"
EVENTS = "{db}.task_events"

_TIME_COLUMNS = ("deadline", "not_before", "resume_at", "lease_expires_at", "escalate_at", "escalated_at", "created_at", "updated_at")
_JSON_COLUMNS = ("brief", "outcome")
_COLUMNS = (
    "org", "task_id", "inbox", "namespace", "owner_agent", "kind", "title", "brief", "disclosure", "priority",
    "deadline", "not_before", "origin", "parent_task_id", "poster", "poster_agent", "poster_namespace",
    "idempotency_key", "status", "reason", "blocked_on", "resume_at", "outcome", "claimed_by", "claimed_agent",
    "fence", "lease_expires_at", "lease_seconds", "attempts", "defers", "escalate_at", "escalated_at",
    "created_at", "updated_at", "version",
)  # fmt: skip


def _select_list() -> str:
    out = []
    for c in _COLUMNS:
        # Times travel as integer microseconds: exact, and the same in both engines. The alias
        # is not the column's name: ClickHouse resolves a WHERE name to a SELECT alias first.
        out.append(f"toUnixTimestamp64Micro({c}) AS {c}_us" if c in _TIME_COLUMNS else c)
    return ", ".join(out)


SELECT = _select_list()


def to_store(row: TaskRow) -> dict[str, Any]:
    d: dict[str, Any] = {c: getattr(row, c) for c in _COLUMNS}
    for c in _JSON_COLUMNS:
        d[c] = json.dumps(d[c], separators=(",", ":"), default=str)
    return d


def from_store(d: dict[str, Any]) -> TaskRow:
    values: dict[str, Any] = {}
    for c in _COLUMNS:
        if c in _TIME_COLUMNS:
            us = d.get(f"{c}_us")
            values[c] = None if us is None else int(us) / 1_000_000
            continue
        v = d.get(c)
        if c in _JSON_COLUMNS:
            v = json.loads(v) if v else {}
        values[c] = v
    values["created_at"] = values["created_at"] or 0.0
    values["updated_at"] = values["updated_at"] or 0.0
    return TaskRow(**values)


def event_row(event: dict[str, Any], at: float) -> dict[str, Any]:
    return {
        "org": event["org"],
        "task_id": event["task_id"],
        "event_id": event["event_id"],
        "kind": event["kind"],
        "namespace": event["namespace"],
        "inbox": event["inbox"],
        "status": event["status"],
        "poster": event["poster"],
        "actor": event.get("actor", ""),
        "actor_agent": event.get("actor_agent", ""),
        "reason": event.get("reason", ""),
        "task_kind": event.get("task_kind", ""),
        "title": event.get("title", ""),
        "data": json.dumps(event.get("data") or {}, separators=(",", ":"), default=str),
        "version": event["version"],
        "at": at,
    }


class TaskStore:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def get(self, org: str, task_id: str) -> TaskRow | None:
        rows = await self.store.query(
            f"SELECT {SELECT} FROM {TASKS} FINAL WHERE org = {{org:String}} AND task_id = {{id:String}}",
            {"org": org, "id": task_id},
        )
        return from_store(rows[0]) if rows else None

    async def by_idempotency_key(self, org: str, poster: str, key: str) -> TaskRow | None:
        rows = await self.store.query(
            f"SELECT {SELECT} FROM {TASKS} FINAL WHERE org = {{org:String}} AND poster = {{poster:String}}"
            " AND idempotency_key = {key:String} ORDER BY created_at LIMIT 1",
            {"org": org, "poster": poster, "key": key},
        )
        return from_store(rows[0]) if rows else None

    async def candidates(self, org: str, inbox: str, horizon: float, kinds: Sequence[str], limit: int) -> list[TaskRow]:
        """Todo tasks of an inbox in pull order, not_before up to `horizon`."""
        kind_clause = " AND kind IN {kinds:Array(String)}" if kinds else ""
        rows = await self.store.query(
            f"SELECT {SELECT} FROM {TASKS} FINAL WHERE org = {{org:String}} AND inbox = {{inbox:String}}"
            " AND status = 'todo' AND (not_before IS NULL OR not_before <= fromUnixTimestamp64Micro({horizon:Int64}))"
            f"{kind_clause}"
            " ORDER BY priority, isNull(deadline), deadline, created_at, task_id LIMIT {limit:UInt32}",
            {"org": org, "inbox": inbox, "horizon": int(horizon * 1_000_000), "kinds": list(kinds), "limit": limit},
        )
        return [from_store(r) for r in rows]

    async def in_status(self, org: str, inbox: str, status: str, kinds: Sequence[str], limit: int) -> list[TaskRow]:
        kind_clause = " AND kind IN {kinds:Array(String)}" if kinds else ""
        rows = await self.store.query(
            f"SELECT {SELECT} FROM {TASKS} FINAL WHERE org = {{org:String}} AND inbox = {{inbox:String}}"
            f" AND status = {{status:String}}{kind_clause}"
            " ORDER BY priority, isNull(deadline), deadline, created_at, task_id LIMIT {limit:UInt32}",
            {"org": org, "inbox": inbox, "status": status, "kinds": list(kinds), "limit": limit},
        )
        return [from_store(r) for r in rows]

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
        where = ["org = {org:String}"]
        params: dict[str, Any] = {"org": org, "limit": limit}
        if namespace is not None:
            where.append("namespace = {ns:String}")
            params["ns"] = namespace
        if inbox is not None:
            where.append("inbox = {inbox:String}")
            params["inbox"] = inbox
        if poster is not None:
            where.append("poster = {poster:String}")
            params["poster"] = poster
        if statuses:
            where.append("status IN {statuses:Array(String)}")
            params["statuses"] = list(statuses)
        if kinds:
            where.append("kind IN {kinds:Array(String)}")
            params["kinds"] = list(kinds)
        if after is not None:
            where.append("(toUnixTimestamp64Micro(created_at), task_id) < ({after_at:Int64}, {after_id:String})")
            params["after_at"], params["after_id"] = after
        rows = await self.store.query(
            f"SELECT {SELECT} FROM {TASKS} FINAL WHERE {' AND '.join(where)} ORDER BY created_at DESC, task_id DESC LIMIT {{limit:UInt32}}",
            params,
        )
        return [from_store(r) for r in rows]

    async def counts(self, org: str, *, namespace: str | None, inbox: str | None) -> dict[str, int]:
        where = ["org = {org:String}"]
        params: dict[str, Any] = {"org": org}
        if namespace is not None:
            where.append("namespace = {ns:String}")
            params["ns"] = namespace
        if inbox is not None:
            where.append("inbox = {inbox:String}")
            params["inbox"] = inbox
        rows = await self.store.query(
            f"SELECT status, count() AS n FROM {TASKS} FINAL WHERE {' AND '.join(where)} GROUP BY status",
            params,
        )
        return {r["status"]: int(r["n"]) for r in rows}

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

    async def due(self, now: float, limit: int) -> list[TaskRow]:
        """What the sweep acts on: leases past their expiry, deferred tasks at resume_at, triage
        items past their escalation time (not yet escalated)."""
        rows = await self.store.query(
            f"SELECT {SELECT} FROM {TASKS} FINAL WHERE"
            " (status = 'in_progress' AND lease_expires_at <= fromUnixTimestamp64Micro({now:Int64}))"
            " OR (status = 'deferred' AND resume_at <= fromUnixTimestamp64Micro({now:Int64}))"
            " OR (status = 'triage' AND escalated_at IS NULL AND escalate_at <= fromUnixTimestamp64Micro({now:Int64}))"
            " ORDER BY updated_at LIMIT {limit:UInt32}",
            {"now": int(now * 1_000_000), "limit": limit},
        )
        return [from_store(r) for r in rows]

    async def open_tasks(self, limit: int) -> list[TaskRow]:
        """Every unfinished task (the reconcile's view of the store)."""
        rows = await self.store.query(
            f"SELECT {SELECT} FROM {TASKS} FINAL WHERE status NOT IN {{terminal:Array(String)}} LIMIT {{limit:UInt32}}",
            {"terminal": sorted(TERMINAL), "limit": limit},
        )
        return [from_store(r) for r in rows]

    async def status_of(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], tuple[str, int, float]]:
        """(status, version, updated_at) of the named tasks."""
        if not keys:
            return {}
        wanted = set(keys)
        rows = await self.store.query(
            f"SELECT org, task_id, status, version, toUnixTimestamp64Micro(updated_at) AS updated_us FROM {TASKS} FINAL"
            " WHERE org IN {orgs:Array(String)} AND task_id IN {ids:Array(String)}",
            {"orgs": sorted({k[0] for k in keys}), "ids": sorted({k[1] for k in keys})},
        )
        return {
            (r["org"], r["task_id"]): (r["status"], int(r["version"]), int(r["updated_us"]) / 1_000_000)
            for r in rows
            if (r["org"], r["task_id"]) in wanted
        }

    async def history(self, org: str, task_id: str, limit: int) -> list[dict[str, Any]]:
        rows = await self.store.query(
            f"SELECT org, task_id, event_id, kind, namespace, inbox, status, poster, actor, actor_agent, reason,"
            f" task_kind, title, data, version, toUnixTimestamp64Micro(at) AS at_us FROM {EVENTS}"
            " WHERE org = {org:String} AND task_id = {id:String}"
            " ORDER BY at, version LIMIT 1 BY event_id LIMIT {limit:UInt32}",
            {"org": org, "id": task_id, "limit": limit},
        )
        for r in rows:
            r["data"] = json.loads(r["data"]) if r["data"] else {}
            r["at"] = int(r.pop("at_us")) / 1_000_000
        return rows

    async def has_event(self, org: str, task_id: str, event_id: str) -> bool:
        rows = await self.store.query(
            f"SELECT 1 AS x FROM {EVENTS} WHERE org = {{org:String}} AND task_id = {{id:String}} AND event_id = {{eid:String}} LIMIT 1",
            {"org": org, "id": task_id, "eid": event_id},
        )
        return bool(rows)

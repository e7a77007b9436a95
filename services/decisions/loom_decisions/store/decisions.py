"""Decision records (append-only versions per key) and their causal edges."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict

from loom_core.batching import Coalescer
from loom_core.store import Store, Where, query_as
from loom_core.store.batched import BatchedInserts

RECORDS = "{db}.decision_records"
EDGES = "{db}.decision_edges"

_COLS = (
    "key, version, record_version, status, category, scenario, reasoning, outcome, alternatives, confidence, caused_by, influenced_by, run_id, "
    "agent, user, session, realized_outcome, success, files, source_resource_id, source_class, tags, memories_used, "
    "toString(recorded_at) AS recorded_at, outcome_at, toString(ts) AS ts"
)


@dataclass(frozen=True, slots=True)
class Edge:
    """A causal edge into record version `dst_version` of key `dst` (kind caused_by or influenced_by)."""

    src: str
    dst: str
    kind: str
    dst_version: int
    ts: str


class DecisionRecordRow(TypedDict):
    """A decision_records version as _COLS reads it and as `append` writes it (the times as
    ClickHouse DateTime64 text; `success` 1, 0 or None: no outcome yet)."""

    key: str
    version: int
    record_version: int
    status: str
    category: str
    scenario: str
    reasoning: str
    outcome: str
    alternatives: list[str]
    confidence: float | None
    caused_by: list[str]
    influenced_by: list[str]
    run_id: str
    agent: str
    user: str
    session: str
    realized_outcome: str
    success: int | None
    files: list[str]
    source_resource_id: str
    source_class: str
    tags: list[str]
    memories_used: list[str]
    recorded_at: str
    outcome_at: str | None
    ts: str


class EdgeRow(TypedDict):
    """A decision_edges row as a chain walk reads it."""

    src: str
    dst: str
    kind: str
    dst_version: int


class ScoredRow(TypedDict):
    """A key's current record with the columns calibration reads."""

    key: str
    status: str
    agent: str
    category: str
    confidence: float | None
    success: int | None
    realized_outcome: str
    outcome_at: str | None


class DecisionStore:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.inserts = BatchedInserts(store)
        self._currents: Coalescer[tuple[str, str], str, DecisionRecordRow | None] = Coalescer(self._current_batch)

    async def current(self, org: str, ns: str, key: str) -> DecisionRecordRow | None:
        """The key's newest record version: one query for the calls that arrive together (per namespace)."""
        return await self._currents.submit((org, ns), key)

    async def _current_batch(self, where: tuple[str, str], keys: list[str]) -> list[DecisionRecordRow | None]:
        found = await self.current_many(where[0], where[1], keys)
        return [rec.copy() if (rec := found.get(k)) is not None else None for k in keys]

    async def history(self, org: str, ns: str, key: str) -> list[DecisionRecordRow]:
        return await query_as(
            self.store,
            DecisionRecordRow,
            f"SELECT {_COLS} FROM {RECORDS} WHERE org = {{org:String}} AND namespace = {{ns:String}} AND key = {{key:String}} "
            "ORDER BY version DESC",
            {"org": org, "ns": ns, "key": key},
        )

    async def current_many(self, org: str, ns: str, keys: Sequence[str]) -> dict[str, DecisionRecordRow]:
        if not keys:
            return {}
        rows = await query_as(
            self.store,
            DecisionRecordRow,
            f"SELECT {_COLS} FROM {RECORDS} WHERE org = {{org:String}} AND namespace = {{ns:String}} AND key IN {{keys:Array(String)}} "
            "ORDER BY version DESC LIMIT 1 BY key",
            {"org": org, "ns": ns, "keys": sorted(set(keys))},
        )
        return {r["key"]: r for r in rows}

    async def current_page(self, org: str, ns: str, after: str, page: int) -> list[DecisionRecordRow]:
        """The current record of each key after `after`, in key order, at most `page` of them."""
        return await query_as(
            self.store,
            DecisionRecordRow,
            f"SELECT {_COLS} FROM {RECORDS} WHERE org = {{org:String}} AND namespace = {{ns:String}} AND key > {{after:String}} "
            "ORDER BY key, version DESC LIMIT 1 BY key LIMIT {page:UInt64}",
            {"org": org, "ns": ns, "after": after, "page": page},
        )

    async def changed_since(self, org: str, ns: str, ts: str, overlap_seconds: float) -> list[DecisionRecordRow]:
        """Record versions written at `ts` or after, less `overlap_seconds` (an insert can land
        with a ts older than one already read), oldest first."""
        return await query_as(
            self.store,
            DecisionRecordRow,
            # The filter in a subquery: the selected `ts` is a string, and an alias shadows the column.
            f"SELECT {_COLS} FROM (SELECT * FROM {RECORDS} WHERE org = {{org:String}} AND namespace = {{ns:String}} "
            "AND ts >= parseDateTime64BestEffort({ts:String}, 6) - toIntervalMillisecond({overlap:UInt32})) ORDER BY ts",
            {"org": org, "ns": ns, "ts": ts, "overlap": int(overlap_seconds * 1000)},
        )

    async def last_ts(self, org: str, ns: str) -> str:
        rows = await self.store.query(
            f"SELECT toString(max(ts)) AS t FROM {RECORDS} WHERE org = {{org:String}} AND namespace = {{ns:String}}", {"org": org, "ns": ns}
        )
        return str(rows[0]["t"]) if rows else ""

    async def append(self, org: str, ns: str, rows: Sequence[DecisionRecordRow]) -> None:
        """New record versions, in one insert."""
        await self.inserts.insert(RECORDS, [{"org": org, "namespace": ns, **row} for row in rows])

    async def add_edges(self, org: str, ns: str, edges: Sequence[Edge]) -> None:
        """Causal edges, in one insert."""
        await self.inserts.insert(
            EDGES,
            [
                {"org": org, "namespace": ns, "src": e.src, "dst": e.dst, "kind": e.kind, "dst_version": e.dst_version, "ts": e.ts}
                for e in edges
            ],
        )

    async def edges_touching(self, org: str, ns: str, keys: Sequence[str], *, upstream: bool) -> list[EdgeRow]:
        """Edges into `keys` (upstream: their causes) or out of them (downstream: what they caused)."""
        col = "dst" if upstream else "src"
        return await query_as(
            self.store,
            EdgeRow,
            f"SELECT src, dst, kind, dst_version FROM {EDGES} WHERE org = {{org:String}} AND namespace = {{ns:String}} "
            f"AND {col} IN {{keys:Array(String)}}",
            {"org": org, "ns": ns, "keys": sorted(set(keys))},
        )

    async def scored(self, org: str, ns: str, since: str, agent: str, category: str) -> list[ScoredRow]:
        """Each key's current record with a recorded outcome since `since`."""
        where = Where("org = {org:String}", "namespace = {ns:String}", org=org, ns=ns)
        rows = await query_as(
            self.store,
            ScoredRow,
            f"SELECT key, status, agent, category, confidence, success, realized_outcome, outcome_at FROM {RECORDS} "
            f"WHERE {where} ORDER BY version DESC LIMIT 1 BY key",
            where.bind(),
        )
        out = []
        for r in rows:
            if r["status"] != "active" or not r["realized_outcome"] or r["outcome_at"] is None or str(r["outcome_at"]) < since:
                continue
            if agent and r["agent"] != agent:
                continue
            if category and r["category"] != category:
                continue
            out.append(r)
        return out

    async def exposed_keys(self, org: str, ns: str, run_id: str) -> list[str]:
        rows = await self.store.query(
            "SELECT DISTINCT key FROM {db}.memory_exposures WHERE org = {org:String} AND namespace = {ns:String} AND run_id = {run:String}",
            {"org": org, "ns": ns, "run": run_id},
        )
        return sorted(str(r["key"]) for r in rows)

"""Reads of loom.agent_events for one answer: its run's rows (support, steps, sql citations),
the live rows before the run id is known, and the namespace's assistant spend today."""

from __future__ import annotations

from loom_core.chain.interceptor import ANSWER_CONSUMER as CONSUMER
from loom_core.store import Store

from ..domain.ledger import LedgerCall

ANSWER_OP = "assistant.ask"
_COLS = "ts, op, ok, out_hits, args, namespace"


async def run_rows(store: Store, *, org: str, run_id: str, subject: str, limit: int) -> list[LedgerCall]:
    """The answer's calls by its run, its caller's subject and the answer's consumer, with no
    namespace filter (a refused call is ledgered under another namespace), oldest first."""
    rows = await store.query(
        f"SELECT {_COLS} FROM {{db}}.agent_events WHERE org = {{org:String}} AND run_id = {{run:String}}"
        " AND subject = {sub:String} AND consumer = {consumer:String} ORDER BY ts LIMIT {lim:UInt32}",
        {"org": org, "run": run_id, "sub": subject, "consumer": CONSUMER, "lim": limit},
    )
    return [LedgerCall.of(r) for r in rows]


async def live_rows(store: Store, *, org: str, namespace: str, subject: str, since_s: float, limit: int) -> list[LedgerCall]:
    """Before the run id is known: the caller's answer calls in the namespace since the second
    before the answer started."""
    rows = await store.query(
        f"SELECT {_COLS} FROM {{db}}.agent_events WHERE org = {{org:String}} AND namespace = {{ns:String}}"
        " AND subject = {sub:String} AND consumer = {consumer:String} AND ts >= fromUnixTimestamp64Micro({since:Int64})"
        " ORDER BY ts LIMIT {lim:UInt32}",
        {"org": org, "ns": namespace, "sub": subject, "consumer": CONSUMER, "since": int((since_s - 1) * 1e6), "lim": limit},
    )
    return [LedgerCall.of(r) for r in rows]


async def spent_today(store: Store, *, org: str, namespace: str) -> float:
    """The namespace's assistant spend since midnight UTC (raises on a failed read)."""
    rows = await store.query(
        "SELECT sum(upstream_cost_usd) AS spent FROM {db}.agent_events WHERE org = {org:String} AND namespace = {ns:String}"
        " AND op = {op:String} AND ts >= toStartOfDay(now64(6, 'UTC'))",
        {"org": org, "ns": namespace, "op": ANSWER_OP},
    )
    return float(rows[0]["spent"] or 0.0) if rows else 0.0


async def rows_under_token(store: Store, *, org: str, token_id: str) -> int:
    """How many ledger rows the answer's token made (its tool calls, wherever they landed)."""
    rows = await store.query(
        "SELECT count() AS n FROM {db}.agent_events WHERE org = {org:String} AND token_id = {tid:String}",
        {"org": org, "tid": token_id},
    )
    return int(rows[0]["n"]) if rows else 0


async def exposed_keys(store: Store, *, org: str, run_id: str) -> set[str]:
    """Keys the answer's own memory reads were returned (loom.memory_exposures, by run)."""
    rows = await store.query(
        "SELECT DISTINCT key FROM {db}.memory_exposures WHERE org = {org:String} AND run_id = {run:String}",
        {"org": org, "run": run_id},
    )
    return {str(r["key"]) for r in rows}

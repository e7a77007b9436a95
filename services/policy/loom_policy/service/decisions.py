"""policy.decisions: the gate's recorded decisions in a namespace and its policy.widened audit
rows (a rule change that widened what agents may do), newest first."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from loom_api.policy.v1 import policy_pb2 as pb
from loom_core.chain import CallContext
from loom_core.store import Store

from ..domain.timeutil import ch_to_us, us_to_iso
from ..store.decisions import RecordedDecision, RecordedWidening, query_decisions, query_widened
from .evaluation import instant
from .render import rules_from_stored


@dataclass(slots=True)
class DecisionService:
    store: Store

    async def list(self, ctx: CallContext, q: pb.ListDecisionsRequest) -> list[dict[str, Any]]:
        """Each entry in policy.decisions' JSON answer shape (pb.Decision)."""
        # decision, limit and since are checked against the proto's field options on every door (the chain).
        since = max(instant("since", q.since), 0) if q.since else 0  # nothing is recorded before the epoch
        limit = q.limit or 100
        found: list[tuple[str, dict[str, Any]]] = []
        if q.decision != WIDENED:
            rows = await query_decisions(
                self.store,
                ctx.org,
                ctx.namespace,
                decision=q.decision,
                agent=q.agent,
                op=q.operation,
                rule=q.rule,
                since_us=since,
                limit=limit,
            )
            found += [(str(r["ts"]), _decision(r)) for r in rows]
        if q.decision in ("", WIDENED):
            widenings = await query_widened(
                self.store, ctx.org, ctx.namespace, agent=q.agent, op=q.operation, rule=q.rule, since_us=since, limit=limit
            )
            found += [(str(r["ts"]), _widened(r)) for r in widenings]
        # Both tables' `ts` is ClickHouse's DateTime64 text, which sorts as the instants do.
        found.sort(key=lambda pair: pair[0], reverse=True)
        return [entry for _, entry in found[:limit]]


WIDENED = "widened"


def _time(ts: str) -> str:
    return us_to_iso(ch_to_us(ts) if ts else 0)


def _decision(r: RecordedDecision) -> dict[str, Any]:
    return {
        "time": _time(str(r["ts"])),
        "operation": r["op"],
        "subject": r["subject"],
        "agent": r["agent"],
        "user": r["user"],
        "session": r["session"],
        "request_id": r["request_id"],
        "decision": r["decision"],
        "enforced": bool(r["enforced"]),
        "mode": r["mode"],
        "write_shaped": bool(r["write_shaped"]),
        "determining_rules": list(r["determining_rules"]),
        "errors": json.loads(r["errors"] or "[]"),
        "rules": rules_from_stored(r["rules"]),
        "latency_ms": float(r["latency_ms"]),
    }


def _widened(r: RecordedWidening) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "time": _time(str(r["ts"])),
        "operation": f"policy.{r['change']}",
        "subject": r["subject"],
        "agent": r["agent"],
        "request_id": r["request_id"],
        "decision": WIDENED,
        "write_shaped": True,
        "rule": r["rule"],
        "widened_reasons": list(r["reasons"]),
    }
    for side, text in (("before", r["before"]), ("after", r["after"])):
        if text:
            rule = json.loads(text)
            if isinstance(rule.get("condition"), str):  # the rule row keeps its condition as JSON text
                rule["condition"] = json.loads(rule["condition"])
            entry[side] = rule
    return entry

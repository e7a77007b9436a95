"""policy.decisions: the gate's recorded decisions in a namespace, newest first."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from loom_core.chain import CallContext
from loom_core.store import Store

from ..domain.timeutil import ch_to_us, us_to_iso
from ..store.decisions import query_decisions
from .evaluation import instant
from .render import rules_from_stored


@dataclass(frozen=True, slots=True)
class DecisionQuery:
    decision: str
    agent: str
    operation: str
    rule: str
    since: str
    limit: int


class DecisionService:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def list(self, ctx: CallContext, q: DecisionQuery) -> list[dict[str, Any]]:
        # decision, limit and since are checked against the proto's field options on every door (the chain).
        since = max(instant("since", q.since), 0) if q.since else 0  # nothing is recorded before the epoch
        rows = await query_decisions(
            self.store,
            ctx.org,
            ctx.namespace,
            decision=q.decision,
            agent=q.agent,
            op=q.operation,
            rule=q.rule,
            since_us=since,
            limit=q.limit or 100,
        )
        return [
            {
                "time": us_to_iso(ch_to_us(str(r["ts"])) if r["ts"] else 0),
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
            for r in rows
        ]

"""Handlers of the decision.* and memory.* ops: proto in, proto out. The rules are in domain/,
the use cases in service/, the SQL in store/."""

from __future__ import annotations

from typing import Any

from loom_api.decisions.v1 import decisions_pb2 as dpb
from loom_api.decisions.v1 import memory_pb2 as mpb
from loom_core.chain import CallContext

from .service.decisions import DecisionOps
from .service.memory import MemoryOps
from .service.rows import Rows, iso


def _row_msg(row: dict[str, Any]) -> mpb.MemoryRow:
    return mpb.MemoryRow(
        key=row["key"],
        value=row["value"],
        version=int(row["version"]),
        tags=list(row["tags"]),
        memory_type=row["memory_type"],
        pinned=bool(row["pinned"]),
        memory_id=row["memory_id"],
        agent_id=row["agent"],
        user_id=row["user"],
        session_id=row["session"],
        attestation=row.get("attestation", ""),
        locked=bool(row.get("locked", False)),
        status=row["status"],
        conflicts=list(row["conflicts"]),
        reinforcements=int(row["reinforcements"]),
        credits=int(row.get("credits", 0)),
        charges=int(row.get("charges", 0)),
        files=list(row["files"]),
        source_resource_id=row["source_resource_id"],
        source_class=row["source_class"],
        value_hash=row["value_hash"],
        updated_time=iso(str(row["ts"])),
        op=row["op"],
    )


def _write_msg(row: dict[str, Any]) -> mpb.MemoryWriteResponse:
    from .service.rows import attestation

    return mpb.MemoryWriteResponse(
        key=row["key"],
        version=int(row["version"]),
        memory_id=row["memory_id"],
        pinned=bool(row["pinned"]),
        attestation=attestation(row),
        value_hash=row["value_hash"],
    )


class DecisionHandlers:
    def __init__(self, rows: Rows) -> None:
        self._rows = rows
        self._decisions = DecisionOps(rows)
        self._memory = MemoryOps(rows)

    # --- decision.*

    async def record_decision(self, req: dpb.RecordDecisionRequest, ctx: CallContext) -> dpb.RecordDecisionResponse:
        args: dict[str, Any] = {
            "category": req.category,
            "scenario": req.scenario,
            "reasoning": req.reasoning,
            "outcome": req.outcome,
            "alternatives": list(req.alternatives),
            "confidence": req.confidence if req.HasField("confidence") else None,
            "caused_by": list(req.caused_by),
            "influenced_by": list(req.influenced_by),
            "stage": req.stage,
            "files": list(req.files),
            "source_resource_id": req.source_resource_id,
            "source_class": req.source_class,
            "tags": list(req.tags),
            "run_id": req.run_id,
        }
        out = await self._decisions.record(ctx, args)
        return dpb.RecordDecisionResponse(**out)

    async def decision_precedents(self, req: dpb.DecisionPrecedentsRequest, ctx: CallContext) -> dpb.DecisionPrecedentsResponse:
        found, none_close = await self._decisions.precedents(ctx, req.query, req.category, req.with_outcome_only, req.limit)
        ctx.out_hits = len(found)
        return dpb.DecisionPrecedentsResponse(
            precedents=[dpb.Precedent(**p) for p in found],
            min_similarity=self._decisions.r.d.settings.decision_precedents_min_similarity,
            none_close=none_close,
        )

    async def decision_chain(self, req: dpb.DecisionChainRequest, ctx: CallContext) -> dpb.DecisionChainResponse:
        nodes, edges = await self._decisions.chain(ctx, req.memory_key, req.direction, req.max_hops)
        return dpb.DecisionChainResponse(nodes=[dpb.ChainNode(**n) for n in nodes], edges=[dpb.ChainEdge(**e) for e in edges])

    async def decision_outcome(self, req: dpb.DecisionOutcomeRequest, ctx: CallContext) -> dpb.DecisionOutcomeResponse:
        out = await self._decisions.outcome(ctx, req.memory_key, req.realized_outcome, req.success if req.HasField("success") else None)
        return dpb.DecisionOutcomeResponse(**out)

    async def decision_calibration(self, req: dpb.DecisionCalibrationRequest, ctx: CallContext) -> dpb.DecisionCalibrationResponse:
        out = await self._decisions.calibration(ctx, req.window_days, req.agent, req.category)
        rows = [
            dpb.CalibrationRow(
                agent=c.agent,
                category=c.category,
                count=c.count,
                successes=c.successes,
                mean_confidence=c.mean_confidence,
                success_rate=c.success_rate,
                brier=c.brier,
                overconfidence=c.overconfidence,
                bins=[
                    dpb.CalibrationBin(
                        lower=b.lower, upper=b.upper, count=b.count, mean_confidence=b.mean_confidence, success_rate=b.success_rate
                    )
                    for b in c.bins
                ],
            )
            for c in out["rows"]
        ]
        return dpb.DecisionCalibrationResponse(rows=rows, window_days=out["window_days"], unscored=out["unscored"])

    # --- memory.*

    async def get_memory(self, req: mpb.GetMemoryRequest, ctx: CallContext) -> mpb.MemoryRow:
        return _row_msg(await self._memory.get(ctx, req.key, req.agent_id, req.user_id, req.session_id))

    async def list_memory(self, req: mpb.ListMemoryRequest, ctx: CallContext) -> mpb.ListMemoryResponse:
        rows = await self._memory.list(ctx, req.memory_type, req.tag, req.prefix, req.limit)
        ctx.out_hits = len(rows)
        return mpb.ListMemoryResponse(rows=[_row_msg(r) for r in rows])

    async def search_memory(self, req: mpb.SearchMemoryRequest, ctx: CallContext) -> mpb.SearchMemoryResponse:
        hits, weak = await self._memory.search(ctx, req.query, req.memory_type, req.tag, req.limit)
        ctx.out_hits = len(hits)
        return mpb.SearchMemoryResponse(
            weak=weak,
            hits=[
                mpb.SearchHit(
                    key=r["key"],
                    score=round(s, 6),
                    value=r["value"],
                    memory_type=r["memory_type"],
                    tags=list(r["tags"]),
                    agent_id=r["agent"],
                    pinned=bool(r["pinned"]),
                    version=int(r["version"]),
                )
                for r, s in hits
            ],
        )

    async def memory_history(self, req: mpb.MemoryHistoryRequest, ctx: CallContext) -> mpb.MemoryHistoryResponse:
        versions, records = await self._memory.history(ctx, req.key, req.agent_id, req.user_id, req.session_id)
        active_version = max((int(r["version"]) for r in records), default=0)
        recs = []
        for r in records:
            status = r["status"]
            if status == "active" and int(r["version"]) != active_version:
                status = "superseded"
            recs.append(
                mpb.RecordVersion(
                    version=int(r["version"]),
                    status=status,
                    agent_id=r["agent"],
                    user_id=r["user"],
                    session_id=r["session"],
                    category=r["category"],
                    scenario=r["scenario"],
                    outcome=r["outcome"],
                    reasoning=r["reasoning"],
                    realized_outcome=r["realized_outcome"],
                    success=None if r["success"] is None else bool(r["success"]),
                    recorded_time=iso(str(r["recorded_at"])),
                )
            )
        return mpb.MemoryHistoryResponse(versions=[_row_msg(v) for v in versions], records=recs)

    async def delete_memory(self, req: mpb.DeleteMemoryRequest, ctx: CallContext) -> mpb.DeleteMemoryResponse:
        ident = self._rows.ident(ctx, req.agent_id, req.user_id, req.session_id)
        return mpb.DeleteMemoryResponse(**await self._memory.delete(ctx, req.memory_key, ident))

    async def delete_memory_version(self, req: mpb.DeleteMemoryVersionRequest, ctx: CallContext) -> mpb.DeleteMemoryResponse:
        ident = self._rows.ident(ctx, req.agent_id, req.user_id, req.session_id)
        return mpb.DeleteMemoryResponse(**await self._memory.delete_version(ctx, req.memory_key, req.version, ident))

    async def restore_memory(self, req: mpb.RestoreMemoryRequest, ctx: CallContext) -> mpb.MemoryWriteResponse:
        ident = self._rows.ident(ctx, req.agent_id, req.user_id, req.session_id)
        return _write_msg(await self._memory.restore(ctx, req.key, ident))

    async def pin_memory(self, req: mpb.PinMemoryRequest, ctx: CallContext) -> mpb.MemoryWriteResponse:
        ident = self._rows.ident(ctx, req.agent_id, req.user_id, req.session_id)
        return _write_msg(await self._memory.set_pin(ctx, req.key, ident, True))

    async def unpin_memory(self, req: mpb.PinMemoryRequest, ctx: CallContext) -> mpb.MemoryWriteResponse:
        ident = self._rows.ident(ctx, req.agent_id, req.user_id, req.session_id)
        return _write_msg(await self._memory.set_pin(ctx, req.key, ident, False))

    async def verify_memory(self, req: mpb.PinMemoryRequest, ctx: CallContext) -> mpb.MemoryWriteResponse:
        ident = self._rows.ident(ctx, req.agent_id, req.user_id, req.session_id)
        return _write_msg(await self._memory.verify(ctx, req.key, ident))

    async def update_memory_by_id(self, req: mpb.UpdateMemoryByIdRequest, ctx: CallContext) -> mpb.MemoryWriteResponse:
        value = req.value if req.HasField("value") else None
        tags = list(req.tags) if req.set_tags else None
        return _write_msg(await self._memory.update_by_id(ctx, req.memory_id, value, tags, req.if_value_hash))

    async def lock_memory(self, req: mpb.LockMemoryRequest, ctx: CallContext) -> mpb.LockMemoryResponse:
        return mpb.LockMemoryResponse(**await self._memory.lock(ctx, req.key, req.ttl_seconds))

    async def unlock_memory(self, req: mpb.UnlockMemoryRequest, ctx: CallContext) -> mpb.LockMemoryResponse:
        return mpb.LockMemoryResponse(**await self._memory.unlock(ctx, req.key))

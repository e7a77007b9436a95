"""Handlers of the decision.* and memory.* ops: proto in, proto out. The rules are in domain/,
the use cases in service/, the SQL in store/."""

from __future__ import annotations

from loom_api.decisions.v1 import decisions_pb2 as dpb
from loom_api.decisions.v1 import memory_pb2 as mpb
from loom_api.decisions.v1 import search_pb2 as spb
from loom_core.catalog import message_from
from loom_core.chain import CallContext
from loom_core.chain.ledger import ledger_args
from loom_core.errors import LoomError
from loom_core.identity import Authenticator

from .code_handlers import CodeHandlers
from .service.blocks import BlockOps
from .service.code_index import CodeIndex
from .service.decisions import DecisionOps
from .service.memory import MemoryOps, ReadRow
from .service.rollback import Rollback
from .service.rows import Rows, iso
from .service.unified_search import UnifiedSearch
from .store.decisions import DecisionRecordRow
from .store.memory import MemoryRow


def _row_msg(row: MemoryRow, read: ReadRow | None = None) -> mpb.MemoryRow:
    """A row as the ops that read rows answer it; memory.get's `read` adds the lock and feedback."""
    return message_from(
        mpb.MemoryRow,
        row,
        agent_id=row.agent,
        user_id=row.user,
        session_id=row.session,
        attestation=row.attestation,
        locked=read is not None and read.locked,
        credits=read.credits if read is not None else 0,
        charges=read.charges if read is not None else 0,
        updated_time=iso(row.ts),
    )


def _write_msg(row: MemoryRow) -> mpb.MemoryWriteResponse:
    return message_from(mpb.MemoryWriteResponse, row, attestation=row.attestation)


def _record_msgs(records: list[DecisionRecordRow]) -> list[mpb.RecordVersion]:
    """A key's record versions, newest first: the newest active one is active, older active ones superseded."""
    active_version = max((int(r["version"]) for r in records), default=0)
    out = []
    for r in records:
        status = r["status"]
        if status == "active" and int(r["version"]) != active_version:
            status = "superseded"
        out.append(
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
    return out


class DecisionHandlers(CodeHandlers):
    def __init__(self, rows: Rows, search: UnifiedSearch, code: CodeIndex, auth: Authenticator) -> None:
        self._rows = rows
        self._search = search
        self._code = code
        self._auth = auth
        self._decisions = DecisionOps(rows)
        self._memory = MemoryOps(rows)
        self._blocks = BlockOps(rows)
        self._rollback = Rollback(rows)

    # --- decision.*

    async def record_decision(self, req: dpb.RecordDecisionRequest, ctx: CallContext) -> dpb.RecordDecisionResponse:
        return await self._decisions.record(ctx, req)

    async def record_decisions(self, req: dpb.RecordDecisionsRequest, ctx: CallContext) -> dpb.RecordDecisionsResponse:
        answers = await self._decisions.record_many(ctx, req.records)
        # One ledger row per record, as decision.record leaves it (task.create_many's way).
        ctx.item_rows = [
            ("decision.record", ledger_args(r), a.code if isinstance(a, LoomError) else "")
            for r, a in zip(req.records, answers, strict=True)
        ]
        return dpb.RecordDecisionsResponse(
            results=[
                dpb.RecordDecisionResult(error=dpb.DecisionItemError(code=a.code, message=a.message, http_status=a.http_status))
                if isinstance(a, LoomError)
                else dpb.RecordDecisionResult(decision=a)
                for a in answers
            ]
        )

    async def decision_precedents(self, req: dpb.DecisionPrecedentsRequest, ctx: CallContext) -> dpb.DecisionPrecedentsResponse:
        found, none_close = await self._decisions.precedents(ctx, req.query, req.category, req.with_outcome_only, req.limit)
        ctx.out_hits = len(found)
        return dpb.DecisionPrecedentsResponse(
            precedents=found,
            min_similarity=self._decisions.r.d.settings.decision_precedents_min_similarity,
            none_close=none_close,
        )

    async def decision_chain(self, req: dpb.DecisionChainRequest, ctx: CallContext) -> dpb.DecisionChainResponse:
        return await self._decisions.chain(ctx, req.memory_key, req.direction, req.max_hops)

    async def decision_outcome(self, req: dpb.DecisionOutcomeRequest, ctx: CallContext) -> dpb.DecisionOutcomeResponse:
        return await self._decisions.outcome(ctx, req.memory_key, req.realized_outcome, req.success if req.HasField("success") else None)

    async def decision_calibration(self, req: dpb.DecisionCalibrationRequest, ctx: CallContext) -> dpb.DecisionCalibrationResponse:
        return await self._decisions.calibration(ctx, req.window_days, req.agent, req.category)

    # --- memory.*

    async def set_memory(self, req: mpb.SetMemoryRequest, ctx: CallContext) -> mpb.SetMemoryResponse:
        return await self._memory.set(ctx, req)

    async def memory_for_file(self, req: mpb.MemoryForFileRequest, ctx: CallContext) -> mpb.MemoryForFileResponse:
        include = req.include_conflicted if req.HasField("include_conflicted") else True
        out = await self._blocks.for_file(ctx, req.path, req.repo, include, req.max_chars)
        ctx.out_hits = len(out.entries)
        return out

    async def context_pack(self, req: mpb.ContextPackRequest, ctx: CallContext) -> mpb.ContextPackResponse:
        out = await self._blocks.pack(ctx, req.query, req.token_budget, req.category)
        ctx.out_hits = len(out.decisions)
        return out

    async def move_memory(self, req: mpb.MoveMemoryRequest, ctx: CallContext) -> mpb.MoveMemoryResponse:
        ident = self._rows.ident(ctx, req.agent_id, req.user_id, req.session_id)
        return await self._memory.move(ctx, req.memory_key, req.to_key, req.keep_redirect, ident)

    async def clear_memory(self, req: mpb.ClearMemoryRequest, ctx: CallContext) -> mpb.ClearMemoryResponse:
        return await self._memory.clear(ctx, req.prefix, req.memory_type)

    async def apply_memory(self, req: mpb.ApplyMemoryRequest, ctx: CallContext) -> mpb.ApplyMemoryResponse:
        return mpb.ApplyMemoryResponse(results=await self._memory.apply(ctx, req.actions))

    async def rollback_namespace(self, req: mpb.RollbackNamespaceRequest, ctx: CallContext) -> mpb.RollbackNamespaceResponse:
        return await self._rollback.run(ctx, req.to_time, req.dry_run)

    async def dedup_resolve(self, req: mpb.DedupResolveRequest, ctx: CallContext) -> mpb.DedupResolveResponse:
        named = req.agent_id or req.user_id or req.session_id
        ident = self._rows.ident(ctx, req.agent_id, req.user_id, req.session_id) if named else None
        return await self._memory.dedup_resolve(ctx, req.keep_key, req.drop_key, ident)

    async def auto_supersede(self, req: mpb.AutoSupersedeRequest, ctx: CallContext) -> mpb.AutoSupersedeResponse:
        return await self._memory.auto_supersede(ctx, req.memory_key, req.by_key)

    async def write_record(self, req: mpb.WriteRecordRequest, ctx: CallContext) -> mpb.WriteRecordResponse:
        return await self._decisions.record_write(ctx, req)

    async def record_history(self, req: mpb.RecordHistoryRequest, ctx: CallContext) -> mpb.RecordHistoryResponse:
        return mpb.RecordHistoryResponse(records=_record_msgs(await self._decisions.record_history(ctx, req.memory_key)))

    async def get_memory(self, req: mpb.GetMemoryRequest, ctx: CallContext) -> mpb.MemoryRow:
        read = await self._memory.get(ctx, req.memory_key, req.agent_id, req.user_id, req.session_id)
        return _row_msg(read.row, read)

    async def list_memory(self, req: mpb.ListMemoryRequest, ctx: CallContext) -> mpb.ListMemoryResponse:
        rows = await self._memory.list(ctx, req.memory_type, req.tag, req.prefix, req.limit)
        ctx.out_hits = len(rows)
        return mpb.ListMemoryResponse(rows=[_row_msg(r) for r in rows])

    async def search_memory(self, req: mpb.SearchMemoryRequest, ctx: CallContext) -> mpb.SearchMemoryResponse:
        hits, weak = await self._memory.search(ctx, req.query, req.memory_type, req.tag, req.limit)
        ctx.out_hits = len(hits)
        return mpb.SearchMemoryResponse(
            weak=weak,
            hits=[message_from(mpb.SearchHit, r, score=round(s, 6), agent_id=r.agent) for r, s in hits],
        )

    async def unified_search(self, req: spb.UnifiedSearchRequest, ctx: CallContext) -> spb.UnifiedSearchResponse:
        hits, searched, skipped = await self._search.search(ctx, req.query, req.limit, list(req.namespaces), list(req.sources), req.remote)
        ctx.out_hits = len(hits)
        return spb.UnifiedSearchResponse(
            results=[message_from(spb.UnifiedSearchHit, h, score=round(h.score, 6)) for h in hits],
            namespaces=searched,
            skipped=[spb.UnifiedSearchSkip(namespace=s.namespace, source=s.source, code=s.code) for s in skipped],
        )

    async def memory_history(self, req: mpb.MemoryHistoryRequest, ctx: CallContext) -> mpb.MemoryHistoryResponse:
        versions, records = await self._memory.history(ctx, req.memory_key, req.agent_id, req.user_id, req.session_id)
        recs = _record_msgs(records)
        return mpb.MemoryHistoryResponse(versions=[_row_msg(v) for v in versions], records=recs)

    async def delete_memory(self, req: mpb.DeleteMemoryRequest, ctx: CallContext) -> mpb.DeleteMemoryResponse:
        ident = self._rows.ident(ctx, req.agent_id, req.user_id, req.session_id)
        return await self._memory.delete(ctx, req.memory_key, ident)

    async def delete_memory_version(self, req: mpb.DeleteMemoryVersionRequest, ctx: CallContext) -> mpb.DeleteMemoryResponse:
        ident = self._rows.ident(ctx, req.agent_id, req.user_id, req.session_id)
        return await self._memory.delete_version(ctx, req.memory_key, req.version, ident)

    async def restore_memory(self, req: mpb.RestoreMemoryRequest, ctx: CallContext) -> mpb.MemoryWriteResponse:
        ident = self._rows.ident(ctx, req.agent_id, req.user_id, req.session_id)
        return _write_msg(await self._memory.restore(ctx, req.memory_key, ident))

    async def pin_memory(self, req: mpb.PinMemoryRequest, ctx: CallContext) -> mpb.MemoryWriteResponse:
        ident = self._rows.ident(ctx, req.agent_id, req.user_id, req.session_id)
        return _write_msg(await self._memory.set_pin(ctx, req.memory_key, ident, True))

    async def unpin_memory(self, req: mpb.PinMemoryRequest, ctx: CallContext) -> mpb.MemoryWriteResponse:
        ident = self._rows.ident(ctx, req.agent_id, req.user_id, req.session_id)
        return _write_msg(await self._memory.set_pin(ctx, req.memory_key, ident, False))

    async def verify_memory(self, req: mpb.PinMemoryRequest, ctx: CallContext) -> mpb.MemoryWriteResponse:
        ident = self._rows.ident(ctx, req.agent_id, req.user_id, req.session_id)
        return _write_msg(await self._memory.verify(ctx, req.memory_key, ident))

    async def update_memory_by_id(self, req: mpb.UpdateMemoryByIdRequest, ctx: CallContext) -> mpb.MemoryWriteResponse:
        value = req.value if req.HasField("value") else None
        tags = list(req.tags) if req.set_tags else None
        return _write_msg(await self._memory.update_by_id(ctx, req.memory_id, value, tags, req.if_value_hash))

    async def lock_memory(self, req: mpb.LockMemoryRequest, ctx: CallContext) -> mpb.LockMemoryResponse:
        return await self._memory.lock(ctx, req.memory_key, req.ttl_seconds)

    async def unlock_memory(self, req: mpb.UnlockMemoryRequest, ctx: CallContext) -> mpb.LockMemoryResponse:
        return await self._memory.unlock(ctx, req.memory_key)

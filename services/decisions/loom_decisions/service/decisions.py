"""The decision.* use cases (spec 003, Decisions)."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from loom_api.decisions.v1 import decisions_pb2 as dpb
from loom_api.decisions.v1 import memory_pb2 as mpb
from loom_core.catalog import message_from
from loom_core.chain import CallContext
from loom_core.errors import BadRequest, Conflict, ErrorCode, LoomError, NotFound, invalid_field
from loom_core.store import ch_time

from ..domain.calibration import Calibration, Scored, calibrate
from ..domain.files import detect_files
from ..domain.keys import MissingIdentity, decision_key
from ..domain.statement import CATEGORY_TAG_PREFIX, PROPOSED_TAG, STAGES, DecisionText, LimitExceeded, decision_tags, excerpt, stage_of
from ..store.decisions import DecisionRecordRow, Edge
from ..store.memory import Ident, MemoryRow, Own, RowView
from .rows import RowChanges, Rows, RowWrite, WriteRounds, record_row

PRECEDENTS_MAX = 25
# decision.record_many's records a call (its proto's max_items): past ~100 the per-call costs
# are already a fraction of a millisecond a record; 500 keeps one call's body well under 16 MiB.
RECORD_MANY_MAX = 500
CHAIN_HOPS_MAX = 4
DIRECTIONS = ("upstream", "downstream", "both")


def _checked_decision(req: dpb.RecordDecisionRequest | mpb.WriteRecordRequest, stage: str) -> tuple[str, str, DecisionText]:
    """A written decision's category, key and checked text; refuses a missing or blank identity
    part (category, scenario, outcome) and a part past its limit, as every decision write does."""
    category = req.category.strip()
    for name, given in (("category", req.category), ("scenario", req.scenario), ("outcome", req.outcome)):
        if not given.strip():
            raise invalid_field(name, "required")
    try:
        key = decision_key(category, req.scenario)
        text = DecisionText.checked(
            scenario=req.scenario,
            outcome=req.outcome,
            reasoning=req.reasoning,
            alternatives=list(req.alternatives),
            stage=stage,
        )
    except MissingIdentity as exc:
        raise BadRequest(ErrorCode.MISSING_IDENTITY_FIELD, f"{exc.field} has no letter or digit", {"field": exc.field}) from None
    except LimitExceeded as exc:
        raise invalid_field(exc.field, f"longer than {exc.limit}") from None
    return category, key, text


def _record(
    key: str,
    version: int,
    category: str,
    text: DecisionText,
    ident: Ident,
    now: str,
    *,
    confidence: float | None,
    caused_by: list[str],
    influenced_by: list[str],
    run_id: str,
    memories_used: list[str] | None = None,
    files: list[str] | None = None,
    source_resource_id: str = "",
    source_class: str = "",
    tags: list[str] | None = None,
) -> DecisionRecordRow:
    """A new version of a decision record, as decision_records stores it (no outcome yet)."""
    return {
        "key": key,
        "version": version,
        "record_version": version,
        "status": "active",
        "category": category,
        "scenario": text.scenario,
        "reasoning": text.reasoning,
        "outcome": text.outcome,
        "alternatives": list(text.alternatives),
        "confidence": confidence,
        "caused_by": caused_by,
        "influenced_by": influenced_by,
        "memories_used": memories_used or [],
        "run_id": run_id,
        "agent": ident.agent,
        "user": ident.user,
        "session": ident.session,
        "realized_outcome": "",
        "success": None,
        "files": files or [],
        "source_resource_id": source_resource_id,
        "source_class": source_class,
        "tags": tags or [],
        "recorded_at": now,
        "outcome_at": None,
        "ts": now,
    }


def _edges(key: str, version: int, caused_by: list[str], influenced_by: list[str], now: str) -> list[Edge]:
    """The causal edges record version `version` of `key` states."""
    return [
        Edge(src, key, kind, version, now) for kind, srcs in (("caused_by", caused_by), ("influenced_by", influenced_by)) for src in srcs
    ]


@dataclass(frozen=True, slots=True)
class _Recording:
    """One decision.record call, checked, waiting for its round."""

    ctx: CallContext
    req: dpb.RecordDecisionRequest
    stage: str
    category: str
    key: str
    text: DecisionText
    statement: str
    ident: Ident
    # False (decision.record_many): a restatement of the writer's own active decision is answered
    # as held, with nothing written (no reinforcement), so an import retried writes nothing twice.
    reinforce: bool = True

    @property
    def tags(self) -> list[str]:
        return decision_tags(list(self.req.tags), self.category, self.stage)


def _recording(ctx: CallContext, req: dpb.RecordDecisionRequest, *, reinforce: bool = True) -> _Recording:
    """A decision.record, checked as every decision write is (refused before anything is written)."""
    stage = req.stage or "decided"
    if stage not in STAGES:
        raise invalid_field("stage", "decided or proposed")
    if req.HasField("confidence") and not 0.0 <= req.confidence <= 1.0:
        raise invalid_field("confidence", "between 0 and 1")
    category, key, text = _checked_decision(req, stage)
    ident = Ident(ctx.agent_label, ctx.user, ctx.session)
    return _Recording(ctx, req, stage, category, key, text, text.statement(), ident, reinforce)


def _at_item(index: int, exc: LoomError) -> LoomError:
    """An item's refusal as the whole call's: its field named under records[index]."""
    payload = exc.to_payload()
    detail = dict(payload.get("detail") or {})
    field = detail.get("field")
    where = f"records[{index}]"
    message = f"{where}.{exc.message}" if field and exc.message.startswith(f"{field}:") else f"{where}: {exc.message}"
    detail.update(index=index, field=f"{where}.{field}" if field else where)
    return LoomError.from_payload({**payload, "message": message, "detail": detail})


def _own_active(rec: DecisionRecordRow | None, ident: Ident) -> bool:
    """The key's record is active and written by `ident`."""
    return rec is not None and rec["status"] == "active" and Ident(rec["agent"], rec["user"], rec["session"]) == ident


@dataclass(frozen=True, slots=True)
class _KeyState:
    """What a round read of one key for its write: the writer's own row, and the key's record."""

    own: Own
    rec: DecisionRecordRow | None

    @property
    def live(self) -> MemoryRow | None:
        """The writer's own row, when it is active."""
        head = self.own.head
        return head if head is not None and head.status == "active" else None

    def restates(self, statement: str) -> bool:
        """The writer's active row states `statement` as a decision, word for word."""
        live = self.live
        return live is not None and live.value == statement and live.memory_type == "decision"


def _settled(w: _Recording, state: _KeyState) -> dpb.RecordDecisionResponse | LoomError | None:
    """The answer of a write that writes nothing (the writer's own active decision restated
    under an import, or its pinned row), or None for a write that goes on to write."""
    own = state.live
    if own is None:
        return None
    restated = state.restates(w.statement)
    if restated and not w.reinforce and _own_active(state.rec, w.ident):
        return dpb.RecordDecisionResponse(
            memory_key=w.key, restated=True, conflicts=own.conflicts, stage=w.stage, statement=w.statement, version=own.version
        )
    if own.pinned and not restated:
        return Conflict(
            ErrorCode.PINNED_CONFLICT, "the writer's decision row is pinned; an admin unpins it with memory.unpin first", {"key": w.key}
        )
    return None


class DecisionOps:
    def __init__(self, rows: Rows) -> None:
        self.r = rows
        self.mem = rows.mem
        self.dec = rows.dec
        self._rounds: WriteRounds[_Recording, dpb.RecordDecisionResponse] = WriteRounds(self._record_round)

    # --- record

    async def record(self, ctx: CallContext, req: dpb.RecordDecisionRequest) -> dpb.RecordDecisionResponse:
        org, ns = ctx.org, ctx.namespace
        write = _recording(ctx, req)
        await self.r.refuse_if_locked(org, ns, write.key)
        async with self.r.key_lock(org, ns, write.key):
            answer = await self._rounds.submit(org, ns, write)
        if answer.created:  # a new live row; a restatement or a new version of a live row counts the same
            self.r.publish_live(org, ns)
        return answer

    async def record_many(
        self, ctx: CallContext, reqs: Sequence[dpb.RecordDecisionRequest]
    ) -> list[dpb.RecordDecisionResponse | LoomError]:
        """decision.record_many: each record as decision.record takes it, answered on its own
        (a locked key or a pinned row refuses its items only); an item whose fields
        decision.record would refuse refuses the call before anything is written. The records
        go through one round (the model over every text in one worker-thread hop, the reads,
        the conflict scan, the versions, one insert per table), a key named twice in a later
        round, with every key's lock held throughout: single writers of those keys wait, as
        they wait for each other."""
        org, ns = ctx.org, ctx.namespace
        if not 1 <= len(reqs) <= RECORD_MANY_MAX:
            raise invalid_field("records", f"between 1 and {RECORD_MANY_MAX} items")
        writes: list[_Recording] = []
        for i, req in enumerate(reqs):
            try:
                writes.append(_recording(ctx, req, reinforce=False))
            except LoomError as exc:
                raise _at_item(i, exc) from None
        keys = sorted({w.key for w in writes})

        async def lock_refusal(key: str) -> LoomError | None:
            try:
                await self.r.refuse_if_locked(org, ns, key)
            except LoomError as exc:
                return exc
            return None

        refused = {k: e for k, e in zip(keys, await asyncio.gather(*(lock_refusal(k) for k in keys)), strict=True) if e is not None}
        answers: list[dpb.RecordDecisionResponse | LoomError | None] = [refused.get(w.key) for w in writes]
        # Round n carries each key's n-th record: a round holds one write per key (rows.WriteRounds).
        rounds: list[list[int]] = []
        seen: Counter[str] = Counter()
        for i, w in enumerate(writes):
            if w.key not in refused:
                if seen[w.key] == len(rounds):
                    rounds.append([])
                rounds[seen[w.key]].append(i)
                seen[w.key] += 1
        async with contextlib.AsyncExitStack() as held:
            for key in keys:  # in key order, so two imports never hold each other's keys
                if key not in refused:
                    await held.enter_async_context(self.r.key_lock(org, ns, key))
            carried: dict[str, _KeyState] = {}
            for members in rounds:
                answered, carried = await self._round(org, ns, [writes[i] for i in members], carried)
                for i, answer in zip(members, answered, strict=True):
                    answers[i] = answer
        done = [a for a in answers if a is not None]
        if any(isinstance(a, dpb.RecordDecisionResponse) and a.created for a in done):
            self.r.publish_live(org, ns)
        if len(done) != len(writes):
            raise RuntimeError("decision.record_many: a record left unanswered")
        return done

    async def _record_round(self, org: str, ns: str, writes: list[_Recording]) -> list[dpb.RecordDecisionResponse | LoomError]:
        """One round of decision.record (rows.WriteRounds)."""
        return (await self._round(org, ns, writes, {}))[0]

    async def _round(
        self, org: str, ns: str, writes: list[_Recording], carried: Mapping[str, _KeyState]
    ) -> tuple[list[dpb.RecordDecisionResponse | LoomError], dict[str, _KeyState]]:
        """One round: the writers' rows and the keys' records read and the conflict scan run for
        every write at once, then one insert per table. A round whose every key is in `carried`
        (what the key's last round read, and that round wrote nothing under it: its lock is held
        throughout) reads nothing again, and embeds and scans only the writes that write. Another
        replica's write to such a key between two rounds is taken as landing after the call, as
        one a moment later would: the records answered so write nothing. Returns the answers, and
        the reads of each key this round wrote nothing under."""

        async def embedded_and_scanned(ws: Sequence[_Recording]) -> tuple[list[list[float]], list[list[str]]]:
            vecs = [[float(x) for x in v] for v in await self.r.d.embedder.embed([excerpt(w.statement) for w in ws])]
            return vecs, await self.r.close_decisions(org, ns, [(w.key, v) for w, v in zip(ws, vecs, strict=True)])

        if all(w.key in carried for w in writes):
            states = [carried[w.key] for w in writes]
            settled = [_settled(w, s) for w, s in zip(writes, states, strict=True)]
            writing = [i for i, answer in enumerate(settled) if answer is None]
            vecs: list[list[float]] = [[] for _ in writes]
            conflicts: list[list[str]] = [[] for _ in writes]
            if writing:
                for i, vec, flagged in zip(writing, *await embedded_and_scanned([writes[i] for i in writing]), strict=True):
                    vecs[i], conflicts[i] = vec, flagged
        else:
            # The model and the conflict scan beside the two reads: one stage, so every write waits in one queue.
            (vecs, conflicts), owns, read = await asyncio.gather(
                embedded_and_scanned(writes),
                self.mem.own_many((org, ns), [(w.key, w.ident) for w in writes]),
                self.dec.current_many(org, ns, [w.key for w in writes]),
            )
            states = [_KeyState(mine, read.get(w.key)) for w, mine in zip(writes, owns, strict=True)]
            settled = [_settled(w, s) for w, s in zip(writes, states, strict=True)]
        recs = {w.key: s.rec for w, s in zip(writes, states, strict=True) if s.rec is not None}
        unchanged = {w.key: s for w, s, answer in zip(writes, states, settled, strict=True) if answer is not None}
        answers: list[dpb.RecordDecisionResponse | LoomError] = []
        pending: list[tuple[int, dpb.RecordDecisionResponse]] = []  # the writes not refused, with their place in answers
        row_writes: list[RowWrite] = []
        for w, vec, state, flagged, done in zip(writes, vecs, states, conflicts, settled, strict=True):
            if done is not None:
                answers.append(done)
                continue
            own = state.live
            restated = state.restates(w.statement)
            row_fields: RowChanges = {
                "value": w.statement,
                "memory_type": "decision",
                "tags": w.tags,
                "conflicts": flagged,
                # Unset, the files are the ones the stored fields name (never the realized outcome).
                "files": list(dict.fromkeys(f for f in w.req.files if f.strip()))
                or detect_files([w.text.scenario, w.text.outcome, w.text.reasoning, *w.text.alternatives]),
                "source_resource_id": w.req.source_resource_id,
                "source_class": w.req.source_class,
            }
            if restated and own is not None:
                row_fields["reinforcements"] = own.reinforcements + 1
            answer = dpb.RecordDecisionResponse(
                memory_key=w.key, created=own is None, restated=restated, conflicts=flagged, stage=w.stage, statement=w.statement
            )
            pending.append((len(answers), answer))
            answers.append(answer)
            row_writes.append(RowWrite(w.ctx, own, w.key, w.ident, "decision.record", vec, state.own.top, row_fields))

        landed: list[tuple[int, dpb.RecordDecisionResponse, MemoryRow]] = []
        for (i, answer), row in zip(pending, await self.r.append_many(org, ns, row_writes), strict=True):
            if isinstance(row, LoomError):
                answers[i] = row
                continue
            answer.version = row.version
            landed.append((i, answer, row))
        await asyncio.gather(*(self.r.store_chunks(org, ns, row) for _, _, row in landed))

        # A new record version for each landed row, unless its writer restated its own active record.
        superseding: list[tuple[int, MemoryRow, int]] = []
        for i, answer, row in landed:
            rec = recs.get(row.key)
            rec_active = rec is not None and rec["status"] == "active"
            if not (answer.restated and _own_active(rec, row.ident)):
                answer.superseded_prior = rec_active
                superseding.append((i, row, int(rec["version"]) if rec is not None else 0))
        versions = await asyncio.gather(
            *(self.r.next_record_version(org, ns, row.key, current) for _, row, current in superseding), return_exceptions=True
        )
        now = ch_time()
        new_recs: list[DecisionRecordRow] = []
        edges: list[Edge] = []
        for (i, row, _), version in zip(superseding, versions, strict=True):
            if isinstance(version, LoomError):
                answers[i] = version
                continue
            if isinstance(version, BaseException):
                raise version
            w = writes[i]
            caused_by, influenced_by = list(dict.fromkeys(w.req.caused_by)), list(dict.fromkeys(w.req.influenced_by))
            new_recs.append(
                _record(
                    w.key,
                    version,
                    w.category,
                    w.text,
                    w.ident,
                    now,
                    confidence=w.req.confidence if w.req.HasField("confidence") else None,
                    caused_by=caused_by,
                    influenced_by=influenced_by,
                    memories_used=list(dict.fromkeys(k for k in w.req.memories_used if k.strip())),
                    run_id=w.req.run_id or w.ctx.run_id,
                    files=list(row.files),
                    source_resource_id=row.source_resource_id,
                    source_class=row.source_class,
                    tags=w.tags,
                )
            )
            edges += _edges(w.key, version, caused_by, influenced_by, now)
        await asyncio.gather(self.r.append_records(org, ns, new_recs), self.dec.add_edges(org, ns, edges))
        return answers, unchanged

    # --- the record alone

    async def record_write(self, ctx: CallContext, req: mpb.WriteRecordRequest) -> mpb.WriteRecordResponse:
        """memory.record.write on the decision schema: a new version of the key's record under
        the caller, holding only what this write states (nothing carried over), and its edges;
        no memory row. decision.chain serves it; decision.outcome answers not-found for it."""
        org, ns = ctx.org, ctx.namespace
        if req.schema != "decision":
            raise invalid_field("schema", "decision (the only schema served)")
        category, key, text = _checked_decision(req, "decided")
        await self.r.refuse_if_locked(org, ns, key)
        async with self.r.key_lock(org, ns, key):
            rec = await self.dec.current(org, ns, key)
            now = ch_time()
            version = await self.r.next_record_version(org, ns, key, int(rec["version"]) if rec is not None else 0)
            caused_by = list(dict.fromkeys(req.caused_by))
            influenced_by = list(dict.fromkeys(req.influenced_by))
            new_rec = _record(
                key,
                version,
                category,
                text,
                Ident(ctx.agent_label, ctx.user, ctx.session),
                now,
                confidence=req.confidence if req.HasField("confidence") else None,
                caused_by=caused_by,
                influenced_by=influenced_by,
                run_id=ctx.run_id,
            )
            await self.r.append_records(org, ns, [new_rec])
            await self.dec.add_edges(org, ns, _edges(key, version, caused_by, influenced_by, now))
        return mpb.WriteRecordResponse(memory_key=key, version=version, superseded_prior=rec is not None and rec["status"] == "active")

    async def record_history(self, ctx: CallContext, key: str) -> list[DecisionRecordRow]:
        if not key:
            raise invalid_field("memory_key", "required")
        records = await self.dec.history(ctx.org, ctx.namespace, key)
        if not records:
            raise NotFound(ErrorCode.RESOURCE_NOT_FOUND, "no record was ever written under this key", {"memory_key": key})
        return records

    # --- precedents

    async def precedents(
        self, ctx: CallContext, query: str, category: str, with_outcome_only: bool, limit: int
    ) -> tuple[list[dpb.Precedent], bool]:
        """The closest live decisions, best first, none under the similarity floor; and whether
        decisions matched the filters but none was that close."""
        org, ns = ctx.org, ctx.namespace
        if not query.strip():
            raise invalid_field("query", "required")
        if limit == 0:
            limit = 10
        if not 1 <= limit <= PRECEDENTS_MAX:
            raise invalid_field("limit", f"between 1 and {PRECEDENTS_MAX}")
        floor = self.r.d.settings.decision_precedents_min_similarity
        vec = await self.r.d.embedder.embed_query(excerpt(query))
        tags = [CATEGORY_TAG_PREFIX + category] if category else []
        fetch = limit * (8 if with_outcome_only else 3)
        out: list[dpb.Precedent] = []
        below_floor = False
        while True:
            cached = await self.r.vectors.nearest_decisions(org, ns, vec, tags=tags, limit=fetch)
            hits: list[tuple[RowView, float]]
            if cached is not None:
                hits, recs = cached
            else:
                hits = list(await self.r.vectors.nearest(org, ns, vec, memory_type="decision", tags=tags, limit=fetch))
                recs = await self.dec.current_many(org, ns, [row.key for row, _ in hits])
            out = []
            seen: set[str] = set()
            for row, score in hits:
                if score < floor:  # hits come closest first: the rest are further still
                    below_floor = True
                    break
                rec = recs.get(row.key)
                if rec is None or rec["status"] != "active" or row.key in seen:
                    continue
                if Ident(rec["agent"], rec["user"], rec["session"]) != Ident(row.agent, row.user, row.session):
                    continue  # another identity's row: the record is its writer's
                if with_outcome_only and not rec["realized_outcome"]:
                    continue
                seen.add(row.key)
                out.append(_precedent(rec, row, score))
                if len(out) == limit:
                    break
            if len(out) >= limit or below_floor or len(hits) < fetch or fetch >= 2000:
                break
            fetch *= 4
        await self.r.exposed(ctx, [p.memory_key for p in out])
        return out, below_floor and not out

    # --- chain

    async def chain(self, ctx: CallContext, key: str, direction: str, max_hops: int) -> dpb.DecisionChainResponse:
        org, ns = ctx.org, ctx.namespace
        direction = direction or "both"
        if direction not in DIRECTIONS:
            raise invalid_field("direction", "upstream, downstream or both")
        max_hops = max_hops or CHAIN_HOPS_MAX
        if not 1 <= max_hops <= CHAIN_HOPS_MAX:
            raise invalid_field("max_hops", f"between 1 and {CHAIN_HOPS_MAX}")
        root = await self.dec.current(org, ns, key)
        if root is None or root["status"] != "active":
            raise NotFound(ErrorCode.RESOURCE_NOT_FOUND, "no active decision under this key", {"memory_key": key})
        hops: dict[str, int] = {key: 0}
        edges: dict[tuple[str, str, str], dpb.ChainEdge] = {}
        recs: dict[str, DecisionRecordRow] = {key: root}
        for upstream in [d == "upstream" for d in (["upstream", "downstream"] if direction == "both" else [direction])]:
            frontier = [key]
            for hop in range(1, max_hops + 1):
                if not frontier:
                    break
                found = await self.dec.edges_touching(org, ns, frontier, upstream=upstream)
                dsts = await self.dec.current_many(org, ns, [e["dst"] for e in found])
                recs.update(dsts)
                nxt: list[str] = []
                for e in found:
                    d = dsts.get(e["dst"])
                    # An edge counts while the record that states it is the key's active one.
                    if d is None or d["status"] != "active" or int(d["record_version"]) != int(e["dst_version"]):
                        continue
                    edges[(e["src"], e["dst"], e["kind"])] = dpb.ChainEdge(from_key=e["src"], to_key=e["dst"], kind=e["kind"])
                    other = e["src"] if upstream else e["dst"]
                    if other not in hops:
                        hops[other] = hop
                        nxt.append(other)
                frontier = nxt
        more = await self.dec.current_many(org, ns, [k for k in hops if k not in recs])
        recs.update(more)
        nodes: list[dpb.ChainNode] = []
        for k, h in sorted(hops.items(), key=lambda kv: (kv[1], kv[0])):
            rec = recs.get(k)
            node = dpb.ChainNode(memory_key=k, hops=h, is_decision=rec is not None and rec["status"] == "active")
            if node.is_decision and rec is not None:
                row = await self.mem.head(org, ns, k, Ident(rec["agent"], rec["user"], rec["session"]))
                node.stage = stage_of(row.tags if row else [], rec["realized_outcome"])
                node.category, node.scenario = rec["category"], rec["scenario"]
                node.outcome, node.realized_outcome = rec["outcome"], rec["realized_outcome"]
            nodes.append(node)
        await self.r.exposed(ctx, list(hops))
        return dpb.DecisionChainResponse(nodes=nodes, edges=list(edges.values()))

    # --- outcome

    async def outcome(self, ctx: CallContext, key: str, realized: str, success: bool | None) -> dpb.DecisionOutcomeResponse:
        org, ns = ctx.org, ctx.namespace
        if not realized.strip():
            raise invalid_field("realized_outcome", "required")
        rec = await self.dec.current(org, ns, key)
        if rec is None or rec["status"] != "active":
            raise NotFound(ErrorCode.RESOURCE_NOT_FOUND, "no active decision under this key", {"memory_key": key})
        writer = Ident(rec["agent"], rec["user"], rec["session"])
        read = await self.mem.head(org, ns, key, writer)
        if read is None or read.status != "active":
            raise NotFound(ErrorCode.RESOURCE_NOT_FOUND, "the decision's row is not live", {"memory_key": key})
        try:
            text = DecisionText.checked(
                scenario=rec["scenario"],
                outcome=rec["outcome"],
                reasoning=rec["reasoning"],
                alternatives=list(rec["alternatives"]),
                realized=realized,
                stage="decided",
            )
        except LimitExceeded as exc:
            raise invalid_field(exc.field, f"longer than {exc.limit}") from None
        statement = text.statement()
        vec = await self.r.d.embedder.embed_one(excerpt(statement))
        moved = Conflict(ErrorCode.PRECONDITION_FAILED, "the decision changed during the call; call again", {"memory_key": key})
        async with self.r.conditional_write(org, ns, key, ctx.request_id), self.r.key_lock(org, ns, key):
            row = await self.mem.head(org, ns, key, writer)
            if row is None or row.version != read.version or row.value_hash != read.value_hash:
                raise moved
            if not await self._record_unmoved(org, ns, key, rec):
                raise moved
            tags = [t for t in row.tags if t != PROPOSED_TAG and not t.startswith(CATEGORY_TAG_PREFIX)]
            tags = decision_tags(tags, rec["category"], "decided")
            restated = row.value == statement
            changes: RowChanges = {"value": statement, "tags": tags, "pinned": read.pinned}
            if restated:
                changes["reinforcements"] = row.reinforcements + 1
            new_row = await self.r.append(org, ns, ctx, row, key=key, ident=writer, op="decision.outcome", embedding=vec, **changes)
            await self.r.store_chunks(org, ns, new_row)
            if not await self._record_unmoved(org, ns, key, rec):
                raise moved
            verdict = success if success is not None else (None if rec["success"] is None else bool(rec["success"]))
            now = ch_time()
            await self.r.append_records(
                org,
                ns,
                [
                    {
                        **record_row(rec),
                        "version": await self.r.next_record_version(org, ns, key, int(rec["version"])),
                        "realized_outcome": text.realized,
                        "success": None if verdict is None else int(verdict),
                        "outcome_at": now,
                        "ts": now,
                    }
                ],
            )
        credited, charged, uncredited = await self._feedback(org, ns, key, rec, success, now)
        return dpb.DecisionOutcomeResponse(
            memory_key=key,
            realized_outcome=text.realized,
            success=verdict,
            stage="decided",
            statement=statement,
            version=new_row.version,
            credited=credited,
            charged=charged,
            uncredited=uncredited,
            restated=restated,
        )

    async def _feedback(
        self, org: str, ns: str, key: str, rec: DecisionRecordRow, success: bool | None, now: str
    ) -> tuple[list[str], list[str], list[str]]:
        """Credit (success) or charge (failure) the memories the decision used: the keys it
        names as memories_used, caused_by or influenced_by that its run was shown. Each key's
        newest figure for this decision counts, so a later failure turns an earlier credit into
        a charge (answered as uncredited), and a key no longer used gets 0."""
        if success is None or not rec["run_id"]:
            return [], [], []
        used = set(rec.get("memories_used") or []) | set(rec["caused_by"]) | set(rec["influenced_by"])
        await self.r.exposures.flush()  # this replica's reads of the run, stored before they are read
        shown = set(await self.dec.exposed_keys(org, ns, rec["run_id"]))
        keys = sorted(k for k in used & shown if k != key)
        earlier = await self.mem.feedback_of_decision(org, ns, key)
        delta = 1 if success else -1
        figures = {k: delta for k in keys} | {k: 0 for k, d in earlier.items() if d != 0 and k not in keys}
        await self.mem.add_feedback(
            [
                {"org": org, "namespace": ns, "key": k, "decision_key": key, "run_id": rec["run_id"], "delta": d, "ts": now}
                for k, d in sorted(figures.items())
            ]
        )
        uncredited = sorted(k for k, d in earlier.items() if d > 0 and figures.get(k, d) <= 0)
        return (keys, [], uncredited) if success else ([], keys, uncredited)

    async def _record_unmoved(self, org: str, ns: str, key: str, rec: DecisionRecordRow) -> bool:
        now = await self.dec.current(org, ns, key)
        return now is not None and int(now["version"]) == int(rec["version"]) and now["status"] == "active"

    # --- calibration

    async def calibration(self, ctx: CallContext, window_days: int, agent: str, category: str) -> dpb.DecisionCalibrationResponse:
        window_days = window_days or 90
        if not 1 <= window_days <= 3650:
            raise invalid_field("window_days", "between 1 and 3650")
        since = ch_time(datetime.now(UTC) - timedelta(days=window_days))
        rows = await self.dec.scored(ctx.org, ctx.namespace, since, agent, category)
        scored = [
            Scored(r["agent"], r["category"], float(r["confidence"]), bool(r["success"]))
            for r in rows
            if r["confidence"] is not None and r["success"] is not None
        ]
        return dpb.DecisionCalibrationResponse(
            rows=[_calibration_row(c) for c in calibrate(scored)], window_days=window_days, unscored=len(rows) - len(scored)
        )


def _calibration_row(c: Calibration) -> dpb.CalibrationRow:
    return message_from(dpb.CalibrationRow, c, bins=[message_from(dpb.CalibrationBin, b) for b in c.bins])


def _precedent(rec: DecisionRecordRow, row: RowView, score: float) -> dpb.Precedent:
    return dpb.Precedent(
        memory_key=rec["key"],
        score=round(score, 6),
        stage=stage_of(row.tags, rec["realized_outcome"]),
        category=rec["category"],
        scenario=rec["scenario"],
        outcome=rec["outcome"],
        reasoning=rec["reasoning"],
        alternatives=list(rec["alternatives"]),
        realized_outcome=rec["realized_outcome"],
        success=None if rec["success"] is None else bool(rec["success"]),
        confidence=rec["confidence"],
        statement=row.value,
        agent_id=rec["agent"],
        recorded_time=rec["recorded_at"],
        conflicts=list(row.conflicts),
    )

"""The memory.* use cases: reads that return keys (and record exposures), pins, attestation,
locks, deletes that retire a decision record, restores that do not revive it."""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from loom_api.decisions.v1 import memory_pb2 as mpb
from loom_core.bus.leases import LeaseHeld
from loom_core.chain import CallContext
from loom_core.errors import Conflict, ErrorCode, Forbidden, LoomError, NotFound, count_or_default, invalid_field
from loom_core.ranking import named_identifiers
from loom_core.roles import Role
from loom_core.store import ch_time

from ..domain.files import detect_files
from ..domain.ranking import fuse
from ..domain.statement import excerpt
from ..store.decisions import DecisionRecordRow
from ..store.memory import Ident, MemoryRow, ident_of
from .rows import LOCK_PREFIX, RowChanges, Rows, RowWrite, WriteRounds, cosine, lease_key

MOVED_TAG_PREFIX = "moved-to:"
SUPERSEDED_TAG_PREFIX = "superseded-by:"

Scored = tuple[MemoryRow, float]


@dataclass(frozen=True, slots=True)
class ReadRow:
    """A row as memory.get answers it: with whether a memory.lock holds its key, and the
    credits and charges decisions' outcomes gave it."""

    row: MemoryRow
    locked: bool
    credits: int
    charges: int


@dataclass(frozen=True, slots=True)
class _Setting:
    """One memory.set call, checked, waiting for its round."""

    ctx: CallContext
    req: mpb.SetMemoryRequest
    memory_type: str
    files: builtins.list[str]
    ident: Ident


class MemoryOps:
    def __init__(self, rows: Rows) -> None:
        self.r = rows
        self.mem = rows.mem
        self._rounds: WriteRounds[_Setting, mpb.SetMemoryResponse] = WriteRounds(self._set_round)

    # --- reads

    async def get(self, ctx: CallContext, key: str, agent_id: str = "", user_id: str = "", session_id: str = "") -> ReadRow:
        if not key:
            raise invalid_field("memory_key", "required")
        heads = await self.mem.heads(ctx.org, ctx.namespace, key)
        live = [
            h
            for h in heads
            if h.status == "active"
            and (not agent_id or h.agent == agent_id)
            and (not user_id or h.user == user_id)
            and (not session_id or h.session == session_id)
        ]
        if not live:
            raise NotFound(ErrorCode.RESOURCE_NOT_FOUND, "no live row under this key", {"key": key})
        row = await self.decorate(ctx, live[0])
        await self.r.exposed(ctx, [key])
        return row

    async def decorate(self, ctx: CallContext, row: MemoryRow) -> ReadRow:
        credits, charges = await self.mem.feedback(ctx.org, ctx.namespace, row.key)
        return ReadRow(row, await self.r.locked(ctx.org, ctx.namespace, row.key), credits, charges)

    async def list(self, ctx: CallContext, memory_type: str, tag: str, prefix: str, limit: int) -> builtins.list[MemoryRow]:
        limit = count_or_default("limit", limit, 100, 500)
        rows = await self.mem.live_heads(ctx.org, ctx.namespace, memory_type=memory_type, tag=tag, prefix=prefix, limit=limit)
        await self.r.exposed(ctx, [r.key for r in rows])
        return rows

    async def search(self, ctx: CallContext, query: str, memory_type: str, tag: str, limit: int) -> tuple[builtins.list[Scored], bool]:
        """Hybrid (domain/ranking.py): the rows, best first, with their fused scores; and whether
        the result is weak."""
        if not query.strip():
            raise invalid_field("query", "required")
        limit = count_or_default("limit", limit, 10, 50)
        vec = await self.r.d.embedder.embed_query(excerpt(query))
        tags = [tag] if tag else []
        candidates = max(limit * 5, 50)
        hits = await self.r.vectors.nearest(ctx.org, ctx.namespace, vec, memory_type=memory_type, tags=tags, limit=candidates)
        names = named_identifiers(query)
        if names:
            hits += await self.mem.naming(ctx.org, ctx.namespace, names, vec, memory_type=memory_type, tags=tags)
        hits = await self._with_chunks(ctx, vec, hits, memory_type, tag, candidates)
        ranked, weak = fuse(query, hits, limit)
        await self.r.exposed(ctx, [row.key for row, _ in ranked])
        return ranked, weak

    async def _with_chunks(
        self,
        ctx: CallContext,
        vec: builtins.list[float],
        hits: builtins.list[Scored],
        memory_type: str,
        tag: str,
        limit: int,
    ) -> builtins.list[Scored]:
        """A long value's chunks are read too: a row scores its best of excerpt and chunks."""
        best: dict[tuple[str, Ident], Scored] = {(r.key, r.ident): (r, s) for r, s in hits}
        for c in await self.mem.search_chunks(ctx.org, ctx.namespace, vec, limit * 2):
            score = 1.0 - float(c["d"])
            ident = ident_of(c)
            have = best.get((c["key"], ident))
            if have is not None:
                if score > have[1] and have[0].value_hash == c["value_hash"]:
                    best[(c["key"], ident)] = (have[0], score)
                continue
            row = await self.mem.head(ctx.org, ctx.namespace, c["key"], ident)
            if row is None or row.status != "active" or row.value_hash != c["value_hash"]:
                continue
            if (memory_type and row.memory_type != memory_type) or (tag and tag not in row.tags):
                continue
            best[(c["key"], ident)] = (row, score)
        return sorted(best.values(), key=lambda rs: (-rs[1], rs[0].key))[:limit]

    async def history(
        self, ctx: CallContext, key: str, agent_id: str, user_id: str, session_id: str
    ) -> tuple[builtins.list[MemoryRow], builtins.list[DecisionRecordRow]]:
        versions = await self.mem.versions(ctx.org, ctx.namespace, key)
        versions = [
            v
            for v in versions
            if (not agent_id or v.agent == agent_id) and (not user_id or v.user == user_id) and (not session_id or v.session == session_id)
        ]
        records = await self.r.dec.history(ctx.org, ctx.namespace, key)
        if not versions and not records:
            raise NotFound(ErrorCode.RESOURCE_NOT_FOUND, "nothing was ever stored under this key", {"key": key})
        return versions, records

    # --- the general write

    async def set(self, ctx: CallContext, req: mpb.SetMemoryRequest) -> mpb.SetMemoryResponse:
        """The caller's row under a key. The value's bytes decide restatement: the same bytes
        reinforce the row (a pinned row accepts it); other bytes revise it (a pinned row
        refuses, 409 PINNED_CONFLICT). A rewrite of a decision row with another memory_type
        leaves its record active (spec 003, Leaves the record active)."""
        org, ns = ctx.org, ctx.namespace
        key, value = req.memory_key, req.value
        memory_type = req.memory_type or "note"
        if not key.strip():
            raise invalid_field("memory_key", "required")
        if not value.strip():
            raise invalid_field("value", "required")
        if memory_type == "decision":
            raise invalid_field("memory_type", "decision rows are written by decision.record")
        files = list(dict.fromkeys(f for f in req.files if f.strip())) or detect_files([value])
        await self.r.refuse_if_locked(org, ns, key)
        write = _Setting(ctx, req, memory_type, files, Ident(ctx.agent_label, ctx.user, ctx.session))
        async with self.r.key_lock(org, ns, key):
            answer = await self._rounds.submit(org, ns, write)
        self.r.publish_live(org, ns)
        return answer

    async def _set_round(self, org: str, ns: str, writes: builtins.list[_Setting]) -> builtins.list[mpb.SetMemoryResponse | LoomError]:
        """One round of memory.set (rows.WriteRounds): the writers' rows read at once, the values
        embedded in one model run, the rows stored in one insert per table."""
        # The values are embedded while the rows are read (a model run beside a store read): a
        # restated value's embedding is the one its row holds, the same text through the same model.
        owns, vecs = await asyncio.gather(
            self.mem.own_many((org, ns), [(w.req.memory_key, w.ident) for w in writes]),
            self.r.d.embedder.embed([excerpt(w.req.value) for w in writes]),
        )
        answers: builtins.list[mpb.SetMemoryResponse | LoomError | None] = [None] * len(writes)
        heads: builtins.list[MemoryRow | None] = [None] * len(writes)
        for i, (w, own) in enumerate(zip(writes, owns, strict=True)):
            live = heads[i] = own.head if own.head is not None and own.head.status == "active" else None
            if live is not None and live.pinned and live.value != w.req.value:
                answers[i] = Conflict(
                    ErrorCode.PINNED_CONFLICT,
                    "the writer's row is pinned; an admin unpins it with memory.unpin first",
                    {"memory_key": w.req.memory_key},
                )
        todo = [i for i, a in enumerate(answers) if a is None]
        # The same bytes reinforce the row.
        restated = {i for i in todo if (h := heads[i]) is not None and h.value == writes[i].req.value}
        row_writes = []
        for i in todo:
            w, live = writes[i], heads[i]
            changes: RowChanges = {
                "value": w.req.value,
                "memory_type": w.memory_type,
                "tags": list(dict.fromkeys(w.req.tags)),
                "files": w.files,
                "source_resource_id": w.req.source_resource_id,
                "source_class": w.req.source_class,
                "conflicts": [],
            }
            if i in restated and live is not None:
                changes["reinforcements"] = int(live.reinforcements) + 1
            row_writes.append(
                RowWrite(w.ctx, live, w.req.memory_key, w.ident, "memory.set", [float(x) for x in vecs[i]], owns[i].top, changes)
            )
        rows = await self.r.append_many(org, ns, row_writes)
        await asyncio.gather(
            *(
                self.r.store_chunks(org, ns, row)
                for i, row in zip(todo, rows, strict=True)
                if isinstance(row, MemoryRow) and i not in restated
            )
        )
        for i, row in zip(todo, rows, strict=True):
            answers[i] = (
                row
                if isinstance(row, LoomError)
                else mpb.SetMemoryResponse(
                    memory_key=row.key,
                    version=int(row.version),
                    memory_id=row.memory_id,
                    created=heads[i] is None,
                    restated=i in restated,
                    pinned=bool(row.pinned),
                    attestation=row.attestation,
                    value_hash=row.value_hash,
                    files=list(row.files),
                    reinforcements=int(row.reinforcements),
                )
            )
        return [a for a in answers if a is not None]

    # --- deletes and restore

    async def delete(self, ctx: CallContext, key: str, ident: Ident) -> mpb.DeleteMemoryResponse:
        org, ns = ctx.org, ctx.namespace
        await self.r.refuse_if_locked(org, ns, key)
        async with self.r.key_lock(org, ns, key):
            row = await self.r.live_head(org, ns, key, ident)
            tomb = await self.r.append(org, ns, ctx, row, key=key, ident=ident, op="memory.delete", status="tombstoned")
            retired = await self.r.retire_if_writer(org, ns, key, ident, row)
        self.r.publish_live(org, ns)
        return mpb.DeleteMemoryResponse(deleted=True, retired_record=retired, version=tomb.version)

    async def delete_version(self, ctx: CallContext, key: str, version: int, ident: Ident) -> mpb.DeleteMemoryResponse:
        org, ns = ctx.org, ctx.namespace
        if version <= 0:
            raise invalid_field("version", "must be a stored version (1 or more)")
        await self.r.refuse_if_locked(org, ns, key)
        async with self.r.key_lock(org, ns, key):
            versions = await self.mem.versions(org, ns, key, ident)
            target = next((v for v in versions if int(v.version) == version), None)
            if target is None or target.status != "active":
                raise NotFound(ErrorCode.RESOURCE_NOT_FOUND, "no such live version of this row", {"key": key, "version": version})
            head = versions[0]
            retired = False
            out_version = version
            if int(head.version) == version:
                # The live version goes: the row is tombstoned (and the writer's record retired).
                tomb = await self.r.append(org, ns, ctx, head, key=key, ident=ident, op="memory.delete_version", status="tombstoned")
                out_version = tomb.version
                retired = await self.r.retire_if_writer(org, ns, key, ident, head)
            await self.mem.delete_version(org, ns, key, ident, version, ch_time())
        self.r.publish_live(org, ns)
        return mpb.DeleteMemoryResponse(deleted=True, retired_record=retired, version=out_version)

    async def restore(self, ctx: CallContext, key: str, ident: Ident) -> MemoryRow:
        """Revive a deleted row with its last live value; a retired record stays retired."""
        org, ns = ctx.org, ctx.namespace
        async with self.r.key_lock(org, ns, key):
            versions = await self.mem.versions(org, ns, key, ident)
            if not versions:
                raise NotFound(ErrorCode.RESOURCE_NOT_FOUND, "no row under this key and identity", {"key": key})
            if versions[0].status == "active":
                raise Conflict(ErrorCode.PRECONDITION_FAILED, "the row is live; nothing to restore", {"key": key}, retry=False)
            last = next((v for v in versions if v.status == "active"), None)
            if last is None:
                raise NotFound(ErrorCode.RESOURCE_NOT_FOUND, "no live version left to restore", {"key": key})
            emb = await self.mem.embedding_of(org, ns, key, ident, int(last.version))
            row = await self.r.append(org, ns, ctx, last, key=key, ident=ident, op="memory.restore", embedding=emb, status="active")
        self.r.publish_live(org, ns)
        return row

    # --- move, clear, apply, dedup, auto-supersede

    async def move(self, ctx: CallContext, key: str, to_key: str, keep_redirect: bool, ident: Ident) -> mpb.MoveMemoryResponse:
        """Copy a row to `to_key` under the same identity. A moved decision row is no longer a
        decision there (its new key has no record). keep_redirect=true leaves the old row live,
        tagged moved-to:<to_key>, so a decision's record stays active; false deletes it through
        memory.delete, which retires the writer's record."""
        org, ns = ctx.org, ctx.namespace
        if not key or not to_key:
            raise invalid_field("memory_key" if not key else "to_key", "required")
        if key == to_key:
            raise Conflict(ErrorCode.PRECONDITION_FAILED, "the row is already under to_key", {"memory_key": key})
        await self.r.refuse_if_locked(org, ns, key)
        await self.r.refuse_if_locked(org, ns, to_key)
        row = await self.r.live_head(org, ns, key, ident)
        async with self.r.key_lock(org, ns, to_key):
            there = await self.mem.head(org, ns, to_key, ident)
            if there is not None and there.status == "active":
                raise Conflict(ErrorCode.PRECONDITION_FAILED, "the identity already has a live row under to_key", {"to_key": to_key})
            emb = await self.mem.embedding_of(org, ns, key, ident, int(row.version))
            tags = [t for t in row.tags if not t.startswith(("decision:", MOVED_TAG_PREFIX))]
            moved_type = "note" if row.memory_type == "decision" else row.memory_type
            new = await self.r.append(
                org,
                ns,
                ctx,
                None,
                key=to_key,
                ident=ident,
                op="memory.move",
                embedding=emb,
                memory_type=moved_type,
                tags=tags,
                value=row.value,
                files=row.files,
                source_resource_id=row.source_resource_id,
                source_class=row.source_class,
                pinned=row.pinned,
                attested_hash=row.attested_hash,
            )
            await self.r.store_chunks(org, ns, new)
        retired = False
        if keep_redirect:
            async with self.r.key_lock(org, ns, key):
                head = await self.r.live_head(org, ns, key, ident)
                await self.r.append(
                    org, ns, ctx, head, key=key, ident=ident, op="memory.move", tags=[*head.tags, MOVED_TAG_PREFIX + to_key]
                )
        else:
            retired = (await self.delete(ctx, key, ident)).retired_record
        self.r.publish_live(org, ns)
        return mpb.MoveMemoryResponse(
            memory_key=key,
            to_key=to_key,
            version=int(new.version),
            kept_redirect=keep_redirect,
            retired_record=retired,
        )

    async def clear(self, ctx: CallContext, prefix: str, memory_type: str) -> mpb.ClearMemoryResponse:
        """Tombstone the namespace's live rows (every identity's) without retiring a decision
        record: a cleared decision row leaves its record active. A locked key is left alone."""
        org, ns = ctx.org, ctx.namespace
        cleared = 0
        locked: builtins.list[str] = []
        while True:
            rows = await self.mem.live_heads(org, ns, memory_type=memory_type, prefix=prefix, limit=500)
            rows = [r for r in rows if r.key not in locked]
            if not rows:
                break
            for row in rows:
                key = row.key
                if await self.r.locked(org, ns, key):
                    locked.append(key)
                    continue
                async with self.r.key_lock(org, ns, key):
                    head = await self.mem.head(org, ns, key, row.ident)
                    if head is not None and head.status == "active":
                        await self.r.append(org, ns, ctx, head, key=key, ident=row.ident, op="memory.clear", status="tombstoned")
                        cleared += 1
        self.r.publish_live(org, ns)
        return mpb.ClearMemoryResponse(cleared=cleared, locked=sorted(set(locked)))

    async def apply(self, ctx: CallContext, actions: Sequence[mpb.MemoryAction]) -> builtins.list[mpb.ActionResult]:
        """Each action as its own op would do it, in order: set through memory.set, delete through
        memory.delete (retiring the writer's decision record). One failing does not stop the rest."""
        out: builtins.list[mpb.ActionResult] = []
        ident = Ident(ctx.agent_label, ctx.user, ctx.session)
        for a in actions:
            res = mpb.ActionResult(memory_key=a.memory_key, action=a.action, ok=False)
            try:
                if a.action == "set":
                    done = await self.set(
                        ctx,
                        mpb.SetMemoryRequest(memory_key=a.memory_key, value=a.value, memory_type=a.memory_type, tags=a.tags, files=a.files),
                    )
                    res.ok, res.version = True, done.version
                elif a.action == "delete":
                    deleted = await self.delete(ctx, a.memory_key, ident)
                    res.ok, res.version, res.retired_record = True, deleted.version, deleted.retired_record
                else:
                    raise invalid_field("action", "set or delete")
            except LoomError as exc:
                res.error_code, res.error = str(exc.code), exc.message
            out.append(res)
        return out

    async def dedup_resolve(self, ctx: CallContext, keep_key: str, drop_key: str, ident: Ident | None) -> mpb.DedupResolveResponse:
        """Tombstone the dropped side (retiring its writer's decision record, as a delete does)
        and clear the conflict mark on the kept side's live rows."""
        org, ns = ctx.org, ctx.namespace
        if keep_key == drop_key:
            raise Conflict(
                ErrorCode.PRECONDITION_FAILED, "a pair needs two keys: keep_key and drop_key are the same", {"keep_key": keep_key}
            )
        kept = [h for h in await self.mem.heads(org, ns, keep_key) if h.status == "active"]
        if not kept:
            raise NotFound(ErrorCode.RESOURCE_NOT_FOUND, "no live row under keep_key", {"keep_key": keep_key})
        if ident is None:
            live = [h for h in await self.mem.heads(org, ns, drop_key) if h.status == "active"]
            if not live:
                raise NotFound(ErrorCode.RESOURCE_NOT_FOUND, "no live row under drop_key", {"drop_key": drop_key})
            ident = live[0].ident
        await self.r.refuse_if_locked(org, ns, drop_key)
        async with self.r.key_lock(org, ns, drop_key):
            row = await self.r.live_head(org, ns, drop_key, ident)
            tomb = await self.r.append(org, ns, ctx, row, key=drop_key, ident=ident, op="memory.dedup_resolve", status="tombstoned")
            retired = await self.r.retire_if_writer(org, ns, drop_key, ident, row)
        async with self.r.key_lock(org, ns, keep_key):
            for h in kept:
                if drop_key in h.conflicts:
                    head = await self.r.live_head(org, ns, keep_key, h.ident)
                    conflicts = [c for c in head.conflicts if c != drop_key]
                    await self.r.append(org, ns, ctx, head, key=keep_key, ident=h.ident, op="memory.dedup_resolve", conflicts=conflicts)
        self.r.publish_live(org, ns)
        return mpb.DedupResolveResponse(kept=keep_key, dropped=drop_key, version=int(tomb.version), retired_record=retired)

    async def auto_supersede(self, ctx: CallContext, key: str, by_key: str) -> mpb.AutoSupersedeResponse:
        """The conflict resolver's retirement of one of a close decision pair: the key's writer
        row is tombstoned (op memory.auto_supersede, tagged superseded-by:<by_key>) and its
        record retired. Refused unless both are live decisions reading the same at or above
        LOOM_DECISION_CONFLICT_THRESHOLD. memory.restore revives the row."""
        org, ns = ctx.org, ctx.namespace
        if key == by_key:
            raise Conflict(ErrorCode.PRECONDITION_FAILED, "a pair needs two keys: memory_key and by_key are the same", {"memory_key": key})
        pair = []
        for k in (key, by_key):
            rec = await self.r.dec.current(org, ns, k)
            row = (
                None
                if rec is None or rec["status"] != "active"
                else await self.mem.head(org, ns, k, Ident(rec["agent"], rec["user"], rec["session"]))
            )
            if row is None or row.status != "active" or row.memory_type != "decision":
                raise NotFound(ErrorCode.RESOURCE_NOT_FOUND, "no active decision under this key", {"memory_key": k})
            pair.append(row)
        a = await self.mem.embedding_of(org, ns, key, pair[0].ident, int(pair[0].version))
        b = await self.mem.embedding_of(org, ns, by_key, pair[1].ident, int(pair[1].version))
        similarity = cosine(a, b)
        if similarity < self.r.d.settings.decision_conflict_threshold:
            raise Conflict(
                ErrorCode.PRECONDITION_FAILED,
                "the two decisions do not read alike enough to be one an update of the other",
                {"similarity": round(similarity, 4), "threshold": self.r.d.settings.decision_conflict_threshold},
            )
        ident = pair[0].ident
        await self.r.refuse_if_locked(org, ns, key)
        async with self.r.key_lock(org, ns, key):
            row = await self.r.live_head(org, ns, key, ident)
            tomb = await self.r.append(
                org,
                ns,
                ctx,
                row,
                key=key,
                ident=ident,
                op="memory.auto_supersede",
                status="tombstoned",
                tags=[*row.tags, SUPERSEDED_TAG_PREFIX + by_key],
            )
            retired = await self.r.retire_if_writer(org, ns, key, ident, row)
        self.r.publish_live(org, ns)
        return mpb.AutoSupersedeResponse(
            memory_key=key,
            by_key=by_key,
            version=int(tomb.version),
            retired_record=retired,
            similarity=round(similarity, 6),
        )

    # --- pin, attestation, revision by id

    async def set_pin(self, ctx: CallContext, key: str, ident: Ident, pinned: bool) -> MemoryRow:
        org, ns = ctx.org, ctx.namespace
        async with self.r.key_lock(org, ns, key):
            row = await self.r.live_head(org, ns, key, ident)
            return await self.r.append(
                org, ns, ctx, row, key=key, ident=ident, op="memory.pin" if pinned else "memory.unpin", pinned=pinned
            )

    async def verify(self, ctx: CallContext, key: str, ident: Ident) -> MemoryRow:
        org, ns = ctx.org, ctx.namespace
        async with self.r.key_lock(org, ns, key):
            row = await self.r.live_head(org, ns, key, ident)
            return await self.r.append(org, ns, ctx, row, key=key, ident=ident, op="memory.verify", attested_hash=row.value_hash)

    async def update_by_id(
        self, ctx: CallContext, memory_id: str, value: str | None, tags: builtins.list[str] | None, if_value_hash: str
    ) -> MemoryRow:
        """A full revision by memory_id: the value is embedded again when it changes; pin and
        attestation stay (a changed value reads its attestation stale)."""
        org, ns = ctx.org, ctx.namespace
        if not memory_id:
            raise invalid_field("memory_id", "required")
        found = await self.mem.by_id(org, ns, memory_id)
        if found is None or found.status != "active":
            raise NotFound(ErrorCode.RESOURCE_NOT_FOUND, "no live row with this memory_id", {"memory_id": memory_id})
        key, ident = found.key, found.ident
        if value is not None and value != found.value:
            await self.r.refuse_if_locked(org, ns, key)
        async with self.r.key_lock(org, ns, key):
            row = await self.r.live_head(org, ns, key, ident)
            if if_value_hash and row.value_hash != if_value_hash:
                raise Conflict(ErrorCode.PRECONDITION_FAILED, "the row's value changed since it was read", {"key": key}, retry=False)
            changes: RowChanges = {}
            emb = None
            if value is not None and value != row.value:
                changes["value"] = value
                emb = await self.r.d.embedder.embed_one(excerpt(value))
            if tags is not None:
                changes["tags"] = list(dict.fromkeys(tags))
            if row.memory_type == "decision":
                # A full revision meets the conflict check again: a close peer is marked, a stale mark cleared.
                vec = emb if emb is not None else await self.mem.embedding_of(org, ns, key, ident, int(row.version))
                (changes["conflicts"],) = await self.r.close_decisions(org, ns, [(key, vec)])
            out = await self.r.append(org, ns, ctx, row, key=key, ident=ident, op="memory.update_by_id", embedding=emb, **changes)
            await self.r.store_chunks(org, ns, out)
            return out

    # --- locks

    async def lock(self, ctx: CallContext, key: str, ttl_seconds: int) -> mpb.LockMemoryResponse:
        if not key:
            raise invalid_field("memory_key", "required")
        ttl = count_or_default("ttl_seconds", ttl_seconds, 300, self.r.d.settings.decision_lock_max_seconds)
        holder = LOCK_PREFIX + ctx.subject
        try:
            lease = await self.r.d.leases.acquire(lease_key(ctx.org, ctx.namespace, key), holder, float(ttl))
        except LeaseHeld as held:
            raise Conflict(
                ErrorCode.PRECONDITION_FAILED, "the key is held by another lock or write", {"key": key, "holder": held.holder}
            ) from None
        return mpb.LockMemoryResponse(key=key, locked=True, expires_time=_iso(lease.expires_at), holder=holder)

    async def unlock(self, ctx: CallContext, key: str) -> mpb.LockMemoryResponse:
        leases = self.r.d.leases
        lease = await leases.read(lease_key(ctx.org, ctx.namespace, key))
        if lease is None or lease.expired or not lease.holder.startswith(LOCK_PREFIX):
            return mpb.LockMemoryResponse(key=key, locked=False, expires_time="", holder="")
        if lease.holder != LOCK_PREFIX + ctx.subject and ctx.role < Role.ADMIN:
            raise Forbidden(ErrorCode.AUTH_INSUFFICIENT, "only the lock's holder or an admin releases it", {"key": key})
        await leases.release(lease)
        return mpb.LockMemoryResponse(key=key, locked=False, expires_time="", holder=lease.holder)


def _iso(t: float) -> str:
    return (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(seconds=t)).isoformat().replace("+00:00", "Z")

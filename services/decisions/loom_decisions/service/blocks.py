"""memory.for_file and context.pack: the blocks an agent reads before an edit and at the start
of a task. Both are key-returning reads: the keys they show are recorded as exposures under
the call's run, which decision.outcome credits when the decision says it used them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from loom_api.decisions.v1 import memory_pb2 as mpb
from loom_core.chain import CallContext
from loom_core.errors import invalid_field
from loom_core.store.base import parse_ch_time

from ..domain.blocks import FileRow, PackRow, for_file_block, for_file_rank, pack_block, tokens
from ..domain.files import file_matches
from ..domain.statement import CATEGORY_TAG_PREFIX, excerpt, stage_of
from ..store.memory import Ident, MemoryRow
from .rows import Rows, iso

PACK_CANDIDATES = 200
REPO_TAG_PREFIX = "repo:"


class BlockOps:
    def __init__(self, rows: Rows) -> None:
        self.r = rows
        self.mem = rows.mem
        self.dec = rows.dec

    async def _writer_rows_only(self, org: str, ns: str, rows: list[MemoryRow]) -> list[MemoryRow]:
        """Decision rows count while their key's active record is theirs; another identity's row
        under the key was superseded, and a retired record's row is no decision to heed."""
        recs = await self.dec.current_many(org, ns, [r.key for r in rows if r.memory_type == "decision"])
        out = []
        for r in rows:
            if r.memory_type == "decision":
                rec = recs.get(r.key)
                if rec is None or rec["status"] != "active" or Ident(rec["agent"], rec["user"], rec["session"]) != r.ident:
                    continue
            out.append(r)
        return out

    async def for_file(self, ctx: CallContext, path: str, repo: str, include_conflicted: bool, max_chars: int) -> mpb.MemoryForFileResponse:
        org, ns = ctx.org, ctx.namespace
        if not path.strip():
            raise invalid_field("path", "required")
        ceiling = max_chars or self.r.d.settings.memory_for_file_max_chars
        if ceiling < 200:
            raise invalid_field("max_chars", "at least 200")
        rows = [r for r in await self.mem.live_naming_files(org, ns) if any(file_matches(f, path) for f in r.files)]
        rows = [r for r in rows if _repo_ok(r.tags, repo) and (include_conflicted or not r.conflicts)]
        rows = await self._writer_rows_only(org, ns, rows)
        now = datetime.now(UTC)
        pairs = sorted(
            (
                (
                    FileRow(
                        key=r.key,
                        memory_type=r.memory_type,
                        value=r.value,
                        tags=tuple(r.tags),
                        pinned=bool(r.pinned),
                        actor=r.actor,
                        age_seconds=max(0.0, (now - parse_ch_time(str(r.ts))).total_seconds()),
                        conflicts=tuple(r.conflicts),
                    ),
                    r,
                )
                for r in rows
            ),
            key=lambda p: for_file_rank(p[0]),
        )
        block, shown = for_file_block(path, [fr for fr, _ in pairs], ceiling)
        entries = [
            mpb.ForFileEntry(
                memory_key=fr.key,
                memory_type=fr.memory_type,
                shown=how,
                value=fr.value if how == "whole" else "",
                pinned=fr.pinned,
                source_changed=fr.source_changed,
                constraint=fr.constraint,
                conflicts=list(fr.conflicts),
                agent_id=row.agent,
                actor=row.actor,
                updated_time=iso(str(row.ts)),
                version=int(row.version),
                files=list(row.files),
            )
            for (fr, row), how in zip(pairs, shown, strict=True)
        ]
        await self.r.exposed(ctx, [e.memory_key for e in entries])
        return mpb.MemoryForFileResponse(path=path, block=block, entries=entries)

    async def pack(self, ctx: CallContext, query: str, token_budget: int, category: str) -> mpb.ContextPackResponse:
        org, ns = ctx.org, ctx.namespace
        budget = token_budget or self.r.d.settings.context_pack_token_budget
        if budget < 50:
            raise invalid_field("token_budget", "at least 50")
        tags = [CATEGORY_TAG_PREFIX + category] if category else []
        if query.strip():
            vec = await self.r.d.embedder.embed_query(excerpt(query))
            # The vector cache for a large namespace (each hit checked against the store), else exact.
            hits = await self.r.vectors.nearest(org, ns, vec, memory_type="decision", tags=tags, limit=PACK_CANDIDATES)
            # Scores rounded so float noise between embedding batches cannot reorder a tie; the key breaks it.
            rows = [r for r, _ in sorted(hits, key=lambda rs: (-round(rs[1], 6), rs[0].key))]
        else:
            rows = await self.mem.live_heads(org, ns, memory_type="decision", tag=tags[0] if tags else "", limit=PACK_CANDIDATES)
            rows = sorted(rows, key=lambda r: (0 if "constraint" in r.tags else 1, 0 if r.pinned else 1, _neg_ts(r), r.key))
        rows = await self._writer_rows_only(org, ns, rows)
        recs = await self.dec.current_many(org, ns, [r.key for r in rows])
        decisions = []
        for r in rows:
            rec = recs[r.key]
            decisions.append(
                PackRow(
                    key=r.key,
                    scenario=rec["scenario"],
                    outcome=rec["outcome"],
                    reasoning=rec["reasoning"],
                    stage=stage_of(r.tags, rec["realized_outcome"]),
                    realized=rec["realized_outcome"],
                )
            )
        block, packed, omitted = pack_block(decisions, budget)
        await self.r.exposed(ctx, [d.key for d, _ in packed])
        return mpb.ContextPackResponse(
            block=block,
            tokens=tokens(block),
            token_budget=budget,
            decisions=[mpb.PackedDecision(memory_key=d.key, stage=d.stage, line=line, tokens=tokens(line)) for d, line in packed],
            omitted=omitted,
        )


def _repo_ok(tags: Sequence[str], repo: str) -> bool:
    """A row tagged for repositories is read by a session in one of them; an untagged row by every session."""
    repos = [t[len(REPO_TAG_PREFIX) :] for t in tags if t.startswith(REPO_TAG_PREFIX)]
    return not repos or repo in repos


def _neg_ts(row: MemoryRow) -> float:
    return -parse_ch_time(row.ts).timestamp()

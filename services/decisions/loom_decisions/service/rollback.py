"""namespace.rollback: every memory row of the namespace back to its state at an instant.

Per row (a key under one identity): created after the instant, it is tombstoned; live then and
deleted since, it is revived with its value then; live then and revised since, it is rewritten
with its value, tags and files then. Decision records are neither revived nor retired (spec 003,
Decisions: a rollback past a delete revives the row but not the record, and a rollback's
tombstone leaves the record active).
"""

from __future__ import annotations

from datetime import UTC, datetime
from itertools import groupby

from loom_api.decisions.v1 import memory_pb2 as mpb
from loom_core.chain import CallContext
from loom_core.errors import invalid_field
from loom_core.store import ch_time

from ..store.memory import MemoryRow
from .rows import RowChanges, Rows


def _restored(then: MemoryRow) -> RowChanges:
    """What a rollback writes back of a row's version then."""
    return {
        "value": then.value,
        "memory_type": then.memory_type,
        "tags": then.tags,
        "pinned": then.pinned,
        "attested_hash": then.attested_hash,
        "conflicts": then.conflicts,
        "files": then.files,
        "source_resource_id": then.source_resource_id,
        "source_class": then.source_class,
    }


def _instant(text: str) -> str:
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise invalid_field("to_time", "an ISO 8601 time, e.g. 2026-12-01T08:00:00Z") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return ch_time(dt)


class Rollback:
    def __init__(self, rows: Rows) -> None:
        self.r = rows
        self.mem = rows.mem

    async def run(self, ctx: CallContext, to_time: str, dry_run: bool) -> mpb.RollbackNamespaceResponse:
        org, ns = ctx.org, ctx.namespace
        at = _instant(to_time)
        counts = {"revived": 0, "reverted": 0, "tombstoned": 0}
        keys: list[str] = []
        versions = await self.mem.all_versions(org, ns)
        for (key, _a, _u, _s), group in groupby(versions, key=lambda v: (v.key, v.agent, v.user, v.session)):
            vs = list(group)
            head = vs[-1]
            then = next((v for v in reversed(vs) if v.ts <= at), None)
            live_now = head.status == "active"
            live_then = then is not None and then.status == "active"
            change: RowChanges
            if not live_then and live_now:
                change, kind = {"status": "tombstoned"}, "tombstoned"
            elif live_then and then is not None and not live_now:
                change, kind = {**_restored(then), "status": "active"}, "revived"
            elif (
                live_then
                and then is not None
                and (head.value_hash, head.tags, head.files, head.memory_type)
                != (
                    then.value_hash,
                    then.tags,
                    then.files,
                    then.memory_type,
                )
            ):
                change, kind = _restored(then), "reverted"
            else:
                continue
            counts[kind] += 1
            keys.append(key)
            if dry_run:
                continue
            ident = head.ident
            async with self.r.key_lock(org, ns, key):
                emb = None
                if then is not None and kind != "tombstoned":
                    emb = await self.mem.embedding_of(org, ns, key, ident, then.version)
                row = await self.r.append(org, ns, ctx, head, key=key, ident=ident, op="namespace.rollback", embedding=emb, **change)
                if kind != "tombstoned":
                    await self.r.store_chunks(org, ns, row)
        if not dry_run:
            self.r.publish_live(org, ns)
        return mpb.RollbackNamespaceResponse(**counts, keys=sorted(set(keys)), dry_run=dry_run)

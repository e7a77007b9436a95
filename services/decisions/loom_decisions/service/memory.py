"""The memory.* use cases: reads that return keys (and record exposures), pins, attestation,
locks, deletes that retire a decision record, restores that do not revive it."""

from __future__ import annotations

import builtins
from datetime import UTC, datetime, timedelta
from typing import Any

from loom_core.bus.leases import LeaseHeld
from loom_core.chain import CallContext
from loom_core.errors import Conflict, ErrorCode, Forbidden, NotFound, invalid_field
from loom_core.ranking import named_identifiers
from loom_core.roles import Role
from loom_core.store import ch_time

from ..domain.ranking import fuse
from ..domain.statement import excerpt
from ..store.memory import Ident, ident_of
from .rows import LOCK_PREFIX, Rows, attestation, lease_key


class MemoryOps:
    def __init__(self, rows: Rows) -> None:
        self.r = rows
        self.mem = rows.mem

    # --- reads

    async def get(self, ctx: CallContext, key: str, agent_id: str = "", user_id: str = "", session_id: str = "") -> dict[str, Any]:
        if not key:
            raise invalid_field("key", "required")
        heads = await self.mem.heads(ctx.org, ctx.namespace, key)
        live = [
            h
            for h in heads
            if h["status"] == "active"
            and (not agent_id or h["agent"] == agent_id)
            and (not user_id or h["user"] == user_id)
            and (not session_id or h["session"] == session_id)
        ]
        if not live:
            raise NotFound(ErrorCode.RESOURCE_NOT_FOUND, "no live row under this key", {"key": key})
        row = await self.decorate(ctx, live[0])
        await self.r.exposed(ctx, [key])
        return row

    async def decorate(self, ctx: CallContext, row: dict[str, Any]) -> dict[str, Any]:
        credits, charges = await self.mem.feedback(ctx.org, ctx.namespace, row["key"])
        return {
            **row,
            "attestation": attestation(row),
            "locked": await self.r.locked(ctx.org, ctx.namespace, row["key"]),
            "credits": credits,
            "charges": charges,
        }

    async def list(self, ctx: CallContext, memory_type: str, tag: str, prefix: str, limit: int) -> builtins.list[dict[str, Any]]:
        limit = _bounded("limit", limit, 100, 500)
        rows = await self.mem.live_heads(ctx.org, ctx.namespace, memory_type=memory_type, tag=tag, prefix=prefix, limit=limit)
        await self.r.exposed(ctx, [r["key"] for r in rows])
        return [{**r, "attestation": attestation(r)} for r in rows]

    async def search(
        self, ctx: CallContext, query: str, memory_type: str, tag: str, limit: int
    ) -> tuple[builtins.list[tuple[dict[str, Any], float]], bool]:
        """Hybrid (domain/ranking.py): the rows, best first, with their fused scores; and whether
        the result is weak."""
        if not query.strip():
            raise invalid_field("query", "required")
        limit = _bounded("limit", limit, 10, 50)
        vec = await self.r.d.embedder.embed_one(excerpt(query))
        tags = [tag] if tag else []
        hits = await self.r.vectors.nearest(ctx.org, ctx.namespace, vec, memory_type=memory_type, tags=tags, limit=max(limit * 5, 50))
        names = named_identifiers(query)
        if names:
            hits += await self.mem.naming(ctx.org, ctx.namespace, names, vec, memory_type=memory_type, tags=tags)
        ranked, weak = fuse(query, hits, limit)
        await self.r.exposed(ctx, [row["key"] for row, _ in ranked])
        return ranked, weak

    async def history(
        self, ctx: CallContext, key: str, agent_id: str, user_id: str, session_id: str
    ) -> tuple[builtins.list[dict[str, Any]], builtins.list[dict[str, Any]]]:
        versions = await self.mem.versions(ctx.org, ctx.namespace, key)
        versions = [
            v
            for v in versions
            if (not agent_id or v["agent"] == agent_id)
            and (not user_id or v["user"] == user_id)
            and (not session_id or v["session"] == session_id)
        ]
        records = await self.r.dec.history(ctx.org, ctx.namespace, key)
        if not versions and not records:
            raise NotFound(ErrorCode.RESOURCE_NOT_FOUND, "nothing was ever stored under this key", {"key": key})
        return [{**v, "attestation": attestation(v)} for v in versions], records

    # --- deletes and restore

    async def delete(self, ctx: CallContext, key: str, ident: Ident) -> dict[str, Any]:
        org, ns = ctx.org, ctx.namespace
        await self.r.refuse_if_locked(org, ns, key)
        async with self.r.key_lock(org, ns, key):
            row = await self.r.live_head(org, ns, key, ident)
            tomb = await self.r.append(org, ns, ctx, row, key=key, ident=ident, op="memory.delete", status="tombstoned")
            retired = await self.r.retire_if_writer(org, ns, key, ident, row)
        await self.r.publish_live(org, ns)
        return {"deleted": True, "retired_record": retired, "version": tomb["version"]}

    async def delete_version(self, ctx: CallContext, key: str, version: int, ident: Ident) -> dict[str, Any]:
        org, ns = ctx.org, ctx.namespace
        if version <= 0:
            raise invalid_field("version", "must be a stored version (1 or more)")
        await self.r.refuse_if_locked(org, ns, key)
        async with self.r.key_lock(org, ns, key):
            versions = await self.mem.versions(org, ns, key, ident)
            target = next((v for v in versions if int(v["version"]) == version), None)
            if target is None or target["status"] != "active":
                raise NotFound(ErrorCode.RESOURCE_NOT_FOUND, "no such live version of this row", {"key": key, "version": version})
            head = versions[0]
            retired = False
            out_version = version
            if int(head["version"]) == version:
                # The live version goes: the row is tombstoned (and the writer's record retired).
                tomb = await self.r.append(org, ns, ctx, head, key=key, ident=ident, op="memory.delete_version", status="tombstoned")
                out_version = tomb["version"]
                retired = await self.r.retire_if_writer(org, ns, key, ident, head)
            await self.mem.delete_version(org, ns, key, ident, version, ch_time())
        await self.r.publish_live(org, ns)
        return {"deleted": True, "retired_record": retired, "version": out_version}

    async def restore(self, ctx: CallContext, key: str, ident: Ident) -> dict[str, Any]:
        """Revive a deleted row with its last live value; a retired record stays retired."""
        org, ns = ctx.org, ctx.namespace
        async with self.r.key_lock(org, ns, key):
            versions = await self.mem.versions(org, ns, key, ident)
            if not versions:
                raise NotFound(ErrorCode.RESOURCE_NOT_FOUND, "no row under this key and identity", {"key": key})
            if versions[0]["status"] == "active":
                raise Conflict(ErrorCode.PRECONDITION_FAILED, "the row is live; nothing to restore", {"key": key})
            last = next((v for v in versions if v["status"] == "active"), None)
            if last is None:
                raise NotFound(ErrorCode.RESOURCE_NOT_FOUND, "no live version left to restore", {"key": key})
            emb = await self.mem.embedding_of(org, ns, key, ident, int(last["version"]))
            row = await self.r.append(org, ns, ctx, last, key=key, ident=ident, op="memory.restore", embedding=emb, status="active")
        await self.r.publish_live(org, ns)
        return row

    # --- pin, attestation, revision by id

    async def set_pin(self, ctx: CallContext, key: str, ident: Ident, pinned: bool) -> dict[str, Any]:
        org, ns = ctx.org, ctx.namespace
        async with self.r.key_lock(org, ns, key):
            row = await self.r.live_head(org, ns, key, ident)
            return await self.r.append(
                org, ns, ctx, row, key=key, ident=ident, op="memory.pin" if pinned else "memory.unpin", pinned=int(pinned)
            )

    async def verify(self, ctx: CallContext, key: str, ident: Ident) -> dict[str, Any]:
        org, ns = ctx.org, ctx.namespace
        async with self.r.key_lock(org, ns, key):
            row = await self.r.live_head(org, ns, key, ident)
            return await self.r.append(org, ns, ctx, row, key=key, ident=ident, op="memory.verify", attested_hash=row["value_hash"])

    async def update_by_id(
        self, ctx: CallContext, memory_id: str, value: str | None, tags: builtins.list[str] | None, if_value_hash: str
    ) -> dict[str, Any]:
        """A full revision by memory_id: the value is embedded again when it changes; pin and
        attestation stay (a changed value reads its attestation stale)."""
        org, ns = ctx.org, ctx.namespace
        if not memory_id:
            raise invalid_field("memory_id", "required")
        found = await self.mem.by_id(org, ns, memory_id)
        if found is None or found["status"] != "active":
            raise NotFound(ErrorCode.RESOURCE_NOT_FOUND, "no live row with this memory_id", {"memory_id": memory_id})
        key, ident = found["key"], ident_of(found)
        if value is not None and value != found["value"]:
            await self.r.refuse_if_locked(org, ns, key)
        async with self.r.key_lock(org, ns, key):
            row = await self.r.live_head(org, ns, key, ident)
            if if_value_hash and row["value_hash"] != if_value_hash:
                raise Conflict(ErrorCode.PRECONDITION_FAILED, "the row's value changed since it was read", {"key": key})
            changes: dict[str, Any] = {}
            emb = None
            if value is not None and value != row["value"]:
                changes["value"] = value
                emb = await self.r.d.embedder.embed_one(excerpt(value))
            if tags is not None:
                changes["tags"] = list(dict.fromkeys(tags))
            if row["memory_type"] == "decision":
                # A full revision meets the conflict check again: a close peer is marked, a stale mark cleared.
                vec = emb if emb is not None else await self.mem.embedding_of(org, ns, key, ident, int(row["version"]))
                changes["conflicts"] = await self.r.close_decisions(org, ns, key, vec)
            return await self.r.append(org, ns, ctx, row, key=key, ident=ident, op="memory.update_by_id", embedding=emb, **changes)

    # --- locks

    async def lock(self, ctx: CallContext, key: str, ttl_seconds: int) -> dict[str, Any]:
        if not key:
            raise invalid_field("key", "required")
        ttl = _bounded("ttl_seconds", ttl_seconds, 300, self.r.d.settings.decision_lock_max_seconds)
        holder = LOCK_PREFIX + ctx.subject
        try:
            lease = await self.r.d.leases.acquire(lease_key(ctx.org, ctx.namespace, key), holder, float(ttl))
        except LeaseHeld as held:
            raise Conflict(
                ErrorCode.PRECONDITION_FAILED, "the key is held by another lock or write", {"key": key, "holder": held.holder}
            ) from None
        return {"key": key, "locked": True, "expires_time": _iso(lease.expires_at), "holder": holder}

    async def unlock(self, ctx: CallContext, key: str) -> dict[str, Any]:
        leases = self.r.d.leases
        lease = await leases.read(lease_key(ctx.org, ctx.namespace, key))
        if lease is None or lease.expired or not lease.holder.startswith(LOCK_PREFIX):
            return {"key": key, "locked": False, "expires_time": "", "holder": ""}
        if lease.holder != LOCK_PREFIX + ctx.subject and ctx.role < Role.ADMIN:
            raise Forbidden(ErrorCode.AUTH_INSUFFICIENT, "only the lock's holder or an admin releases it", {"key": key})
        await leases.release(lease)
        return {"key": key, "locked": False, "expires_time": "", "holder": lease.holder}


def _bounded(name: str, value: int, default: int, most: int) -> int:
    if value == 0:
        return default
    if value < 1 or value > most:
        raise invalid_field(name, f"must be between 1 and {most}")
    return value


def _iso(t: float) -> str:
    return (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(seconds=t)).isoformat().replace("+00:00", "Z")

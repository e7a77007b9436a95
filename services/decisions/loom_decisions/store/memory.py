"""Memory rows: append-only versions per (key, agent, user, session); the newest version of an
identity that memory.delete_version has not removed is the row."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypedDict

import numpy as np
import orjson
from loom_core.batching import Coalescer
from loom_core.exposures import count_live_rows
from loom_core.store import Store, query_as
from loom_core.store.batched import BatchedInserts
from loom_core.store.where import Where

from ..domain.ranking import Searched

ROWS = "{db}.memory_rows"
VECTORS = "{db}.memory_vectors"
DELETES = "{db}.memory_version_deletes"
CHUNKS = "{db}.memory_chunks"

_COLS = (
    "key, agent, user, session, memory_id, version, value, value_hash, memory_type, tags, pinned, attested_hash, status, "
    "conflicts, reinforcements, files, source_resource_id, source_class, op, actor, run_id, toString(ts) AS ts"
)


@dataclass(frozen=True, slots=True)
class Ident:
    """A row's writer identity under its key."""

    agent: str
    user: str
    session: str


class NearRow(TypedDict):
    """A row version near a query vector: its key, identity and version; `d` its cosine distance."""

    key: str
    agent: str
    user: str
    session: str
    version: int
    d: float


class ChunkHit(TypedDict):
    """A row's nearest chunk: the row's key and identity, the value hash its chunks are filed
    under; `d` the chunk's cosine distance."""

    key: str
    agent: str
    user: str
    session: str
    value_hash: str
    d: float


class FeedbackRow(TypedDict):
    """A memory_feedback row: the figure (+1 credit, -1 charge, 0 undone) `decision_key`'s outcome gave `key`."""

    org: str
    namespace: str
    key: str
    decision_key: str
    run_id: str
    delta: int
    ts: str


def ident_of(row: Mapping[str, Any]) -> Ident:
    """The identity of a row read as columns (a candidate, a chunk hit)."""
    return Ident(str(row["agent"]), str(row["user"]), str(row["session"]))


class RowView(Searched, Protocol):
    """What a search hit's readers read of a row: a MemoryRow, or the vector cache's entry of a
    decision row (service/vector_index.py), which holds no more than this."""

    @property
    def tags(self) -> Collection[str]: ...
    @property
    def conflicts(self) -> Sequence[str]: ...


@dataclass(frozen=True, slots=True)
class MemoryRow:
    """One version of a memory row: memory_rows' columns, typed once as the store reads them
    (the store's JSON quotes 64-bit integers; UInt8 flags arrive as numbers)."""

    key: str
    agent: str
    user: str
    session: str
    memory_id: str
    version: int
    value: str
    value_hash: str
    memory_type: str
    tags: tuple[str, ...]
    pinned: bool
    attested_hash: str
    status: str
    conflicts: tuple[str, ...]
    reinforcements: int
    files: tuple[str, ...]
    source_resource_id: str
    source_class: str
    op: str
    actor: str
    run_id: str
    ts: str

    @classmethod
    def of(cls, r: Mapping[str, Any]) -> MemoryRow:
        """A row from the result columns of `_COLS`. Positional, in the fields' order: a frozen
        dataclass's keyword construction costs half again as much CPU per row."""
        return cls(
            r["key"],
            r["agent"],
            r["user"],
            r["session"],
            r["memory_id"],
            int(r["version"]),
            r["value"],
            r["value_hash"],
            r["memory_type"],
            tuple(r["tags"]),
            bool(int(r["pinned"])),
            r["attested_hash"],
            r["status"],
            tuple(r["conflicts"]),
            int(r["reinforcements"]),
            tuple(r["files"]),
            r["source_resource_id"],
            r["source_class"],
            r["op"],
            r["actor"],
            r["run_id"],
            str(r["ts"]),
        )

    @property
    def ident(self) -> Ident:
        return Ident(self.agent, self.user, self.session)

    @property
    def live(self) -> bool:
        return self.status == "active"

    @property
    def attestation(self) -> str:
        """none (never attested), current (attested this value) or stale (an earlier one)."""
        if not self.attested_hash:
            return "none"
        return "current" if self.attested_hash == self.value_hash else "stale"

    def columns(self, org: str, ns: str, embedding: Sequence[float]) -> dict[str, object]:
        """The row as memory_rows' insert takes it."""
        return {
            "org": org,
            "namespace": ns,
            "key": self.key,
            "agent": self.agent,
            "user": self.user,
            "session": self.session,
            "memory_id": self.memory_id,
            "version": self.version,
            "value": self.value,
            "value_hash": self.value_hash,
            "memory_type": self.memory_type,
            "tags": list(self.tags),
            "pinned": int(self.pinned),
            "attested_hash": self.attested_hash,
            "status": self.status,
            "conflicts": list(self.conflicts),
            "reinforcements": self.reinforcements,
            "files": list(self.files),
            "source_resource_id": self.source_resource_id,
            "source_class": self.source_class,
            "op": self.op,
            "actor": self.actor,
            "run_id": self.run_id,
            "ts": self.ts,
            "embedding": list(embedding),
        }


def float32_text(vectors: Sequence[Sequence[float]]) -> str:
    """Vectors as an array literal of their float32 values, each in the shortest text that reads
    back as the same float32 (a bound parameter is text: ClickHouse parses it as the column type)."""
    return orjson.dumps(np.asarray(vectors, dtype=np.float32), option=orjson.OPT_SERIALIZE_NUMPY).decode()


def _rows(found: Sequence[Mapping[str, Any]]) -> list[MemoryRow]:
    return [MemoryRow.of(r) for r in found]


def _not_deleted() -> str:
    return (
        "(agent, user, session, version) NOT IN (SELECT agent, user, session, version FROM {db}.memory_version_deletes "
        "WHERE org = {org:String} AND namespace = {ns:String} AND key = {key:String})"
    )


@dataclass(frozen=True, slots=True)
class Own:
    """One identity's row under a key as a write reads it: its head (the newest version not
    removed; None when it has none) and `top`, the highest version it ever wrote, removed ones
    too (a new version is numbered past it)."""

    head: MemoryRow | None
    top: int


def _surviving(org: str, ns: str, key: str, ident: Ident | None) -> Where:
    """The surviving versions under `key` (of one identity, when named)."""
    where = Where("org = {org:String}", "namespace = {ns:String}", "key = {key:String}", _not_deleted(), org=org, ns=ns, key=key)
    if ident is not None:
        where.add(
            "agent = {agent:String} AND user = {user:String} AND session = {session:String}",
            agent=ident.agent,
            user=ident.user,
            session=ident.session,
        )
    return where


def _narrowed(where: Where, memory_type: str, tags: Sequence[str]) -> Where:
    """A search's optional filters added: the memory type, and every tag it must carry."""
    if memory_type:
        where.add("memory_type = {mt:String}", mt=memory_type)
    for i, t in enumerate(tags):
        where.add(f"has(tags, {{t{i}:String}})", **{f"t{i}": t})
    return where


class MemoryStore:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.inserts = BatchedInserts(store)
        self._counts: dict[tuple[str, str], tuple[float, int]] = {}
        self._counting: dict[tuple[str, str], asyncio.Task[int]] = {}
        self._owns: Coalescer[tuple[str, str], tuple[str, Ident], Own] = Coalescer(self.own_many)
        self._nearest_decisions: Coalescer[tuple[str, str, int], list[float], list[tuple[str, float]]] = Coalescer(
            self.nearest_decisions_exact_many, max_size=64
        )

    async def heads(self, org: str, ns: str, key: str, ident: Ident | None = None) -> list[MemoryRow]:
        """The newest surviving version of each identity under `key` (or of one identity)."""
        where = _surviving(org, ns, key, ident)
        sql = f"SELECT {_COLS} FROM {ROWS} WHERE {where} ORDER BY version DESC LIMIT 1 BY agent, user, session"
        rows = _rows(await self.store.query(sql, where.bind()))
        return sorted(rows, key=lambda r: r.ts, reverse=True)

    async def head(self, org: str, ns: str, key: str, ident: Ident) -> MemoryRow | None:
        return (await self.own(org, ns, key, ident)).head

    async def own(self, org: str, ns: str, key: str, ident: Ident) -> Own:
        """The identity's head and top version under `key`: one query for the calls that arrive
        together (per namespace)."""
        return await self._owns.submit((org, ns), (key, ident))

    async def own_many(self, where: tuple[str, str], asks: list[tuple[str, Ident]]) -> list[Own]:
        """`own` of each (key, identity) of the namespace `where` (org, namespace), in one query."""
        org, ns = where
        keys = sorted({key for key, _ in asks})
        # Per identity, its newest removed and newest surviving version: the head is the latter,
        # the top the higher of the two.
        rows = await self.store.query(
            f"SELECT {_COLS}, (key, agent, user, session, version) IN (SELECT key, agent, user, session, version FROM {DELETES} "
            "WHERE org = {org:String} AND namespace = {ns:String} AND key IN {keys:Array(String)}) AS removed "
            f"FROM {ROWS} WHERE org = {{org:String}} AND namespace = {{ns:String}} AND key IN {{keys:Array(String)}} "
            "ORDER BY version DESC LIMIT 1 BY key, agent, user, session, removed",
            {"org": org, "ns": ns, "keys": keys},
        )
        heads: dict[tuple[str, Ident], MemoryRow] = {}
        tops: dict[tuple[str, Ident], int] = {}
        for r in rows:
            at = (str(r["key"]), ident_of(r))
            tops[at] = max(tops.get(at, 0), int(r["version"]))
            if not int(r["removed"]):
                heads[at] = MemoryRow.of(r)
        return [Own(heads.get(ask), tops.get(ask, 0)) for ask in asks]

    async def versions(self, org: str, ns: str, key: str, ident: Ident | None = None) -> list[MemoryRow]:
        where = _surviving(org, ns, key, ident)
        return _rows(await self.store.query(f"SELECT {_COLS} FROM {ROWS} WHERE {where} ORDER BY ts DESC, version DESC", where.bind()))

    async def max_version(self, org: str, ns: str, key: str, ident: Ident) -> int:
        rows = await self.store.query(
            f"SELECT max(version) AS v FROM {ROWS} WHERE org = {{org:String}} AND namespace = {{ns:String}} AND key = {{key:String}} "
            "AND agent = {agent:String} AND user = {user:String} AND session = {session:String}",
            {"org": org, "ns": ns, "key": key, "agent": ident.agent, "user": ident.user, "session": ident.session},
        )
        return int(rows[0]["v"]) if rows else 0

    async def by_id(self, org: str, ns: str, memory_id: str) -> MemoryRow | None:
        rows = await self.store.query(
            f"SELECT key, agent, user, session FROM {ROWS} WHERE org = {{org:String}} AND namespace = {{ns:String}} "
            "AND memory_id = {id:String} LIMIT 1",
            {"org": org, "ns": ns, "id": memory_id},
        )
        if not rows:
            return None
        return await self.head(org, ns, rows[0]["key"], ident_of(rows[0]))

    async def embedding_of(self, org: str, ns: str, key: str, ident: Ident, version: int) -> list[float]:
        rows = await self.store.query(
            f"SELECT embedding FROM {ROWS} WHERE org = {{org:String}} AND namespace = {{ns:String}} AND key = {{key:String}} "
            "AND agent = {agent:String} AND user = {user:String} AND session = {session:String} AND version = {v:UInt64} LIMIT 1",
            {"org": org, "ns": ns, "key": key, "agent": ident.agent, "user": ident.user, "session": ident.session, "v": version},
        )
        return [float(x) for x in rows[0]["embedding"]] if rows else []

    async def append(self, org: str, ns: str, rows: Sequence[tuple[MemoryRow, Sequence[float]]]) -> None:
        """New row versions with their embeddings, in one insert into memory_rows; the view
        memory_vectors_of_rows copies them into memory_vectors in the same statement."""
        await self.inserts.insert(ROWS, [row.columns(org, ns, embedding) for row, embedding in rows])

    async def delete_version(self, org: str, ns: str, key: str, ident: Ident, version: int, ts: str) -> None:
        await self.inserts.insert(
            DELETES,
            [
                {
                    "org": org,
                    "namespace": ns,
                    "key": key,
                    "agent": ident.agent,
                    "user": ident.user,
                    "session": ident.session,
                    "version": version,
                    "ts": ts,
                }
            ],
        )

    async def live_heads(
        self, org: str, ns: str, *, memory_type: str = "", tag: str = "", prefix: str = "", limit: int = 100
    ) -> list[MemoryRow]:
        where = _narrowed(
            Where("org = {org:String}", "namespace = {ns:String}", "live = 1", org=org, ns=ns), memory_type, [tag] if tag else []
        )
        if prefix:
            where.add("startsWith(key, {prefix:String})", prefix=prefix)
        heads = await self.store.query(
            f"SELECT key, agent, user, session, version FROM {VECTORS} FINAL WHERE {where} ORDER BY key LIMIT {{limit:UInt64}}",
            where.bind(limit=limit),
        )
        return await self.rows_at(org, ns, heads)

    async def all_versions(self, org: str, ns: str) -> list[MemoryRow]:
        """Every surviving version of every row of the namespace, oldest first per identity."""
        return _rows(
            await self.store.query(
                f"SELECT {_COLS} FROM {ROWS} WHERE org = {{org:String}} AND namespace = {{ns:String}} "
                f"AND (key, agent, user, session, version) NOT IN (SELECT key, agent, user, session, version FROM {DELETES} "
                "WHERE org = {org:String} AND namespace = {ns:String}) ORDER BY key, agent, user, session, version",
                {"org": org, "ns": ns},
            )
        )

    async def live_naming_files(self, org: str, ns: str) -> list[MemoryRow]:
        """Every live row of the namespace whose newest surviving version names files."""
        inner = (
            f"SELECT {_COLS} FROM {ROWS} WHERE org = {{org:String}} AND namespace = {{ns:String}} "
            f"AND (key, agent, user, session, version) NOT IN (SELECT key, agent, user, session, version FROM {DELETES} "
            "WHERE org = {org:String} AND namespace = {ns:String}) "
            "ORDER BY version DESC LIMIT 1 BY key, agent, user, session"
        )
        return _rows(
            await self.store.query(
                f"SELECT * FROM ({inner}) WHERE status = 'active' AND notEmpty(files) ORDER BY key, agent, user, session",
                {"org": org, "ns": ns},
            )
        )

    async def rows_at(self, org: str, ns: str, heads: Sequence[Mapping[str, Any]]) -> list[MemoryRow]:
        """The rows at the (key, identity, version) heads given, in their order."""
        if not heads:
            return []
        keys = sorted({h["key"] for h in heads})
        rows = await self.store.query(
            f"SELECT {_COLS} FROM {ROWS} WHERE org = {{org:String}} AND namespace = {{ns:String}} AND key IN {{keys:Array(String)}}",
            {"org": org, "ns": ns, "keys": keys},
        )
        by = {(r["key"], r["agent"], r["user"], r["session"], int(r["version"])): r for r in rows}
        return [
            MemoryRow.of(r) for h in heads if (r := by.get((h["key"], h["agent"], h["user"], h["session"], int(h["version"])))) is not None
        ]

    async def search(
        self,
        org: str,
        ns: str,
        vector: Sequence[float],
        *,
        memory_type: str = "",
        tags: Sequence[str] = (),
        limit: int = 10,
    ) -> list[tuple[MemoryRow, float]]:
        """Live rows nearest `vector` by exact cosine, with their similarity (1 - cosineDistance).

        The primary key narrows the scan to the namespace. Candidates that are not their row's
        newest version (memory_vectors holds each version until a merge) are dropped and four
        times as many asked for, until `limit` are found or the candidates run out. A namespace
        large enough to need an ANN search is searched through the process's vector cache
        (service/vector_index.py), which falls back to this while it warms."""
        where = _narrowed(Where("org = {org:String}", "namespace = {ns:String}", "live = 1", org=org, ns=ns), memory_type, tags)
        params = where.bind(q=[float(x) for x in vector])
        sql = (
            f"SELECT key, agent, user, session, version, cosineDistance(embedding, {{q:Array(Float32)}}) AS d "
            f"FROM {VECTORS} WHERE {where} ORDER BY d ASC LIMIT {{limit:UInt64}}"
        )
        fetch = limit
        while True:
            params["limit"] = fetch
            cands = await query_as(self.store, NearRow, sql, params)
            heads = await self._current_of(org, ns, cands)
            if len(heads) >= limit or len(cands) < fetch:
                break
            fetch *= 4
        return await self._with_rows(org, ns, heads[:limit])

    async def nearest_decisions_exact(self, org: str, ns: str, vector: Sequence[float], limit: int) -> list[tuple[str, float]]:
        """The keys of the live decision rows nearest `vector` by exact cosine, with their
        similarity: what `search(memory_type="decision")` answers, for the calls that arrive
        together in one scan of the namespace."""
        return await self._nearest_decisions.submit((org, ns, limit), [float(x) for x in vector])

    async def nearest_decisions_exact_many(self, where: tuple[str, str, int], vectors: list[list[float]]) -> list[list[tuple[str, float]]]:
        """`nearest_decisions_exact` of each vector, in the namespace `where` (org, namespace, limit): one scan."""
        org, ns, limit = where
        # FINAL keeps each row's newest version before the filters apply (they name no sorting
        # key column, so they are not moved ahead of it): one statement, no read of the
        # candidates' newest versions after it. The vectors are bound once (WITH) and as their
        # float32 text (orjson's shortest form, the same Float32 values): a round's 29 vectors
        # took 8-10 ms to write as float64 reprs and the scan ~30% more CPU to parse them twice.
        found = await self.store.query(
            "WITH {qs:Array(Array(Float32))} AS qs SELECT qi, key, cosineDistance(embedding, q) AS d "
            f"FROM {VECTORS} FINAL ARRAY JOIN qs AS q, arrayEnumerate(qs) AS qi "
            "WHERE org = {org:String} AND namespace = {ns:String} AND live = 1 AND memory_type = 'decision' "
            "ORDER BY qi, d ASC LIMIT {limit:UInt64} BY qi",
            {"org": org, "ns": ns, "qs": float32_text(vectors), "limit": limit},
        )
        out: list[list[tuple[str, float]]] = [[] for _ in vectors]
        for r in found:
            out[int(r["qi"]) - 1].append((str(r["key"]), 1.0 - float(r["d"])))
        return out

    async def naming(
        self,
        org: str,
        ns: str,
        names: Sequence[str],
        vector: Sequence[float],
        *,
        memory_type: str = "",
        tags: Sequence[str] = (),
        limit: int = 50,
    ) -> list[tuple[MemoryRow, float]]:
        """Live rows whose value contains one of `names` (case-insensitive), nearest `vector` first,
        with their similarity: the rows a search for a name must not miss, however far."""
        where = Where(
            "org = {org:String}",
            "namespace = {ns:String}",
            "status = 'active'",
            "multiSearchAnyCaseInsensitive(value, {names:Array(String)})",
            org=org,
            ns=ns,
            names=list(names),
        )
        _narrowed(where, memory_type, tags)
        cands = await self.store.query(
            f"SELECT key, agent, user, session, version, cosineDistance(embedding, {{q:Array(Float32)}}) AS d FROM {ROWS} "
            f"WHERE {where} ORDER BY d ASC LIMIT {{limit:UInt64}}",
            where.bind(q=[float(x) for x in vector], limit=limit),
        )
        return await self.served(org, ns, cands)

    async def served(self, org: str, ns: str, candidates: Sequence[Mapping[str, Any]]) -> list[tuple[MemoryRow, float]]:
        """Candidates found elsewhere (a vector cache: key, identity, version, cosine distance d),
        kept only while each is its row's newest version, as rows with their similarity. One read:
        the candidates' keys' versions, the newest of each identity among them."""
        if not candidates:
            return []
        rows = await self.store.query(
            f"SELECT {_COLS} FROM {ROWS} WHERE org = {{org:String}} AND namespace = {{ns:String}} AND key IN {{keys:Array(String)}}",
            {"org": org, "ns": ns, "keys": sorted({c["key"] for c in candidates})},
        )
        newest: dict[tuple[str, str, str, str], Mapping[str, Any]] = {}
        for r in rows:
            ident = (r["key"], r["agent"], r["user"], r["session"])
            if ident not in newest or int(r["version"]) > int(newest[ident]["version"]):
                newest[ident] = r
        out: list[tuple[MemoryRow, float]] = []
        seen: set[tuple[str, str, str, str]] = set()
        for c in candidates:
            ident = (c["key"], c["agent"], c["user"], c["session"])
            found = newest.get(ident)
            row = MemoryRow.of(found) if found is not None and int(found["version"]) == int(c["version"]) else None
            if row is not None and ident not in seen:
                seen.add(ident)
                out.append((row, 1.0 - float(c["d"])))
        return out

    async def _with_rows(self, org: str, ns: str, heads: Sequence[Mapping[str, Any]]) -> list[tuple[MemoryRow, float]]:
        rows = await self.rows_at(org, ns, heads)
        dist = {(h["key"], h["agent"], h["user"], h["session"]): float(h["d"]) for h in heads}
        return [(r, 1.0 - dist[(r.key, r.agent, r.user, r.session)]) for r in rows]

    async def has_chunks(self, org: str, ns: str, key: str, ident: Ident, value_hash: str) -> bool:
        rows = await self.store.query(
            f"SELECT count() AS n FROM {CHUNKS} WHERE org = {{org:String}} AND namespace = {{ns:String}} AND key = {{key:String}} "
            "AND agent = {agent:String} AND user = {user:String} AND session = {session:String} AND value_hash = {h:String}",
            {"org": org, "ns": ns, "key": key, "agent": ident.agent, "user": ident.user, "session": ident.session, "h": value_hash},
        )
        return bool(rows) and int(rows[0]["n"]) > 0

    async def add_chunks(self, org: str, ns: str, row: MemoryRow, texts: Sequence[str], vectors: Sequence[Sequence[float]]) -> None:
        base = {"org": org, "namespace": ns, "key": row.key, "agent": row.agent, "user": row.user, "session": row.session}
        await self.inserts.insert(
            CHUNKS,
            [
                {**base, "value_hash": row.value_hash, "idx": i, "text": t, "embedding": list(v)}
                for i, (t, v) in enumerate(zip(texts, vectors, strict=True))
            ],
        )

    async def search_chunks(self, org: str, ns: str, vector: Sequence[float], limit: int) -> list[ChunkHit]:
        """The rows whose chunks lie nearest `vector` (each row's nearest chunk), with the value
        hash the chunks were stored under; the caller keeps those still their row's value."""
        return await query_as(
            self.store,
            ChunkHit,
            f"SELECT key, agent, user, session, value_hash, min(cosineDistance(embedding, {{q:Array(Float32)}})) AS d FROM {CHUNKS} "
            "WHERE org = {org:String} AND namespace = {ns:String} GROUP BY key, agent, user, session, value_hash "
            "ORDER BY d ASC, key LIMIT {limit:UInt64}",
            {"org": org, "ns": ns, "q": [float(x) for x in vector], "limit": limit},
        )

    async def live_count_cached(self, org: str, ns: str, ttl: float = 30.0) -> int:
        """The namespace's live row count, taken at most `ttl` seconds ago. The callers that find
        it lapsed share one count (a namespace scan): a round of writes once asked for it once a
        write, all at the same moment."""
        k = (org, ns)
        hit = self._counts.get(k)
        if hit is not None and time.monotonic() - hit[0] < ttl:
            return hit[1]
        counting = self._counting.get(k)
        if counting is None:
            counting = self._counting[k] = asyncio.ensure_future(self._count_into_cache(org, ns))
            counting.add_done_callback(lambda _: self._counting.pop(k, None))
        # Shielded: a caller cancelled while it waits leaves the count to the others.
        return await asyncio.shield(counting)

    async def _count_into_cache(self, org: str, ns: str) -> int:
        started = time.monotonic()
        n = await self.live_count(org, ns)
        self._counts[(org, ns)] = (started, n)
        return n

    async def _current_of(self, org: str, ns: str, cands: Sequence[NearRow]) -> list[NearRow]:
        """The candidates that are their row's newest version (each row once, in order)."""
        if not cands:
            return []
        newest = await self.store.query(
            f"SELECT key, agent, user, session, max(version) AS v FROM {VECTORS} WHERE org = {{org:String}} AND namespace = {{ns:String}} "
            "AND key IN {keys:Array(String)} GROUP BY key, agent, user, session",
            {"org": org, "ns": ns, "keys": sorted({c["key"] for c in cands})},
        )
        top = {(r["key"], r["agent"], r["user"], r["session"]): int(r["v"]) for r in newest}
        seen: set[tuple[Any, ...]] = set()
        out = []
        for c in cands:
            ident = (c["key"], c["agent"], c["user"], c["session"])
            if ident in seen or top.get(ident) != int(c["version"]):
                continue
            seen.add(ident)
            out.append(c)
        return out

    async def publish_live_count(self, org: str, ns: str) -> None:
        """Publish the namespace's live row count (loom_core.exposures) as `live_count` counts it,
        in one statement."""
        await count_live_rows(
            self.store,
            org,
            ns,
            "memory",
            f"SELECT count() FROM {VECTORS} FINAL WHERE org = {{org:String}} AND namespace = {{ns:String}} AND live = 1",
            {},
        )

    async def live_count(self, org: str, ns: str) -> int:
        rows = await self.store.query(
            f"SELECT count() AS n FROM {VECTORS} FINAL WHERE org = {{org:String}} AND namespace = {{ns:String}} AND live = 1",
            {"org": org, "ns": ns},
        )
        return int(rows[0]["n"]) if rows else 0

    async def feedback(self, org: str, ns: str, key: str) -> tuple[int, int]:
        """(credits, charges) of a key: per decision, its newest figure counts."""
        rows = await self.store.query(
            "SELECT countIf(d > 0) AS c, countIf(d < 0) AS x FROM (SELECT decision_key, argMax(delta, ts) AS d "
            "FROM {db}.memory_feedback WHERE org = {org:String} AND namespace = {ns:String} AND key = {key:String} GROUP BY decision_key)",
            {"org": org, "ns": ns, "key": key},
        )
        return (int(rows[0]["c"]), int(rows[0]["x"])) if rows else (0, 0)

    async def feedback_of_decision(self, org: str, ns: str, decision_key: str) -> dict[str, int]:
        """The newest figure this decision gave each key."""
        rows = await self.store.query(
            "SELECT key, argMax(delta, ts) AS d FROM {db}.memory_feedback WHERE org = {org:String} AND namespace = {ns:String} "
            "AND decision_key = {dk:String} GROUP BY key",
            {"org": org, "ns": ns, "dk": decision_key},
        )
        return {str(r["key"]): int(r["d"]) for r in rows}

    async def add_feedback(self, rows: Sequence[FeedbackRow]) -> None:
        if rows:
            await self.inserts.insert("{db}.memory_feedback", rows)

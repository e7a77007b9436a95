"""A process-local cache of a namespace's row vectors, in front of the store.

The store (memory_vectors) stays the truth; this is a cache of it, per (org, namespace), for
namespaces of at least LOOM_MEMORY_VECTOR_CACHE_MIN_ROWS live rows. It searches the way
LOOM_MEMORY_VECTOR_CACHE_SEARCH says: `hnsw` (the default), a usearch HNSW graph per memory type
of the live rows (recall@25 against the exact cosine top 25 measured in docs/benchmarks.md on
MiniLM embeddings of decision statements; a tag-filtered search that the graph cannot fill
scans the type's vectors exactly), or `exact`, a cosine scan of the vectors held as one float32
matrix (recall 1, slower from 10^5 rows). Either way the cache is:

- built from the store in the background: at start for every namespace already that large, else
  when a search first finds a namespace that large. Until it is built the search scans exactly
  (the store's path), so a warming replica answers correctly, only slower;
- updated on write by the replica that writes (`note`), and every
  LOOM_MEMORY_VECTOR_CACHE_REFRESH_SECONDS from the rows other replicas wrote (memory_rows by
  ts, with a few seconds of overlap): a row another replica writes reaches this replica's
  cache within that bound plus one read; until then it is missing from this replica's ANN
  answers, never wrong in them;
- `nearest` (memory.search) checks every candidate against the store before it is served (the
  newest version of its row, read with the rows themselves), so a superseded or deleted row is
  never served from a stale cache entry;
- `nearest_decisions` (decision.precedents) serves from the cache alone: besides the vectors it
  holds each decision row's statement and conflicts and each key's current decision record
  (built from decision_records, updated on write, refreshed by ts like the rows). Reading the
  hits' rows back costs a scan of the namespace (random keys touch every granule: 0.2-0.7 s at
  10^5), which is what precedents paid before; so its bound across replicas is the refresh's:
  a row or record another replica wrote, superseded or retired is served as it was for at most
  LOOM_MEMORY_VECTOR_CACHE_REFRESH_SECONDS plus one read. The writing replica's own writes are
  in its cache before the write returns.

A new version of a row adds a new entry and marks the old one dead (and takes it out of its
graph); dead entries are never served. Precedents also drop any hit whose key's current record
is not active or not the row's writer's (service/decisions.py), so a superseded or retired
decision is not served even from a stale entry.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

import numpy as np
from loom_core.store import Store, ch_time, query_as

from ..settings import DecisionsSettings
from ..store.decisions import DecisionRecordRow, DecisionStore
from ..store.memory import DELETES, ROWS, VECTORS, MemoryRow, MemoryStore, RowView

if TYPE_CHECKING:
    from usearch.index import Index

log = logging.getLogger(__name__)

PAGE = 20_000
# Rows whose ts is this close to the last one read are read again: an insert can land with an
# older ts than one already read.
OVERLAP_SECONDS = 5.0
_HEX = "arrayStringConcat(arrayMap(x -> hex(x), embedding))"
# Only decision rows' values are held (precedents serves them); other rows' may be long.
_DECISION_VALUE = "if(memory_type = 'decision', value, '') AS value"

Ident4 = tuple[str, str, str, str]


class VectorRow(TypedDict):
    """A memory row version as the cache reads it: `value` only a decision's, `h` the embedding
    as hex float32s, `t` its ts (a refresh reads it)."""

    key: str
    agent: str
    user: str
    session: str
    version: int
    memory_type: str
    tags: list[str]
    status: str
    value: str
    conflicts: list[str]
    h: str
    t: NotRequired[str]


# The HNSW graph's parameters, chosen by the sweep in docs/benchmarks.md (MiniLM vectors of
# decision statements, 10^5 rows, recall@25 against the exact cosine top 25): connectivity (M) 32
# and 128 candidates while adding; searches look at EXPANSION_SEARCH candidates, or at the count
# asked when more (usearch widens to it). M 16 reached 0.958 at width 128, M 32 0.976.
CONNECTIVITY = 32
EXPANSION_ADD = 128
EXPANSION_SEARCH = 128
# The graph holds its vectors as half floats (docs/benchmarks.md, 10^5 composed vectors): 177 MiB
# against float32's 305, 28% less CPU to build, recall@25 0.971 against 0.975. i8 halved the
# build again but lost recall (0.936 against 0.992 at 3*10^4).
GRAPH_DTYPE = "f16"
# A filtered search (tags) that has asked the graph for this share of a graph's rows scans it
# exactly instead: the graph is no faster there, and an exact scan cannot miss.
EXACT_SHARE = 0.25


@dataclass(slots=True)
class _Entry:
    ident: Ident4
    version: int
    memory_type: str
    tags: frozenset[str]
    live: bool
    # A decision row's statement and conflicts (what precedents serves); empty for other rows.
    value: str = ""
    conflicts: tuple[str, ...] = ()

    # A RowView (store/memory.py): what precedents reads of a hit.
    @property
    def key(self) -> str:
        return self.ident[0]

    @property
    def agent(self) -> str:
        return self.ident[1]

    @property
    def user(self) -> str:
        return self.ident[2]

    @property
    def session(self) -> str:
        return self.ident[3]


class _Shared:
    """One object per distinct identity part, type and tag set: a namespace's rows repeat a few
    agents, users, sessions and tag sets, which need not be held once per row."""

    def __init__(self) -> None:
        self._strings: dict[str, str] = {}
        self._tags: dict[frozenset[str], frozenset[str]] = {}

    def string(self, s: str) -> str:
        return self._strings.setdefault(s, s)

    def tags(self, t: frozenset[str]) -> frozenset[str]:
        return self._tags.setdefault(t, t)

    def entry(self, e: _Entry) -> _Entry:
        key, agent, user, session = e.ident
        e.ident = (key, self.string(agent), self.string(user), self.string(session))
        e.memory_type = self.string(e.memory_type)
        e.tags = self.tags(e.tags)
        return e


def _unit(vectors: np.ndarray) -> np.ndarray:
    v = np.ascontiguousarray(vectors, dtype=np.float32)
    out: np.ndarray = v / np.clip(np.linalg.norm(v, axis=1, keepdims=True), 1e-12, None)
    return out


@dataclass
class NamespaceIndex:
    """A namespace's cached rows. `exact`: their unit vectors in one float32 matrix, scanned.
    `hnsw`: one usearch graph per memory type of the live rows' unit vectors (inner product,
    held as GRAPH_DTYPE; a superseded or retired row leaves its graph), no matrix; so a search for one type
    (precedents: decisions) walks only that type's graph and never filters others out."""

    dimensions: int
    hnsw: bool = False
    graphs: dict[str, Index] = field(default_factory=dict)
    matrix: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    entries: list[_Entry] = field(default_factory=list)
    current: dict[Ident4, int] = field(default_factory=dict)
    built: asyncio.Event = field(default_factory=asyncio.Event)
    ready: bool = False
    watermark: str = ""
    # When the last read from the store began: rows stamped OVERLAP_SECONDS before it or later
    # may still land, older ones had landed and were read then, so a refresh reads from
    # max(watermark, read_at) less the overlap (not every row of a bulk load's last seconds
    # again on every round).
    read_at: str = ""
    pending: list[tuple[_Entry, np.ndarray]] = field(default_factory=list)
    # Each key's current decision record (the newest version), and the newest ts read from them.
    records: dict[str, DecisionRecordRow] = field(default_factory=dict)
    records_watermark: str = ""
    pending_records: list[DecisionRecordRow] = field(default_factory=list)
    shared: _Shared = field(default_factory=_Shared)

    def __post_init__(self) -> None:
        if not self.hnsw:
            self.matrix = np.zeros((1024, self.dimensions), np.float32)

    def _graph(self, memory_type: str) -> Index:
        graph = self.graphs.get(memory_type)
        if graph is None:
            from usearch.index import Index

            graph = self.graphs[memory_type] = Index(
                ndim=self.dimensions,
                metric="ip",
                dtype=GRAPH_DTYPE,
                connectivity=CONNECTIVITY,
                expansion_add=EXPANSION_ADD,
                expansion_search=EXPANSION_SEARCH,
            )
        return graph

    def put_many(self, entries: Sequence[_Entry], vectors: np.ndarray) -> None:
        """Add rows (newer versions than the cache holds only); the versions they replace die."""
        keep: list[int] = []
        for i, e in enumerate(entries):
            at = self.current.get(e.ident)
            if at is not None:
                old = self.entries[at]
                if old.version >= e.version:
                    continue
                if old.live and self.hnsw:
                    self.graphs[old.memory_type].remove(at)
                old.live = False
            self.current[e.ident] = len(self.entries) + len(keep)
            keep.append(i)
        if not keep:
            return
        first = len(self.entries)
        for i in keep:
            self.entries.append(self.shared.entry(entries[i]))
        added = _unit(vectors[keep])
        end = first + len(keep)
        if self.hnsw:
            by_type: dict[str, list[int]] = {}
            for n in range(first, end):
                e = self.entries[n]
                if e.live:
                    by_type.setdefault(e.memory_type, []).append(n)
            for memory_type, numbers in by_type.items():
                at_rows = np.asarray(numbers, dtype=np.int64)
                self._graph(memory_type).add(at_rows.astype(np.uint64), added[at_rows - first])
            return
        if end > len(self.matrix):  # grow by doubling: appends stay amortized O(1)
            grown = np.zeros((max(end, 2 * len(self.matrix)), self.dimensions), np.float32)
            grown[:first] = self.matrix[:first]
            self.matrix = grown
        self.matrix[first:end] = added

    def put_records(self, records: Sequence[DecisionRecordRow]) -> None:
        """Decision records, each kept while it is its key's newest version."""
        for rec in records:
            held = self.records.get(rec["key"])
            if held is None or int(held["version"]) < int(rec["version"]):
                self.records[rec["key"]] = rec

    def _nearest(self, vector: np.ndarray, count: int, memory_type: str) -> tuple[np.ndarray, np.ndarray]:
        """(entry numbers, cosine similarities) of the `count` nearest entries (of `memory_type`'s
        graph when searching graphs and one is named), nearest first."""
        q = vector / max(float(np.linalg.norm(vector)), 1e-12)
        if self.hnsw:
            graphs = [self.graphs[memory_type]] if memory_type in self.graphs else [] if memory_type else list(self.graphs.values())
            keys: list[np.ndarray] = []
            sims: list[np.ndarray] = []
            for g in graphs:
                size = len(g)
                if size == 0:
                    continue
                # One thread: a single query gains nothing from usearch's pool and pays its dispatch.
                found = g.search(q, min(count, size), exact=count >= EXACT_SHARE * size, threads=1)
                keys.append(np.asarray(found.keys, dtype=np.int64))
                sims.append(1.0 - np.asarray(found.distances, dtype=np.float32))
            if not keys:
                return np.zeros(0, np.int64), np.zeros(0, np.float32)
            k, s = np.concatenate(keys), np.concatenate(sims)
            order = np.argsort(-s, kind="stable")[:count]
            return k[order], s[order]
        all_sims = self.matrix[: len(self.entries)] @ q
        top = np.argpartition(-all_sims, count - 1)[:count] if count < len(all_sims) else np.arange(len(all_sims))
        top = top[np.argsort(-all_sims[top])]
        return top, all_sims[top]

    def search(self, vector: np.ndarray, limit: int, memory_type: str, tags: Sequence[str]) -> list[tuple[_Entry, float]]:
        """The `limit` nearest live entries that pass the filters, with their cosine similarity."""
        want = frozenset(tags)
        size = len(self.entries)
        if size == 0:
            return []
        fetch = min(size, max(limit * 4, 64)) if want or not self.hnsw else limit
        while True:
            keys, sims = self._nearest(vector, fetch, memory_type)
            out: list[tuple[_Entry, float]] = []
            for key, sim in zip(keys.tolist(), sims.tolist(), strict=True):
                e = self.entries[key]
                if not e.live or (memory_type and e.memory_type != memory_type) or not want <= e.tags:
                    continue
                out.append((e, sim))
                if len(out) == limit:
                    return out
            if fetch >= size or len(keys) < fetch:
                return out
            fetch = min(size, fetch * 4)


def _vectors(rows: Sequence[VectorRow], dimensions: int) -> np.ndarray:
    if not rows:
        return np.zeros((0, dimensions), np.float32)
    return np.frombuffer(bytes.fromhex("".join(r["h"] for r in rows)), dtype="<f4").reshape(len(rows), dimensions)


class VectorCache:
    def __init__(self, store: Store, mem: MemoryStore, dec: DecisionStore, settings: DecisionsSettings) -> None:
        self.store = store
        self.mem = mem
        self.dec = dec
        self.settings = settings
        self.dimensions = settings.embedding_dimensions
        self._spaces: dict[tuple[str, str], NamespaceIndex] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._refresher: asyncio.Task[None] | None = None

    @property
    def enabled(self) -> bool:
        return self.settings.memory_vector_cache_min_rows > 0

    async def start(self) -> None:
        """Warm every namespace already large enough, in the background; refresh them periodically."""
        if not self.enabled:
            return
        self._spawn(self._warm_large())
        self._refresher = asyncio.ensure_future(self._refresh_forever())

    async def stop(self) -> None:
        tasks = [*self._tasks, *([self._refresher] if self._refresher else [])]
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _warm_large(self) -> None:
        rows = await self.store.query(
            f"SELECT org, namespace, count() AS n FROM {VECTORS} FINAL WHERE live = 1 GROUP BY org, namespace HAVING n >= {{min:UInt64}}",
            {"min": self.settings.memory_vector_cache_min_rows},
        )
        for r in rows:
            self.warm(r["org"], r["namespace"])

    def warm(self, org: str, ns: str) -> NamespaceIndex:
        space = self._spaces.get((org, ns))
        if space is None:
            space = self._spaces[(org, ns)] = NamespaceIndex(self.dimensions, hnsw=self.settings.memory_vector_cache_search == "hnsw")
            self._spawn(self._build(org, ns, space))
        return space

    def state(self, org: str, ns: str) -> str:
        space = self._spaces.get((org, ns))
        return "none" if space is None else ("ready" if space.ready else "warming")

    async def wait_ready(self, org: str, ns: str) -> None:
        """Build the namespace's cache now if it has none, and wait for it (benches and tests)."""
        space = self.warm(org, ns)
        await space.built.wait()
        if not space.ready:
            raise RuntimeError(f"the vector cache of {org}/{ns} could not be built (see the log)")

    async def _build(self, org: str, ns: str, space: NamespaceIndex) -> None:
        started = time.perf_counter()
        try:
            space.read_at = ch_time()
            space.watermark = await self._last_ts(org, ns)
            space.records_watermark = await self.dec.last_ts(org, ns)
            after: Ident4 = ("", "", "", "")
            while True:
                rows = await query_as(
                    self.store,
                    VectorRow,
                    f"SELECT key, agent, user, session, version, memory_type, tags, status, {_DECISION_VALUE}, conflicts, {_HEX} AS h "
                    f"FROM {ROWS} WHERE org = {{org:String}} AND namespace = {{ns:String}} "
                    "AND (key, agent, user, session) > ({k:String}, {a:String}, {u:String}, {s:String}) "
                    f"AND (key, agent, user, session, version) NOT IN (SELECT key, agent, user, session, version FROM {DELETES} "
                    "WHERE org = {org:String} AND namespace = {ns:String}) "
                    "ORDER BY key, agent, user, session, version DESC LIMIT 1 BY key, agent, user, session LIMIT {page:UInt64}",
                    {"org": org, "ns": ns, "k": after[0], "a": after[1], "u": after[2], "s": after[3], "page": PAGE},
                )
                live = [r for r in rows if r["status"] == "active"]
                if live:
                    vecs = await asyncio.to_thread(_vectors, live, self.dimensions)
                    await asyncio.to_thread(space.put_many, [_entry(r, True) for r in live], vecs)
                if rows:
                    last = rows[-1]
                    after = (last["key"], last["agent"], last["user"], last["session"])
                if len(rows) < PAGE:
                    break
            key_after = ""
            while True:
                recs = await self.dec.current_page(org, ns, key_after, PAGE)
                space.put_records(recs)
                if len(recs) < PAGE:
                    break
                key_after = recs[-1]["key"]
            for entry, vec in space.pending:
                space.put_many([entry], vec.reshape(1, -1))
            space.pending.clear()
            space.put_records(space.pending_records)
            space.pending_records.clear()
            space.ready = True
            log.info(
                "decisions: vector cache of %s/%s built: %d rows in %.1f s", org, ns, len(space.entries), time.perf_counter() - started
            )
        except asyncio.CancelledError:
            raise
        except Exception:
            # a cache that fails to build degrades to the exact scan, never fails a search
            log.exception("decisions: the vector cache of a namespace could not be built; its searches scan exactly")
            self._spaces.pop((org, ns), None)
        finally:
            space.built.set()

    async def _last_ts(self, org: str, ns: str) -> str:
        rows = await self.store.query(
            f"SELECT toString(max(ts)) AS t FROM {ROWS} WHERE org = {{org:String}} AND namespace = {{ns:String}}", {"org": org, "ns": ns}
        )
        return str(rows[0]["t"]) if rows else ""

    def note(self, org: str, ns: str, row: MemoryRow, embedding: Sequence[float]) -> None:
        """A row version this replica wrote: into the namespace's cache when it has one."""
        space = self._spaces.get((org, ns))
        if space is None or not embedding:
            return
        decision = row.memory_type == "decision"
        entry = _Entry(
            (row.key, row.agent, row.user, row.session),
            row.version,
            row.memory_type,
            frozenset(row.tags),
            row.live,
            row.value if decision else "",
            row.conflicts if decision else (),
        )
        vec = np.asarray(embedding, dtype=np.float32)
        if not space.ready:
            space.pending.append((entry, vec))
            return
        space.put_many([entry], vec.reshape(1, -1))

    def note_record(self, org: str, ns: str, record: DecisionRecordRow) -> None:
        """A decision record this replica wrote: into the namespace's cache when it has one."""
        space = self._spaces.get((org, ns))
        if space is None:
            return
        if not space.ready:
            space.pending_records.append(record)
            return
        space.put_records([record])

    async def _refresh_forever(self) -> None:
        while True:
            await asyncio.sleep(self.settings.memory_vector_cache_refresh_seconds)
            for (org, ns), space in list(self._spaces.items()):
                if space.ready:
                    try:
                        await self.refresh(org, ns, space)
                    except Exception:  # the next round reads the same rows again
                        log.warning("decisions: the vector cache of a namespace could not be refreshed", exc_info=True)

    async def refresh(self, org: str, ns: str, space: NamespaceIndex) -> None:
        """Rows written since the last read (by any replica) into the cache."""
        read_at = ch_time()
        rows = await query_as(
            self.store,
            VectorRow,
            f"SELECT key, agent, user, session, version, memory_type, tags, status, {_DECISION_VALUE}, conflicts, toString(ts) AS t, "
            f"{_HEX} AS h FROM {ROWS} "
            "WHERE org = {org:String} AND namespace = {ns:String} AND ts >= parseDateTime64BestEffort({wm:String}, 6) "
            "- toIntervalMillisecond({overlap:UInt32}) ORDER BY ts",
            {"org": org, "ns": ns, "wm": max(space.watermark, space.read_at) or "1970-01-01", "overlap": int(OVERLAP_SECONDS * 1000)},
        )
        if rows:
            vecs = _vectors(rows, self.dimensions)
            space.put_many([_entry(r, r["status"] == "active") for r in rows], vecs)
            space.watermark = max(space.watermark, rows[-1]["t"])
        recs = await self.dec.changed_since(org, ns, max(space.records_watermark, space.read_at) or "1970-01-01", OVERLAP_SECONDS)
        if recs:
            space.put_records(recs)
            space.records_watermark = max(space.records_watermark, max(str(r["ts"]) for r in recs))
        space.read_at = read_at

    async def nearest(
        self, org: str, ns: str, vector: Sequence[float], *, memory_type: str = "", tags: Sequence[str] = (), limit: int = 10
    ) -> list[tuple[MemoryRow, float]]:
        """Live rows nearest `vector` with their cosine: from the namespace's cache when it is
        built (each checked against the store), else by the store's exact scan."""
        space = await self._space(org, ns)
        if space is None:
            return await self.mem.search(org, ns, vector, memory_type=memory_type, tags=tags, limit=limit)
        q = np.asarray(vector, dtype=np.float32)
        found = space.search(q, limit, memory_type, tags)
        heads = [
            {"key": e.ident[0], "agent": e.ident[1], "user": e.ident[2], "session": e.ident[3], "version": e.version, "d": 1.0 - sim}
            for e, sim in found
        ]
        return await self.mem.served(org, ns, heads)

    async def nearest_decisions(
        self, org: str, ns: str, vector: Sequence[float], *, tags: Sequence[str] = (), limit: int = 10
    ) -> tuple[list[tuple[RowView, float]], dict[str, DecisionRecordRow]] | None:
        """From the namespace's built cache alone (no store read): the live decision rows nearest
        `vector` (key, identity, version, tags, value, conflicts) with their cosine, and the hit
        keys' current decision records. None while the namespace has no built cache."""
        space = await self._space(org, ns)
        if space is None:
            return None
        found = space.search(np.asarray(vector, dtype=np.float32), limit, "decision", tags)
        records = {e.ident[0]: rec for e, _ in found if (rec := space.records.get(e.ident[0])) is not None}
        return [(e, sim) for e, sim in found], records

    async def _space(self, org: str, ns: str) -> NamespaceIndex | None:
        """The namespace's built cache; None while it has none (starting its build when the
        namespace is large enough) or while it warms."""
        space = self._spaces.get((org, ns))
        if space is None and self.enabled and await self.mem.live_count_cached(org, ns) >= self.settings.memory_vector_cache_min_rows:
            space = self.warm(org, ns)
        return space if space is not None and space.ready else None


def _entry(row: VectorRow, live: bool) -> _Entry:
    decision = row["memory_type"] == "decision"
    return _Entry(
        (row["key"], row["agent"], row["user"], row["session"]),
        int(row["version"]),
        row["memory_type"],
        frozenset(row["tags"]),
        live,
        str(row.get("value", "")) if decision else "",
        tuple(row.get("conflicts") or ()) if decision else (),
    )

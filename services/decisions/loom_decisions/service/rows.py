"""The shared machinery of memory rows: identities, versions, locks, exposures, live counts.

A row is one key under one writer identity (agent, user, session). Each write appends a
version; writes to one key are serialized within a replica, and the key's lease (runtime
leases, NATS KV) carries both memory.lock (holder `lock:<subject>`) and the conditional write
of decision.outcome (holder `write:<request id>`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import hashlib
import logging
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, TypedDict, TypeVar, Unpack

from loom_core.batching import Coalescer
from loom_core.bus import LeaseStore
from loom_core.bus.counters import Counters
from loom_core.bus.leases import LeaseHeld
from loom_core.chain import CallContext
from loom_core.errors import Conflict, ErrorCode, Locked, LoomError, NotFound, Unavailable
from loom_core.exposures import ExposureSink, ExposureWriter, exposure_rows
from loom_core.store import Store, ch_time

from ..domain.statement import chunks
from ..settings import DecisionsSettings
from ..store.decisions import DecisionRecordRow, DecisionStore
from ..store.memory import Ident, MemoryRow, MemoryStore
from .embedding import Embedder
from .vector_index import VectorCache

log = logging.getLogger(__name__)

LOCK_PREFIX = "lock:"
WRITE_PREFIX = "write:"
WRITE_LEASE_SECONDS = 30.0
# How long a write round waits for the writers of the round before it to come back with their
# next write (loom_core.batching.Coalescer's linger): a round's statements cost ~8-12 ms of CPU
# each whatever it carries, and without it 16 writers write in rounds of 8.
ROUND_LINGER = 0.05
# Under steady writes a namespace's live row count is published at most once this often: a count
# scans the namespace (FINAL), and once a round it was the costliest statement of a write round.
LIVE_COUNT_INTERVAL = 1.0
# A write round of at least this many writes (concurrent writers in one namespace) gives the
# namespace its vector cache whatever its size, and later rounds' conflict checks read the cache,
# not the store: the exact scan cost 15-40 ms of CPU a round at 10^3 decisions and 32 writes,
# ~1 ms a record on the calling thread and as much again on chDB's pool (docs/benchmarks.md).
CACHE_ROUND_WRITES = 4


def value_hash(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def lease_key(org: str, ns: str, key: str) -> str:
    return "memkey." + hashlib.sha256(f"{org}\0{ns}\0{key}".encode()).hexdigest()[:48]


def record_counter_key(org: str, ns: str, key: str) -> str:
    return "decver." + hashlib.sha256(f"{org}\0{ns}\0{key}".encode()).hexdigest()[:48]


def row_counter_key(org: str, ns: str, key: str, ident: Ident) -> str:
    return "memver." + hashlib.sha256(f"{org}\0{ns}\0{key}\0{ident.agent}\0{ident.user}\0{ident.session}".encode()).hexdigest()[:48]


def iso(ts: str) -> str:
    """A store time ('2026-11-30 19:40:01.123456') as ISO 8601 UTC."""
    return ts.replace(" ", "T") + "Z" if ts and "T" not in ts else ts


class RowChanges(TypedDict, total=False):
    """The columns a write sets on a memory row (`Rows.append`); the rest come from the head."""

    value: str
    memory_type: str
    tags: Sequence[str]
    pinned: bool
    attested_hash: str
    status: str
    conflicts: Sequence[str]
    reinforcements: int
    files: Sequence[str]
    source_resource_id: str
    source_class: str


# What a new row holds before a write's changes (a row with no head).
_BLANK = MemoryRow(
    key="",
    agent="",
    user="",
    session="",
    memory_id="",
    version=0,
    value="",
    value_hash="",
    memory_type="",
    tags=(),
    pinned=False,
    attested_hash="",
    status="active",
    conflicts=(),
    reinforcements=0,
    files=(),
    source_resource_id="",
    source_class="",
    op="",
    actor="",
    run_id="",
    ts="",
)


@dataclass(frozen=True, slots=True)
class RowWrite:
    """One new row version (`Rows.append_many`): `base` (the head, or None) with `changes`
    applied; `top` as `Rows.append` takes it."""

    ctx: CallContext
    base: MemoryRow | None
    key: str
    ident: Ident
    op: str
    embedding: Sequence[float]
    top: int | None
    changes: RowChanges


def _next_row(org: str, ns: str, w: RowWrite, version: int) -> MemoryRow:
    memory_id = w.base.memory_id if w.base is not None and w.base.memory_id else ""
    start = w.base if w.base is not None else _BLANK
    value = w.changes.get("value", start.value)
    fixed: dict[str, Any] = {**w.changes}
    for name in ("tags", "conflicts", "files"):
        if name in fixed:
            fixed[name] = tuple(fixed[name])
    return dataclasses.replace(
        start,
        **fixed,
        key=w.key,
        agent=w.ident.agent,
        user=w.ident.user,
        session=w.ident.session,
        memory_id=memory_id or hashlib.sha256(f"{org}\0{ns}\0{w.key}\0{w.ident}\0{time.time_ns()}".encode()).hexdigest()[:32],
        version=version,
        value_hash=value_hash(value),
        op=w.op,
        actor=w.ctx.subject,
        run_id=w.ctx.run_id,
        ts=ch_time(),
    )


Namespace = tuple[str, str]  # (org, namespace)
W = TypeVar("W")
A = TypeVar("A")


class WriteRounds(Generic[W, A]):
    """Group commit: the writes of a namespace that queue while its round runs go through the
    next round together (`run(org, ns, writes)`: the reads, the conflict scan, the versions and
    one insert per table for all of them), so the store's statements a write shrink as writers
    grow. `run` answers each write its answer or its own refusal (a pinned row refuses one
    write, not the round). Callers hold the key lock across `submit`: a round carries at most
    one write per key, and a second write of a key goes in the round after the first's."""

    def __init__(self, run: Callable[[str, str, list[W]], Awaitable[Sequence[A | LoomError]]]) -> None:
        self._run = run
        self._rounds: Coalescer[Namespace, W, A | LoomError] = Coalescer(self._round, linger=ROUND_LINGER)

    async def submit(self, org: str, ns: str, write: W) -> A:
        out = await self._rounds.submit((org, ns), write)
        if isinstance(out, LoomError):
            raise out
        return out

    async def _round(self, where: Namespace, writes: list[W]) -> Sequence[A | LoomError]:
        return await self._run(where[0], where[1], writes)


@dataclass
class Deps:
    """What the plane's use cases need from the runtime, narrowly."""

    settings: DecisionsSettings
    store: Store
    leases: LeaseStore
    exposures: ExposureSink
    embedder: Embedder


class Rows:
    def __init__(self, deps: Deps) -> None:
        self.d = deps
        self.mem = MemoryStore(deps.store)
        self.dec = DecisionStore(deps.store)
        self.vectors = VectorCache(deps.store, self.mem, self.dec, deps.settings)
        self.exposures = ExposureWriter(deps.exposures)
        self._locks: dict[tuple[str, str, str], asyncio.Lock] = {}
        # publish_live's counts, per namespace: the namespaces written since their count began,
        # the count running for each, when each last began; and `_live_now`, set at stop.
        self._live_owed: set[Namespace] = set()
        self._live_counting: dict[Namespace, asyncio.Task[None]] = {}
        self._live_counted_at: dict[Namespace, float] = {}
        self._live_now = asyncio.Event()

    @functools.cached_property
    def counters(self) -> Counters:
        """The versions' counters (decision records' per key, memory rows' per key and identity),
        in the lease bucket: a counter that ages out of it restarts from the store's newest
        version (Counters' floor)."""
        return Counters(self.d.leases.bus, self.d.leases.bucket)

    # --- serialization and leases

    @asynccontextmanager
    async def key_lock(self, org: str, ns: str, key: str) -> AsyncIterator[None]:
        k = (org, ns, key)
        lock = self._locks.setdefault(k, asyncio.Lock())
        async with lock:
            yield
        if not lock.locked() and not lock._waiters:
            self._locks.pop(k, None)

    async def refuse_if_locked(self, org: str, ns: str, key: str) -> None:
        """423 LOCKED while a memory.lock holds the key (503 when the lease store is down)."""
        lease = await self.d.leases.read(lease_key(org, ns, key))
        if lease is not None and not lease.expired and lease.holder.startswith(LOCK_PREFIX):
            raise Locked(ErrorCode.LOCKED, "the key's value is locked", {"key": key, "until": _iso_epoch(lease.expires_at)})

    async def locked(self, org: str, ns: str, key: str) -> bool:
        lease = await self.d.leases.read(lease_key(org, ns, key))
        return lease is not None and not lease.expired and lease.holder.startswith(LOCK_PREFIX)

    @asynccontextmanager
    async def conditional_write(self, org: str, ns: str, key: str, request_id: str) -> AsyncIterator[None]:
        """Hold the key's lease for one conditional write: 423 while a lock holds it, 409 while
        another conditional write does, 503 when the lease store is unreachable."""
        try:
            lease = await self.d.leases.acquire(lease_key(org, ns, key), WRITE_PREFIX + request_id, WRITE_LEASE_SECONDS)
        except LeaseHeld as held:
            if held.holder.startswith(LOCK_PREFIX):
                raise Locked(ErrorCode.LOCKED, "the key's value is locked", {"key": key}) from None
            raise Conflict(ErrorCode.PRECONDITION_FAILED, "another conditional write holds the key; call again", {"key": key}) from None
        try:
            yield
        finally:
            with contextlib.suppress(Unavailable):  # the lease expires on its own
                await self.d.leases.release(lease)

    # --- rows

    def ident(self, ctx: CallContext, agent_id: str = "", user_id: str = "", session_id: str = "") -> Ident:
        """The identity a write op addresses: the caller's own labels unless named."""
        return Ident(agent_id or ctx.agent_label, user_id or ctx.user, session_id or ctx.session)

    async def live_head(self, org: str, ns: str, key: str, ident: Ident) -> MemoryRow:
        row = await self.mem.head(org, ns, key, ident)
        if row is None or not row.live:
            raise NotFound(ErrorCode.RESOURCE_NOT_FOUND, "no live row under this key and identity", {"key": key})
        return row

    async def append(
        self,
        org: str,
        ns: str,
        ctx: CallContext,
        base: MemoryRow | None,
        *,
        key: str,
        ident: Ident,
        op: str,
        embedding: Sequence[float] | None = None,
        top: int | None = None,
        **changes: Unpack[RowChanges],
    ) -> MemoryRow:
        """Append the identity's next version: `base` (the head) with `changes` applied. `top`:
        the highest version the caller read for the identity (`MemoryStore.own`), else it is
        read only if the version counter needs it. Without `embedding`, the base's is kept."""
        if embedding is None:
            embedding = (
                await self.mem.embedding_of(org, ns, key, ident, base.version) if base is not None else [0.0] * self.d.embedder.dimensions
            )
        (out,) = await self.append_many(org, ns, [RowWrite(ctx, base, key, ident, op, embedding, top, changes)])
        if isinstance(out, LoomError):
            raise out
        return out

    async def append_many(self, org: str, ns: str, writes: Sequence[RowWrite]) -> list[MemoryRow | LoomError]:
        """Append each write's next version (`append`), the versions numbered at once and the rows
        stored in one insert per table; a write whose version cannot be numbered is answered its
        error and the others land."""
        versions = await asyncio.gather(*(self.next_row_version(org, ns, w.key, w.ident, w.top) for w in writes), return_exceptions=True)
        out: list[MemoryRow | LoomError] = []
        landing: list[tuple[MemoryRow, Sequence[float]]] = []
        for w, version in zip(writes, versions, strict=True):
            if isinstance(version, LoomError):
                out.append(version)
                continue
            if isinstance(version, BaseException):
                raise version
            row = _next_row(org, ns, w, version)
            out.append(row)
            landing.append((row, w.embedding))
        if landing:
            await self.mem.append(org, ns, landing)
            for row, embedding in landing:
                self.vectors.note(org, ns, row, embedding)
        return out

    async def next_row_version(self, org: str, ns: str, key: str, ident: Ident, top: int | None) -> int:
        """The identity's next row version under the key, past every version it wrote (removed
        ones too): one number per write across every replica, since the key lock is per process
        (a NATS KV counter, by compare-and-set)."""

        async def stored_top() -> int:
            return await self.mem.max_version(org, ns, key, ident)

        return await self.counters.next(row_counter_key(org, ns, key, ident), floor=stored_top if top is None else top)

    async def store_chunks(self, org: str, ns: str, row: MemoryRow) -> None:
        """A value longer than its excerpt is also stored past it as chunks, each embedded, which
        memory.search reads; filed under the value's hash, so a later version with the same
        value (a pin, a tag write) keeps them."""
        pieces = chunks(row.value)
        if not pieces or await self.mem.has_chunks(org, ns, row.key, row.ident, row.value_hash):
            return
        vecs = await self.d.embedder.embed(pieces)
        await self.mem.add_chunks(org, ns, row, pieces, [[float(x) for x in v] for v in vecs])

    def publish_live(self, org: str, ns: str) -> None:
        """Publish the namespace's live row count after a write, in the background: one count
        runs at a time per namespace and covers every write stored before it began; a write
        stored while it runs gets one more count after it, LIVE_COUNT_INTERVAL after the last
        one began. The gate reads the count through its own cache (policy_cache_ttl_seconds),
        so a second's lag is within what it reads anyway; a writer no longer waits for a scan."""
        k = (org, ns)
        self._live_owed.add(k)
        if k not in self._live_counting:
            task = self._live_counting[k] = asyncio.ensure_future(self._publish_owed(k))
            task.add_done_callback(lambda _: self._live_counting.pop(k, None))

    async def _publish_owed(self, k: Namespace) -> None:
        while k in self._live_owed:
            pause = self._live_counted_at.get(k, -math.inf) + LIVE_COUNT_INTERVAL - time.monotonic()
            if pause > 0 and not self._live_now.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._live_now.wait(), pause)
            self._live_owed.discard(k)
            self._live_counted_at[k] = time.monotonic()
            try:
                await self.mem.publish_live_count(*k)
            except Unavailable:  # the store is down: the next write's count publishes it
                log.warning("the live row count of a namespace was not published (the store did not answer)")

    async def live_published(self) -> None:
        """Wait for every count owed to be published, without waiting out the interval (at stop)."""
        self._live_now.set()
        while self._live_counting:
            await asyncio.gather(*self._live_counting.values())
        self._live_now.clear()

    async def exposed(self, ctx: CallContext, keys: Iterable[str]) -> None:
        """Record the keys a read returned under the call's run (LOOM_MEMORY_EXPOSURE_LEDGER_ENABLED):
        the gate sees them now, the store a moment later (ExposureWriter)."""
        if self.d.settings.memory_exposure_ledger_enabled:
            self.exposures.write(exposure_rows(ctx, keys, kind="memory"))

    async def close_decisions(self, org: str, ns: str, writes: Sequence[tuple[str, Sequence[float]]]) -> list[list[str]]:
        """The conflict check of each (key, embedding) written together: decisions under other
        keys that read the same at or above LOOM_DECISION_CONFLICT_THRESHOLD (flagged on the
        row, never merged)."""
        s = self.d.settings
        if len(writes) >= CACHE_ROUND_WRITES and self.vectors.enabled:
            # Built in the background (this round scans the store); once built, the cache's bound
            # across replicas (LOOM_MEMORY_VECTOR_CACHE_REFRESH_SECONDS) applies to this namespace
            # as to one past LOOM_MEMORY_VECTOR_CACHE_MIN_ROWS.
            self.vectors.warm(org, ns)
        hits: list[list[tuple[str, float]] | None] = [None] * len(writes)
        for i, cached in enumerate(await asyncio.gather(*(self.vectors.nearest_decisions(org, ns, vec, limit=10) for _, vec in writes))):
            if cached is not None:  # the cache's bound across replicas (see vector_index) holds for this check too
                hits[i] = [(row.key, score) for row, score in cached[0]]
        rest = [i for i, h in enumerate(hits) if h is None]
        if rest:  # exact, as search answers without a built cache: one scan for every write of the round
            scanned = await self.mem.nearest_decisions_exact_many((org, ns, 10), [[float(x) for x in writes[i][1]] for i in rest])
            for i, found_keys in zip(rest, scanned, strict=True):
                hits[i] = found_keys
        return [
            sorted({k for k, score in h or [] if k != key and score >= s.decision_conflict_threshold})
            for (key, _), h in zip(writes, hits, strict=True)
        ]

    # --- the decision record a row may hold

    async def retire_if_writer(self, org: str, ns: str, key: str, ident: Ident, row: MemoryRow) -> bool:
        """A delete of the writer's decision row retires the key's active record."""
        if row.memory_type != "decision":
            return False
        rec = await self.dec.current(org, ns, key)
        if rec is None or rec["status"] != "active" or Ident(rec["agent"], rec["user"], rec["session"]) != ident:
            return False
        version = await self.next_record_version(org, ns, key, int(rec["version"]))
        await self.append_records(org, ns, [{**record_row(rec), "version": version, "status": "tombstoned", "ts": ch_time()}])
        return True

    async def next_record_version(self, org: str, ns: str, key: str, current: int) -> int:
        """The key's next decision-record version, `current` (the newest this replica's store
        read) + 1 or past it: one number per write across every replica, since the key lock is
        per process (a NATS KV counter, by compare-and-set)."""
        return await self.counters.next(record_counter_key(org, ns, key), floor=current)

    async def append_records(self, org: str, ns: str, recs: Sequence[DecisionRecordRow]) -> None:
        """New versions of decision records, into the store (one insert) and this replica's cache."""
        await self.dec.append(org, ns, recs)
        for rec in recs:
            self.vectors.note_record(org, ns, rec)


def record_row(rec: DecisionRecordRow) -> DecisionRecordRow:
    """A stored record as an insertable row (an outcome time read back empty as none)."""
    return {**rec, "outcome_at": rec["outcome_at"] or None}


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity of two stored embeddings (0 when either is empty or zero)."""
    if not a or not b or len(a) != len(b):
        return 0.0
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na = sum(x * x for x in a) ** 0.5
    nb = sum(y * y for y in b) ** 0.5
    return dot / (na * nb) if na and nb else 0.0


def _iso_epoch(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat().replace("+00:00", "Z")

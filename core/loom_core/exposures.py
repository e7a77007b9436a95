"""The exposure record: the keys an op returned to a principal.

A read that shows a caller stored rows (memory.get, memory.search, ...) records one row per
key it returned in `loom.memory_exposures`, filed under the call's subject and labels. Two
readers need it: history policies (`breadth_within`: how many distinct keys a principal was
shown, against a value or a fraction of the namespace's live rows, which the owning plane
publishes in `loom.live_row_counts`) and the assistant's citation check.

The owning plane writes exposures through an `ExposureWriter`: the replica's policy gate sees a
call's rows at once (and other replicas through the gate's feed), so a rule reads a key shown a
moment ago; the insert runs in the background, off the call's path (as the ledger's rows are:
the citation check waits up to five seconds for them), one insert for the rows of the calls
made within a fifth of a second. `write_exposures(runtime, rows)` inserts and returns after the insert.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from .store import Migration, Store, ch_time
from .store.caller import CALL_COLUMNS_DDL, CallerRow, caller_values

if TYPE_CHECKING:
    from .chain.context import CallContext

log = logging.getLogger(__name__)

TABLE = "{db}.memory_exposures"
LIVE_TABLE = "{db}.live_row_counts"

MIGRATIONS = [
    Migration(
        "core",
        "memory_exposures",
        f"""
        CREATE TABLE IF NOT EXISTS {{db}}.memory_exposures (
            {CALL_COLUMNS_DDL},
            run_id String,
            op LowCardinality(String),
            kind LowCardinality(String),
            key String,
            request_id String
        ) ENGINE = MergeTree
        PARTITION BY toYYYYMM(ts)
        ORDER BY (org, namespace, subject, ts)""",
    ),
    Migration(
        "core",
        "live_row_counts",
        """
        CREATE TABLE IF NOT EXISTS {db}.live_row_counts (
            org LowCardinality(String),
            namespace String,
            kind LowCardinality(String),
            live_rows UInt64,
            updated_at DateTime64(6, 'UTC'),
            version UInt64
        ) ENGINE = ReplacingMergeTree(version)
        ORDER BY (org, namespace, kind)""",
    ),
]


class ExposureRow(CallerRow):
    """One key shown to one principal by one call (a memory_exposures row)."""

    ts: str
    run_id: str
    op: str
    kind: str
    key: str
    request_id: str


def exposure_rows(ctx: CallContext, keys: Iterable[str], *, kind: str = "memory", ts: float | None = None) -> list[ExposureRow]:
    """The rows for the keys a call returned (each key once), filed under the call's principal."""
    when = ch_time(datetime.fromtimestamp(ts if ts is not None else time.time(), UTC))
    call = ExposureRow(
        org=ctx.org,
        namespace=ctx.namespace,
        **caller_values(ctx),
        ts=when,
        run_id=ctx.run_id,
        op=ctx.op.name,
        kind=kind,
        key="",
        request_id=ctx.request_id,
    )
    rows = []
    for key in dict.fromkeys(keys):
        row = call.copy()
        row["key"] = key
        rows.append(row)
    return rows


class ExposureSink(Protocol):
    """Where exposure rows go: the store, and this replica's gate (the runtime is one)."""

    @property
    def store(self) -> Store: ...

    @property
    def gate(self) -> object: ...


async def write_exposures(sink: ExposureSink, rows: Sequence[Mapping[str, Any]]) -> None:
    """Insert exposure rows and hand them to this replica's policy gate (if it reads them).

    Callers: the decisions plane's key-returning reads (memory.get/list/search,
    decision.precedents/chain) when LOOM_MEMORY_EXPOSURE_LEDGER_ENABLED."""
    if not rows:
        return
    await sink.store.insert(TABLE, rows)
    observe = getattr(sink.gate, "observe_exposures", None)
    if observe is not None:
        observe(rows)


class ExposureWriter:
    """A plane's exposure rows: to this replica's gate at once, into the store in the background.

    An insert into chDB costs ~10 ms of CPU however few its rows (25 rows, docs/benchmarks.md),
    more than a precedents call's own answer at 10^5 decisions; so a call does not wait for it,
    and the rows of the calls made within FLUSH_SECONDS (or up to FLUSH_ROWS) share one insert.
    A failed insert is logged and its rows are lost, as a lost ledger batch's are; `flush` stores
    everything written so far (tests, a plane's stop)."""

    FLUSH_SECONDS = 0.2
    FLUSH_ROWS = 5000

    def __init__(self, sink: ExposureSink) -> None:
        self.sink = sink
        self._buffer: list[Mapping[str, Any]] = []
        self._hurry = asyncio.Event()
        self._drain: asyncio.Task[None] | None = None

    def write(self, rows: Sequence[Mapping[str, Any]]) -> None:
        if not rows:
            return
        observe = getattr(self.sink.gate, "observe_exposures", None)
        if observe is not None:
            observe(rows)
        self._buffer.extend(rows)
        if len(self._buffer) >= self.FLUSH_ROWS:
            self._hurry.set()
        if self._drain is None or self._drain.done():
            self._drain = asyncio.ensure_future(self._drain_buffer())

    async def _drain_buffer(self) -> None:
        while self._buffer:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._hurry.wait(), self.FLUSH_SECONDS)
            self._hurry.clear()
            rows, self._buffer = self._buffer, []
            try:
                await self.sink.store.insert(TABLE, rows)
            except Exception:  # a lost exposure batch never fails the reads that made it
                log.warning("exposure rows could not be stored (%d rows lost)", len(rows), exc_info=True)

    async def flush(self) -> None:
        while self._drain is not None and not self._drain.done():
            self._hurry.set()
            await asyncio.shield(self._drain)


async def set_live_rows(store: Store, org: str, namespace: str, kind: str, count: int) -> None:
    """The owning plane publishes how many live rows of `kind` a namespace holds (the decisions
    plane after each memory write that makes a row live or not)."""
    now = time.time()
    await store.insert(
        LIVE_TABLE,
        [
            {
                "org": org,
                "namespace": namespace,
                "kind": kind,
                "live_rows": int(count),
                "updated_at": ch_time(),
                "version": int(now * 1_000_000),
            }
        ],
    )


async def count_live_rows(store: Store, org: str, namespace: str, kind: str, count_sql: str, params: Mapping[str, Any]) -> None:
    """`set_live_rows` with the count taken by the store in the same statement: `count_sql` is a
    SELECT of one number (bound by `params`, which must not name org, ns, kind, updated or
    version). One round trip where a count and then an insert take two."""
    await store.execute(
        f"INSERT INTO {LIVE_TABLE} (org, namespace, kind, live_rows, updated_at, version) "
        "SELECT {org:String}, {ns:String}, {kind:String}, "
        f"({count_sql}), "
        "{updated:DateTime64(6, 'UTC')}, {version:UInt64}",
        {**params, "org": org, "ns": namespace, "kind": kind, "updated": ch_time(), "version": int(time.time() * 1_000_000)},
    )


async def live_rows(store: Store, org: str, namespace: str) -> dict[str, int]:
    """The namespace's live row counts by kind, as last published."""
    rows = await store.query(
        "SELECT kind, live_rows FROM {db}.live_row_counts FINAL WHERE org = {org:String} AND namespace = {ns:String}",
        {"org": org, "ns": namespace},
    )
    return {str(r["kind"]): int(r["live_rows"]) for r in rows}

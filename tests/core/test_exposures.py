"""loom_core.exposures.ExposureWriter: the gate sees a read's rows at once, the store after the
background insert; a failed insert loses its rows without failing the read."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from loom_core.exposures import MIGRATIONS, ExposureRow, ExposureWriter
from loom_core.store import Store, StoreError, run_migrations
from loom_core.store.embedded import EmbeddedStore


@dataclass
class Gate:
    seen: list[Mapping[str, Any]] = field(default_factory=list)

    def observe_exposures(self, rows: Sequence[Mapping[str, Any]]) -> None:
        self.seen.extend(rows)


@dataclass
class CountingStore:
    """The real store, counting the inserts it is asked for."""

    store: Store
    inserts: int = 0

    async def insert(self, table: str, rows: Sequence[Mapping[str, Any]], *, dedup_token: str | None = None) -> None:
        self.inserts += 1
        await self.store.insert(table, rows)


@dataclass
class Sink:
    store: Store
    gate: Gate = field(default_factory=Gate)


def rows(org: str, keys: Sequence[str]) -> list[ExposureRow]:
    return [
        ExposureRow(
            ts="2026-01-01 00:00:00.000000",
            org=org,
            namespace="ns",
            subject="user:a",
            agent="agent",
            user="",
            session="",
            run_id="run-1",
            op="decision.precedents",
            kind="memory",
            key=k,
            request_id="r",
        )
        for k in keys
    ]


async def stored_keys(store: Store, org: str) -> list[str]:
    found = await store.query("SELECT key FROM {db}.memory_exposures WHERE org = {org:String} ORDER BY key", {"org": org})
    return [r["key"] for r in found]


async def test_the_gate_sees_rows_at_once_and_the_store_after_the_flush(store: EmbeddedStore) -> None:
    await run_migrations(store, MIGRATIONS)
    org = "exp-" + uuid.uuid4().hex[:8]
    counting = CountingStore(store)
    sink = Sink(counting)  # type: ignore[arg-type]  # only insert is reached
    writer = ExposureWriter(sink)
    writer.write(rows(org, ["a", "b"]))
    writer.write(rows(org, ["c"]))
    writer.write([])
    assert [r["key"] for r in sink.gate.seen] == ["a", "b", "c"]  # before any insert ran
    await writer.flush()
    assert await stored_keys(store, org) == ["a", "b", "c"]
    assert counting.inserts == 1  # two calls' rows, one insert
    writer.write(rows(org, ["d"]))
    await writer.flush()
    assert await stored_keys(store, org) == ["a", "b", "c", "d"]


class FailingStore:
    async def insert(self, table: str, rows: Sequence[Mapping[str, Any]], *, dedup_token: str | None = None) -> None:
        raise StoreError()


async def test_a_failed_insert_is_logged_and_flush_still_returns() -> None:
    sink = Sink(FailingStore())  # type: ignore[arg-type]  # only insert is reached
    writer = ExposureWriter(sink)
    writer.write(rows("org", ["a"]))
    await writer.flush()
    assert [r["key"] for r in sink.gate.seen] == ["a"]

"""memory_vectors carried ClickHouse's HNSW index (`embedding_hnsw`) until session 23: a data dir
made then loses it when the plane's migrations run, once (the drop is a mutation of every part,
so it runs only while the index is there), and search answers the rows it answered before."""

from __future__ import annotations

import contextlib
import dataclasses
import uuid
from collections.abc import AsyncIterator

import pytest
from loom_core.store import run_migrations
from loom_core.store.embedded import EmbeddedStore
from loom_decisions.service.rows import _BLANK
from loom_decisions.store.memory import MemoryRow, MemoryStore
from loom_decisions.store.schema import migrations

DROP = "memory_vectors.drop embedding_hnsw"
# memory_vectors as the plane created it before session 23: today's table with the index (width 4 here).
OLD_MEMORY_VECTORS = next(m.sql for m in migrations() if m.name == "memory_vectors").replace(
    "embedding Array(Float32)",
    "embedding Array(Float32),\nINDEX embedding_hnsw embedding TYPE vector_similarity('hnsw', 'cosineDistance', 4) GRANULARITY 100000000",
)
ORG, NS = "org-hnsw", "ns-hnsw"


@contextlib.asynccontextmanager
async def own_database(store: EmbeddedStore) -> AsyncIterator[EmbeddedStore]:
    """A handle on the suite's chDB engine for a database of the test's own, dropped after."""
    db = EmbeddedStore(store.path, f"hnsw_{uuid.uuid4().hex[:8]}")
    try:
        yield db
    finally:
        await db.execute("DROP DATABASE IF EXISTS {db}")
        # Not db.close(): that would also forget the suite's own handle on the same path.
        db._pool.shutdown(wait=True)
        for conn in [*db._thread_conns, db._conn]:
            conn.close()


@pytest.fixture
async def old_db(store: EmbeddedStore) -> AsyncIterator[EmbeddedStore]:
    """The tables as they were made before session 23: the old memory_vectors, then every other
    migration but the drop."""
    async with own_database(store) as db:
        await db.execute("CREATE DATABASE {db}")
        await db.execute(OLD_MEMORY_VECTORS)
        await run_migrations(db, [m for m in migrations() if m.name != DROP])
        yield db


def row(key: str, version: int, status: str = "active") -> MemoryRow:
    return dataclasses.replace(
        _BLANK,
        key=key,
        agent="planner",
        memory_id=key,
        version=version,
        value=f"{key} v{version}",
        memory_type="decision",
        status=status,
        ts="2026-12-05 00:00:00.000000",
    )


async def indices(db: EmbeddedStore) -> list[str]:
    found = await db.query(
        "SELECT name FROM system.data_skipping_indices WHERE database = '{db}' AND table = 'memory_vectors' ORDER BY name"
    )
    return [str(r["name"]) for r in found]


async def drops(db: EmbeddedStore) -> int:
    found = await db.query("SELECT count() AS n FROM system.mutations WHERE database = '{db}' AND table = 'memory_vectors'")
    return int(found[0]["n"])


async def test_an_old_data_dir_loses_the_hnsw_index_once_and_search_answers_the_same_rows(old_db: EmbeddedStore) -> None:
    assert await indices(old_db) == ["embedding_hnsw"]
    mem = MemoryStore(old_db)
    # Three inserts (three parts); k2 superseded by a nearer version, k4 deleted.
    await mem.append(ORG, NS, [(row(f"k{i}", 1), [1.0, i / 10, 0.0, 0.0]) for i in range(8)])
    await mem.append(ORG, NS, [(row("k2", 2), [1.0, 0.0, 0.0, 0.01])])
    await mem.append(ORG, NS, [(row("k4", 2, "deleted"), [1.0, 0.4, 0.0, 0.0])])
    query = [1.0, 0.0, 0.0, 0.0]

    def answer(found: list[tuple[MemoryRow, float]]) -> list[tuple[str, int]]:
        return [(r.key, r.version) for r, _ in found]

    before = answer(await mem.search(ORG, NS, query, memory_type="decision", limit=5))
    assert before == [("k0", 1), ("k2", 2), ("k1", 1), ("k3", 1), ("k5", 1)]

    await run_migrations(old_db, migrations())
    assert await indices(old_db) == []
    assert await drops(old_db) == 1
    await run_migrations(old_db, migrations())  # the next start: nothing to drop, no mutation of the parts
    assert await drops(old_db) == 1
    assert answer(await mem.search(ORG, NS, query, memory_type="decision", limit=5)) == before


async def test_a_new_data_dir_has_no_vector_index(store: EmbeddedStore) -> None:
    async with own_database(store) as db:
        await run_migrations(db, migrations())
        assert await indices(db) == []
        assert await drops(db) == 0

"""memory_vectors is filled from memory_rows' insert (the view memory_vectors_of_rows): one insert
a write round, each version's vector, type, tags and liveness as the row has them."""

from __future__ import annotations

import dataclasses

from loom_decisions.store.memory import MemoryStore

from .conftest import Desk

STATEMENT = {"category": "storage", "scenario": "where raw transcripts live", "outcome": "object storage, 30 days"}


async def test_each_row_version_lands_in_memory_vectors_as_the_row_has_it(desk: Desk) -> None:
    a = desk.as_agent("planner")
    store = desk.inst.runtime.store
    key = (await a.ok("decision.record", **STATEMENT))["memory_key"]
    where = {"org": desk.tenant.org, "ns": desk.tenant.namespace, "key": key}
    match = "WHERE org = {org:String} AND namespace = {ns:String} AND key = {key:String} ORDER BY version"

    async def both() -> tuple[list[dict[str, object]], list[dict[str, object]]]:
        rows = await store.query(
            f"SELECT version, memory_type, tags, status = 'active' AS live, embedding FROM {{db}}.memory_rows {match}", where
        )
        # FINAL: memory_vectors keeps a row's newest version once merged (ReplacingMergeTree).
        vectors = await store.query(f"SELECT version, memory_type, tags, live, embedding FROM {{db}}.memory_vectors FINAL {match}", where)
        return rows, vectors

    rows, vectors = await both()
    assert vectors == rows and [v["live"] for v in vectors] == [1]
    raw = await store.query(f"SELECT version FROM {{db}}.memory_vectors {match}", where)
    assert raw == [{"version": 1}]  # once: no second insert beside the view's
    await a.ok("memory.delete", memory_key=key)
    rows, vectors = await both()
    assert [r["version"] for r in rows] == [1, 2]
    assert vectors == rows[-1:] and vectors[0]["live"] == 0


async def test_a_row_appended_by_the_store_reaches_search_through_the_view(desk: Desk) -> None:
    a = desk.as_agent("planner")
    key = (await a.ok("decision.record", **STATEMENT))["memory_key"]
    mem = MemoryStore(desk.inst.runtime.store)
    org, ns = desk.tenant.org, desk.tenant.namespace
    (row,) = [r for r in await mem.live_heads(org, ns, memory_type="decision") if r.key == key]
    vector = [1.0] + [0.0] * 383
    await mem.append(org, ns, [(dataclasses.replace(row, version=row.version + 1), vector)])
    found = await mem.search(org, ns, vector, memory_type="decision", limit=1)
    assert [(r.key, r.version, round(score, 5)) for r, score in found] == [(key, row.version + 1, 1.0)]

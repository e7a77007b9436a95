"""The process-local ANN cache of a namespace's vectors: exact answers while it warms, the same
answers once built, the writer's own writes at once, another replica's writes after a refresh,
and never a superseded version."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from loom_decisions.service.vector_index import VectorCache

from .conftest import Api, Desk
from .test_precedents import CASES, record_cases


def plane_rows(desk: Desk) -> Any:
    return next(p for p in desk.inst.planes if p.name == "decisions").rows  # type: ignore[attr-defined]


def small_namespaces_cached(desk: Desk, monkeypatch: pytest.MonkeyPatch, search: str = "exact") -> VectorCache:
    """This test's plane caches namespaces of 3 rows or more."""
    rows = plane_rows(desk)
    settings = rows.d.settings.model_copy(update={"memory_vector_cache_min_rows": 3, "memory_vector_cache_search": search})
    monkeypatch.setattr(rows.d, "settings", settings)
    monkeypatch.setattr(rows.vectors, "settings", settings)
    cache: VectorCache = rows.vectors
    return cache


async def keys_near(cache: VectorCache, org: str, ns: str, text: str, limit: int = 3) -> list[str]:
    from loom_core.embedding import shared_local_model

    vec = shared_local_model().encode([text])[0]
    return [row.key for row, _ in await cache.nearest(org, ns, [float(x) for x in vec], memory_type="decision", limit=limit)]


@pytest.mark.parametrize("search", ["exact", "hnsw"])
async def test_the_cache_answers_as_the_exact_scan_does_and_takes_the_writers_writes_at_once(
    desk: Desk, monkeypatch: pytest.MonkeyPatch, search: str
) -> None:
    cache = small_namespaces_cached(desk, monkeypatch, search)
    org, ns = desk.tenant.org, desk.tenant.namespace
    a = desk.as_agent("planner")
    keys = await record_cases(a)
    question = CASES[0][2]
    first = (await a.ok("decision.precedents", query=question, limit=3))["precedents"]  # exact: the cache is warming
    assert first[0]["memory_key"] == keys[question]
    await cache.wait_ready(org, ns)
    assert cache.state(org, ns) == "ready"
    assert bool(cache._spaces[(org, ns)].graphs) == (search == "hnsw")
    again = (await a.ok("decision.precedents", query=question, limit=3))["precedents"]
    assert [p["memory_key"] for p in again] == [p["memory_key"] for p in first]
    assert np.allclose([p["score"] for p in again], [p["score"] for p in first], atol=1e-4)

    rec = await a.ok(
        "decision.record", category="platform", scenario="where customer chat logs are archived", outcome="cold storage bucket"
    )
    assert rec["memory_key"] in await keys_near(cache, org, ns, "where do customer chat logs get archived?")


async def test_another_replicas_writes_arrive_with_a_refresh_and_superseded_versions_are_never_served(
    desk: Desk, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = small_namespaces_cached(desk, monkeypatch)
    org, ns = desk.tenant.org, desk.tenant.namespace
    a = desk.as_agent("planner")
    await record_cases(a)
    # Another replica: its own cache of the same store, built now.
    rows = plane_rows(desk)
    other = VectorCache(rows.d.store, rows.mem, rows.dec, cache.settings)
    await other.wait_ready(org, ns)
    rec = await a.ok("decision.record", category="platform", scenario="vendor for SMS notifications", outcome="Twilio")
    question = "which provider sends our text messages?"
    assert rec["memory_key"] not in await keys_near(other, org, ns, question)  # written on this replica only
    await other.refresh(org, ns, other._spaces[(org, ns)])
    assert (await keys_near(other, org, ns, question))[0] == rec["memory_key"]

    # Deciding the same scenario again supersedes the row: one entry per row is served.
    await a.ok("decision.record", category="platform", scenario="vendor for SMS notifications", outcome="MessageBird")
    await other.refresh(org, ns, other._spaces[(org, ns)])
    for c in (cache, other):
        found = await c.nearest(org, ns, [0.0] * 383 + [1.0], memory_type="decision", limit=25)
        assert [row.key for row, _ in found].count(rec["memory_key"]) <= 1
    got = (await a.ok("decision.precedents", query=question, limit=3))["precedents"]
    assert got[0]["memory_key"] == rec["memory_key"] and got[0]["outcome"] == "MessageBird"
    # Precedents' cache-only answer: rows and records as both replicas now hold them.
    from loom_core.embedding import shared_local_model

    vec = [float(x) for x in shared_local_model().encode([question])[0]]
    await cache.wait_ready(org, ns)
    for c in (cache, other):
        served = await c.nearest_decisions(org, ns, vec, limit=3)
        assert served is not None
        hits, records = served
        assert hits[0][0].key == rec["memory_key"] and "MessageBird" in hits[0][0].value
        assert records[rec["memory_key"]]["outcome"] == "MessageBird"
    # Retired on this replica: gone from its cache at once, from the other's after a refresh.
    await a.ok("memory.delete", memory_key=rec["memory_key"])
    await other.refresh(org, ns, other._spaces[(org, ns)])
    for c in (cache, other):
        served = await c.nearest_decisions(org, ns, vec, limit=3)
        assert served is not None and rec["memory_key"] not in [row.key for row, _ in served[0]]
        assert c._spaces[(org, ns)].records[rec["memory_key"]]["status"] == "tombstoned"
    await other.stop()


async def test_the_plane_has_loaded_its_model_when_it_has_started(desk: Desk) -> None:
    from loom_core.embedding import LocalModel

    plane = next(p for p in desk.inst.planes if p.name == "decisions")
    model = plane.embedder.model  # type: ignore[attr-defined]
    assert isinstance(model, LocalModel) and model.loaded


async def test_the_graph_serves_only_its_namespace_live_decisions_above_the_floor(desk: Desk, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.conftest import unique

    from .test_precedents import FLOOR

    cache = small_namespaces_cached(desk, monkeypatch, "hnsw")
    org, ns = desk.tenant.org, desk.tenant.namespace
    a = desk.as_agent("planner")
    keys = await record_cases(a)
    # The same decision in another namespace of the org, with its own cache.
    other_ns = unique("elsewhere")
    await a.ok("namespace.create", name=other_ns)
    async with desk.tenant.client(**{"X-Loom-Agent": "planner", "X-Loom-Namespace": other_ns}) as c:
        b = Api(c, "planner")
        await record_cases(b)
        elsewhere = await b.ok("decision.record", category="platform", scenario="vendor for SMS notifications", outcome="Twilio")
        await cache.wait_ready(org, ns)
        await cache.wait_ready(org, other_ns)
        question = CASES[0][2]
        got = await a.ok("decision.precedents", query=question, limit=25)
        assert got["precedents"][0]["memory_key"] == keys[question]
        assert all(p["score"] >= FLOOR for p in got["precedents"]) and len(got["precedents"]) < len(CASES)
        assert elsewhere["memory_key"] not in [p["memory_key"] for p in got["precedents"]]
        sms = await b.ok("decision.precedents", query="which provider sends our text messages?", limit=3)
        assert sms["precedents"][0]["memory_key"] == elsewhere["memory_key"]
        # Nothing close: none, and the answer says so.
        far = await a.ok("decision.precedents", query="banana bread recipe with walnuts", limit=10)
        assert far["precedents"] == [] and far["none_close"] is True
        # Deleted in the other namespace: gone from its graph at once, this namespace untouched.
        await b.ok("memory.delete", memory_key=elsewhere["memory_key"])
        sms = await b.ok("decision.precedents", query="which provider sends our text messages?", limit=3)
        assert elsewhere["memory_key"] not in [p["memory_key"] for p in sms["precedents"]]
        assert (await a.ok("decision.precedents", query=question, limit=3))["precedents"][0]["memory_key"] == keys[question]

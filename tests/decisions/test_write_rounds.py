"""Group commit (rows.WriteRounds): the decision.record and memory.set calls of a namespace that
queue while its round runs are written together. A refusal stays one write's (a pinned row,
bad input), a key's writes in one burst get consecutive versions, and two replicas racing on
one key never share a version (the NATS KV counters). Called on the plane's own use cases, a
second replica as a second `Rows` over the same store and bus (its own key locks and caches)."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from collections.abc import Sequence
from typing import Any

import pytest
from loom_api.decisions.v1 import decisions_pb2 as dpb
from loom_api.decisions.v1 import memory_pb2 as mpb
from loom_core.chain import CallContext
from loom_core.errors import ErrorCode, LoomError
from loom_decisions.service.decisions import DecisionOps
from loom_decisions.service.memory import MemoryOps
from loom_decisions.service.rows import Rows, RowWrite
from loom_decisions.store.memory import Ident, MemoryRow

from .conftest import Desk


def plane_of(desk: Desk) -> Any:
    return next(p for p in desk.inst.planes if p.name == "decisions")


def caller(desk: Desk, agent: str) -> CallContext:
    ctx: CallContext = plane_of(desk).operator_context(desk.tenant.org, desk.tenant.namespace)
    return dataclasses.replace(ctx, agent=agent)


def decision(scenario: str, outcome: str) -> dpb.RecordDecisionRequest:
    return dpb.RecordDecisionRequest(category="storage", scenario=scenario, outcome=outcome, reasoning="replay needs them")


def rounds_of(rows: Rows, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The keys each call of `rows.append_many` (one a round) carried, as the rounds run."""
    seen: list[list[str]] = []
    append_many = rows.append_many

    async def noted(org: str, ns: str, writes: Sequence[RowWrite]) -> list[MemoryRow | LoomError]:
        seen.append([w.key for w in writes])
        return await append_many(org, ns, writes)

    monkeypatch.setattr(rows, "append_many", noted)
    return seen


async def test_a_burst_shares_rounds_and_a_pinned_row_refuses_its_write_alone(desk: Desk, monkeypatch: pytest.MonkeyPatch) -> None:
    rows: Rows = plane_of(desk).rows
    ops, pinner = DecisionOps(rows), caller(desk, "pinner")
    first = await ops.record(pinner, decision("retention of raw audio", "keep it 7 days"))
    await MemoryOps(rows).set_pin(pinner, first.memory_key, Ident("pinner", pinner.user, pinner.session), True)
    reader = desk.as_agent("reader")
    before = await reader.ok("memory.history", memory_key=first.memory_key)
    rounds = rounds_of(rows, monkeypatch)

    fresh = [ops.record(caller(desk, "planner"), decision(f"retention of raw video in region {i}", "keep it 30 days")) for i in range(8)]
    answers = await asyncio.gather(
        *fresh,
        ops.record(pinner, decision("retention of raw audio", "keep it 90 days")),
        ops.record(caller(desk, "planner"), decision("retention of raw video in region 9", " ")),
        return_exceptions=True,
    )
    landed, pinned, blank = answers[:8], answers[8], answers[9]
    assert isinstance(pinned, LoomError) and pinned.code == ErrorCode.PINNED_CONFLICT
    assert isinstance(blank, LoomError) and blank.code == ErrorCode.VALIDATION_FAILED
    assert all(isinstance(a, dpb.RecordDecisionResponse) and (a.version, a.created, a.superseded_prior) == (1, True, False) for a in landed)
    assert len({a.memory_key for a in landed if isinstance(a, dpb.RecordDecisionResponse)}) == 8
    assert max(len(r) for r in rounds) > 1, rounds  # the writes that queued went together
    assert await reader.ok("memory.history", memory_key=first.memory_key) == before  # the refused write wrote nothing
    for a in landed:
        assert isinstance(a, dpb.RecordDecisionResponse)
        hist = await reader.ok("memory.record.history", memory_key=a.memory_key)
        assert [int(r["version"]) for r in hist["records"]] == [1]


async def test_one_keys_writes_in_one_burst_get_consecutive_versions(desk: Desk) -> None:
    rows: Rows = plane_of(desk).rows
    decisions, memory = DecisionOps(rows), MemoryOps(rows)
    ctx = caller(desk, "planner")
    answers = await asyncio.gather(
        *(decisions.record(ctx, decision("retention of raw logs", f"keep them {d} days")) for d in (10, 20, 30, 40))
    )
    assert sorted(a.version for a in answers) == [1, 2, 3, 4]
    assert sorted(a.superseded_prior for a in answers) == [False, True, True, True]
    hist = await desk.as_agent("planner").ok("memory.record.history", memory_key=answers[0].memory_key)
    assert sorted(int(r["version"]) for r in hist["records"]) == [1, 2, 3, 4]

    sets = await asyncio.gather(
        *(memory.set(ctx, mpb.SetMemoryRequest(memory_key="runbook/drain", value=f"drain node {i} first")) for i in range(4)),
        memory.set(ctx, mpb.SetMemoryRequest(memory_key="runbook/other", value="page the secondary")),
    )
    assert sorted(s.version for s in sets[:4]) == [1, 2, 3, 4]
    assert sorted(s.created for s in sets[:4]) == [False, False, False, True]
    assert (sets[4].version, sets[4].created) == (1, True)


async def test_writers_that_write_again_once_answered_each_get_their_own_versions_through_lingering_rounds(
    desk: Desk, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows: Rows = plane_of(desk).rows
    ops = DecisionOps(rows)
    rounds = rounds_of(rows, monkeypatch)
    own_keys = [caller(desk, f"writer-{i}") for i in range(4)]
    shared = caller(desk, "shared-writer")  # two writers on one key under one identity

    async def writes(ctx: CallContext, scenario: str) -> list[dpb.RecordDecisionResponse]:
        answers = []
        for days in (10, 20, 30):
            answers.append(await ops.record(ctx, decision(scenario, f"keep them {days} days")))
            await asyncio.sleep(0)
        return answers

    mine = await asyncio.gather(
        *(writes(ctx, f"retention of raw metrics in region {i}") for i, ctx in enumerate(own_keys)),
        writes(shared, "retention of raw spans"),
        writes(shared, "retention of raw spans"),
    )
    for answers in mine[:4]:  # a key of its own: versions 1, 2, 3, each superseding the one before
        assert [a.version for a in answers] == [1, 2, 3]
        assert [a.superseded_prior for a in answers] == [False, True, True]
        assert len({a.memory_key for a in answers}) == 1
    one, two = mine[4], mine[5]
    assert sorted(a.version for a in one + two) == [1, 2, 3, 4, 5, 6]  # one key: every write its own version
    assert all(x.version < y.version for x, y in itertools.pairwise(one)) and all(x.version < y.version for x, y in itertools.pairwise(two))
    assert max(len(r) for r in rounds) > 1, rounds
    assert all(len(r) == len(set(r)) for r in rounds), rounds  # a round carries a key once


async def test_two_replicas_racing_on_one_key_never_share_a_version(desk: Desk) -> None:
    here: Rows = plane_of(desk).rows
    there = Rows(here.d)  # another replica: its own key locks, version counters' memo and caches
    ctx = caller(desk, "planner")
    a, b = DecisionOps(here), DecisionOps(there)
    answers = await asyncio.gather(
        *(
            ops.record(ctx, decision("retention of raw traces", f"keep them {i * 10 + j} days"))
            for i in range(3)
            for j, ops in enumerate((a, b))
        )
    )
    assert sorted(x.version for x in answers) == [1, 2, 3, 4, 5, 6]
    assert all(not x.restated for x in answers)  # six outcomes: each a new record version
    hist = await desk.as_agent("planner").ok("memory.record.history", memory_key=answers[0].memory_key)
    assert sorted(int(r["version"]) for r in hist["records"]) == [1, 2, 3, 4, 5, 6]

    sets = await asyncio.gather(
        *(
            ops.set(ctx, mpb.SetMemoryRequest(memory_key="runbook/race", value=f"drain node {i * 10 + j} first"))
            for i in range(3)
            for j, ops in enumerate((MemoryOps(here), MemoryOps(there)))
        )
    )
    assert sorted(s.version for s in sets) == [1, 2, 3, 4, 5, 6]


def test_float32_text_reads_back_as_the_same_float32_values() -> None:
    import numpy as np
    from loom_core import fastjson
    from loom_decisions.store.memory import float32_text

    vecs = np.random.default_rng(7).standard_normal((3, 384)).astype(np.float32)
    as_floats = [[float(x) for x in v] for v in vecs]  # what a round holds: float32 values as Python floats
    assert np.array_equal(np.asarray(fastjson.loads(float32_text(as_floats)), dtype=np.float32), vecs)


async def test_the_rounds_conflict_scan_finds_a_stored_decision_at_its_own_vector(desk: Desk) -> None:
    """The scan's vectors go to chDB as float32 text bound once: a stored decision's own
    statement, embedded again, is found first at similarity 1 (the same Float32 values)."""
    rows: Rows = plane_of(desk).rows
    ops, who = DecisionOps(rows), caller(desk, "scanner")
    a = await ops.record(who, decision("retention of raw transcripts", "keep them 30 days"))
    b = await ops.record(who, decision("sharding of the events table", "shard by tenant"))
    vecs = await rows.d.embedder.embed([a.statement, b.statement])
    org, ns = who.org, who.namespace
    found = await rows.mem.nearest_decisions_exact_many((org, ns, 2), [[float(x) for x in v] for v in vecs])
    assert [hits[0][0] for hits in found] == [a.memory_key, b.memory_key]
    assert all(hits[0][1] == pytest.approx(1.0, abs=1e-5) for hits in found)


async def test_a_round_of_several_writes_gives_a_small_namespace_its_cache_and_later_conflict_checks_read_it(
    desk: Desk, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A round of CACHE_ROUND_WRITES writes or more warms the namespace's vector cache though the
    namespace is far under LOOM_MEMORY_VECTOR_CACHE_MIN_ROWS; once built, a round's conflict
    check reads it instead of scanning the store, and flags the same decisions the scan does."""
    from loom_decisions.service.rows import CACHE_ROUND_WRITES

    rows: Rows = plane_of(desk).rows
    ops = DecisionOps(rows)
    org, ns = desk.tenant.org, desk.tenant.namespace
    await ops.record(caller(desk, "alone"), decision("retention of raw spans", "keep them 30 days"))
    assert rows.vectors.state(org, ns) == "none"  # a round of one: the store's scan, no cache

    burst = [caller(desk, f"writer-{i}") for i in range(CACHE_ROUND_WRITES + 4)]
    await asyncio.gather(
        *(ops.record(ctx, decision(f"retention of raw metrics in region {i}", "keep them 30 days")) for i, ctx in enumerate(burst))
    )
    assert rows.vectors.state(org, ns) != "none"
    await rows.vectors.wait_ready(org, ns)

    scans: list[int] = []
    scan = rows.mem.nearest_decisions_exact_many

    async def counted(where: tuple[str, str, int], vectors: list[list[float]]) -> list[list[tuple[str, float]]]:
        scans.append(len(vectors))
        return await scan(where, vectors)

    monkeypatch.setattr(rows.mem, "nearest_decisions_exact_many", counted)
    again = await asyncio.gather(
        ops.record(caller(desk, "late"), decision("retention of raw spans everywhere", "keep them 30 days")),
        ops.record(caller(desk, "later"), decision("retention of raw metrics in region 1 too", "keep them 30 days")),
    )
    assert scans == []  # the cache answered the conflict checks
    assert "decision/storage/retention-of-raw-spans" in again[0].conflicts, again[0]
    assert "decision/storage/retention-of-raw-metrics-in-region-1" in again[1].conflicts, again[1]

"""Writes that arrive together share their store reads, conflict scan and inserts
(loom_core.batching): each still reads what the writes before it left, and gets the answer it
would alone. Over REST, many calls at once."""

from __future__ import annotations

import asyncio

from .conftest import Desk


async def test_concurrent_memory_sets_each_get_their_own_version_and_restatement(desk: Desk) -> None:
    a, b = desk.as_agent("alpha"), desk.as_agent("beta")
    first = await a.ok("memory.set", memory_key="runbook/pager", value="page the on-call at 02:00")
    # At once: two writers on ten fresh keys, the same writer revising one key four times,
    # another restating it, and a third identity writing beside them.
    fresh = [a.ok("memory.set", memory_key=f"runbook/step-{i}", value=f"step {i} drains node {i}") for i in range(10)]
    revisions = [a.ok("memory.set", memory_key="runbook/pager", value=f"page the on-call at 0{i}:30") for i in range(4)]
    beside = [b.ok("memory.set", memory_key="runbook/pager", value="beta pages the secondary")]
    answers = await asyncio.gather(*fresh, *revisions, *beside)
    made, revised, other = answers[:10], answers[10:14], answers[14]
    assert all(m["version"] == 1 and m["created"] and not m["restated"] for m in made)
    assert sorted(r["version"] for r in revised) == [2, 3, 4, 5]  # one number each, after the first
    assert not any(r["created"] or r["restated"] for r in revised)
    assert (other["version"], other["created"]) == (1, True)  # beta's row is its own, versions apart
    assert first["version"] == 1

    # The key lock still orders one writer's writes: the head is the revision that took version 5.
    last = next(r for r in revised if r["version"] == 5)
    head = await a.ok("memory.get", memory_key="runbook/pager", agent_id="alpha")
    assert (head["version"], head["value_hash"]) == (5, last["value_hash"])
    again = await asyncio.gather(*(a.ok("memory.set", memory_key="runbook/pager", value=head["value"]) for _ in range(3)))
    assert all(x["restated"] and not x["created"] for x in again)  # the same bytes, read through the shared head reads
    assert sorted(x["reinforcements"] for x in again) == [1, 2, 3]
    hist = await a.ok("memory.history", memory_key="runbook/pager", agent_id="alpha")
    assert sorted(int(v["version"]) for v in hist["versions"]) == list(range(1, 9))


async def test_concurrent_decisions_supersede_in_order_and_flag_each_other(desk: Desk) -> None:
    a = desk.as_agent("planner")
    base = {"category": "storage", "reasoning": "replay needs them"}
    # Ten decisions on ten keys at once, and four revisions of one key at once.
    many = [
        a.ok("decision.record", **base, scenario=f"retention for raw transcripts of region {i}", outcome="keep them 30 days")
        for i in range(10)
    ]
    same = [
        a.ok("decision.record", **base, scenario="retention for raw transcripts of region 0", outcome=f"keep them {d} days")
        for d in (40, 50, 60)
    ]
    answers = await asyncio.gather(*many, *same)
    keys = {r["memory_key"] for r in answers}
    assert len(keys) == 10
    region0 = [r for r in answers if r["memory_key"].endswith("region-0")]
    assert sorted(r["version"] for r in region0) == [1, 2, 3, 4]
    assert sorted(r["superseded_prior"] for r in region0) == [False, True, True, True]
    # The shared conflict scan still flags near-identical decisions under other keys, once the
    # other key's row is stored: a later write sees the earlier ones.
    later = await a.ok("decision.record", **base, scenario="retention for raw transcripts of region 10", outcome="keep them 30 days")
    assert later["conflicts"], later
    history = await a.ok("memory.record.history", memory_key=region0[0]["memory_key"])
    assert sorted(int(r["version"]) for r in history["records"]) == [1, 2, 3, 4]

"""decision.calibration, and the decision ops through the Python SDK as the spec writes them."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from loom import Agent, ConflictError, LockedError, LoomError

from tests.conftest import Tenant

from .conftest import STORAGE, Desk


async def test_calibration_scores_stated_confidence_against_outcomes(desk: Desk) -> None:
    bold = desk.as_agent("bold")
    careful = desk.as_agent("careful")
    for i, (conf, ok) in enumerate([(0.9, True), (0.9, False), (0.9, False)]):
        rec = await bold.ok("decision.record", category="vendor", scenario=f"vendor pick {i}", outcome="A", confidence=conf)
        await bold.ok("decision.outcome", memory_key=rec["memory_key"], realized_outcome="done", success=ok)
    for i, (conf, ok) in enumerate([(0.6, True), (0.6, True)]):
        rec = await careful.ok("decision.record", category="vendor", scenario=f"careful pick {i}", outcome="B", confidence=conf)
        await careful.ok("decision.outcome", memory_key=rec["memory_key"], realized_outcome="done", success=ok)
    unscored = await careful.ok("decision.record", category="vendor", scenario="no confidence stated", outcome="C")
    await careful.ok("decision.outcome", memory_key=unscored["memory_key"], realized_outcome="done", success=True)
    await careful.ok("decision.record", category="vendor", scenario="not acted on yet", outcome="D", confidence=0.7)

    out = await careful.ok("decision.calibration", window_days=30)
    rows = {r["agent"]: r for r in out["rows"]}
    assert (rows["bold"]["count"], rows["bold"]["successes"]) == (3, 1)
    assert rows["bold"]["brier"] == pytest.approx((0.01 + 0.81 + 0.81) / 3)
    assert rows["bold"]["overconfidence"] == pytest.approx(0.9 - 1 / 3)
    assert rows["careful"]["brier"] == pytest.approx(0.16)
    assert out["unscored"] == 1
    only = await careful.ok("decision.calibration", agent="bold", category="vendor")
    assert [r["agent"] for r in only["rows"]] == ["bold"] and only["window_days"] == 90
    await careful.refused(422, "VALIDATION_FAILED", "decision.calibration", window_days=4000)


@pytest.fixture
async def agent(tenant: Tenant) -> AsyncIterator[Agent]:
    async with Agent(org=tenant.org, namespace=tenant.namespace, agent="planner", api_key=tenant.token, base_url=tenant.base_url) as a:
        yield a


async def test_the_spec_example_runs_as_written(agent: Agent) -> None:
    rec = await agent.decision.record(
        category="storage",
        scenario="retention for raw transcripts in the support namespace",
        reasoning="Replay needs 30 days; legal hold is handled by export, not by retention.",
        outcome="keep transcripts 30 days",
        alternatives=["keep forever", "7 days"],
        confidence=0.8,
        influenced_by=["policy/legal/hold"],
    )
    prior = await agent.decision.precedents("how long do we keep transcripts?", category="storage")
    await agent.decision.outcome(rec["memory_key"], "no replay gaps in the quarter", success=True)

    assert prior[0]["memory_key"] == rec["memory_key"]
    row = await agent.ops.memory.get(memory_key=rec["memory_key"])
    assert row["value"].endswith("Realized: no replay gaps in the quarter.")
    chain = await agent.decision.chain(rec["memory_key"], direction="upstream")
    assert [e["from_key"] for e in chain["edges"]] == ["policy/legal/hold"]
    assert (await agent.decision.calibration())[0]["count"] == 1


async def test_sdk_refusals_carry_their_codes(agent: Agent) -> None:
    with pytest.raises(LoomError) as missing:
        await agent.decision.record(category="storage", scenario="?!", outcome="x")
    assert (missing.value.code, missing.value.status) == ("MISSING_IDENTITY_FIELD", 400)

    rec = await agent.decision.record(**STORAGE)  # type: ignore[arg-type]
    await agent.ops.memory.pin(memory_key=rec["memory_key"])
    with pytest.raises(ConflictError) as pinned:
        await agent.decision.record(**{**STORAGE, "outcome": "keep transcripts 90 days"})  # type: ignore[arg-type]
    assert pinned.value.code == "PINNED_CONFLICT"

    await agent.ops.memory.lock(memory_key=rec["memory_key"], ttl_seconds=30)
    with pytest.raises(LockedError):
        await agent.decision.outcome(rec["memory_key"], "no gaps", success=True)
    await agent.ops.memory.unlock(memory_key=rec["memory_key"])
    out = await agent.decision.outcome(rec["memory_key"], "no gaps", success=True)
    assert out["success"] is True

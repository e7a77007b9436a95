"""decision.outcome: the realized statement, credits and charges through the deciding run's
exposures, the stage and the pin, and its conditional write (409, 423, 503)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from loom_core.bus import LeaseStore
from loom_decisions.service.rows import WRITE_PREFIX, lease_key
from loom_runner.embedded import Instance

from .conftest import STORAGE, Desk

KEY = "decision/storage/retention-for-raw-transcripts-in-the-support-namespace"


async def seed_notes(desk: Desk) -> None:
    w = desk.as_agent("librarian")
    for key, value in (
        ("policy/legal/hold", "Legal hold is served by export jobs."),
        ("ops/replay", "Replays read up to 30 days of transcripts."),
        ("unused", "The office plants are watered on Fridays."),
    ):
        await w.ok("decision.record", category="notes", scenario=key, outcome=value)


async def test_outcome_credits_only_the_memories_the_decision_used_of_those_its_run_was_shown(desk: Desk) -> None:
    await seed_notes(desk)
    run = uuid.uuid4().hex
    a = desk.as_agent("planner", run_id=run)
    hold = "decision/notes/policy-legal-hold"
    replay = "decision/notes/ops-replay"
    await a.ok("memory.get", memory_key=hold)
    hits = await a.ok("memory.search", query="how far back can a replay go", memory_type="decision", limit=1)
    assert hits["hits"][0]["key"] == replay
    await a.ok("memory.get", memory_key="decision/notes/unused")  # shown, but the decision does not use it
    rec = await a.ok("decision.record", **STORAGE, memories_used=[hold, replay])
    later = desk.as_agent("planner")  # the outcome arrives in another run
    out = await later.ok("decision.outcome", memory_key=rec["memory_key"], realized_outcome="no replay gaps in the quarter", success=True)
    assert out["credited"] == sorted([hold, replay]) and out.get("charged", []) == []
    assert (await later.ok("memory.get", memory_key=hold))["credits"] == 1


async def test_a_failed_outcome_charges_them(desk: Desk) -> None:
    await seed_notes(desk)
    run = uuid.uuid4().hex
    a = desk.as_agent("planner", run_id=run)
    await a.ok("memory.get", memory_key="decision/notes/ops-replay")
    await a.ok("decision.record", **STORAGE, memories_used=["decision/notes/ops-replay"])
    out = await a.ok("decision.outcome", memory_key=KEY, realized_outcome="replays failed past day 20", success=False)
    assert out["charged"] == ["decision/notes/ops-replay"]
    assert (await a.ok("memory.get", memory_key="decision/notes/ops-replay"))["charges"] == 1


async def test_outcome_rebuilds_the_statement_drops_the_proposal_and_keeps_the_pin(desk: Desk) -> None:
    a = desk.as_agent("planner")
    await a.ok("decision.record", **{**STORAGE, "stage": "proposed", "files": ["ops/retention.yaml"], "tags": ["team:support"]})
    await a.ok("memory.pin", memory_key=KEY)
    out = await a.ok("decision.outcome", memory_key=KEY, realized_outcome="no replay gaps in the quarter", success=True)
    assert out["stage"] == "decided"
    assert out["statement"] == (
        "retention for raw transcripts in the support namespace. Decided keep transcripts 30 days because Replay needs 30 days; "
        "legal hold is handled by export, not by retention. Rejected: keep forever; 7 days. Realized: no replay gaps in the quarter."
    )
    row = await a.ok("memory.get", memory_key=KEY)
    assert row["pinned"] is True
    assert set(row["tags"]) == {"team:support", "decision:category:storage"}
    assert row["files"] == ["ops/retention.yaml"]
    prior = await a.ok("decision.precedents", query="transcript retention", with_outcome_only=True)
    assert [(p["memory_key"], p["stage"], p["success"]) for p in prior["precedents"]] == [(KEY, "decided", True)]


async def test_outcome_without_success_keeps_the_records_verdict(desk: Desk) -> None:
    a = desk.as_agent("planner")
    await a.ok("decision.record", **STORAGE)
    await a.ok("decision.outcome", memory_key=KEY, realized_outcome="no gaps", success=True)
    out = await a.ok("decision.outcome", memory_key=KEY, realized_outcome="no gaps in two quarters")
    assert out["success"] is True
    assert (await a.ok("memory.history", memory_key=KEY))["records"][0]["success"] is True


async def test_the_same_outcome_again_is_a_restatement(desk: Desk) -> None:
    a = desk.as_agent("planner")
    await a.ok("decision.record", **STORAGE)
    await a.ok("decision.outcome", memory_key=KEY, realized_outcome="no gaps", success=True)
    again = await a.ok("decision.outcome", memory_key=KEY, realized_outcome="no gaps", success=True)
    assert again["restated"] is True


async def test_a_new_record_does_not_carry_the_earlier_outcome_over(desk: Desk) -> None:
    a = desk.as_agent("planner")
    await a.ok("decision.record", **STORAGE)
    await a.ok("decision.outcome", memory_key=KEY, realized_outcome="no gaps", success=True)
    await a.ok("decision.record", **{**STORAGE, "outcome": "keep transcripts 60 days"})
    rec = (await a.ok("memory.history", memory_key=KEY))["records"][0]
    assert rec["realized_outcome"] == "" and rec.get("success") is None
    assert "Realized" not in (await a.ok("memory.get", memory_key=KEY))["value"]


async def test_outcome_of_an_unknown_key_is_not_found(desk: Desk) -> None:
    a = desk.as_agent("planner")
    await a.refused(404, "RESOURCE_NOT_FOUND", "decision.outcome", memory_key="decision/none/nothing", realized_outcome="x")


async def test_outcome_while_another_conditional_write_holds_the_key_is_409(desk: Desk) -> None:
    a = desk.as_agent("planner")
    await a.ok("decision.record", **STORAGE)
    leases = desk.inst.runtime.leases
    lease = await leases.acquire(lease_key(desk.tenant.org, desk.tenant.namespace, KEY), WRITE_PREFIX + "another-call", 30)
    try:
        await a.refused(409, "PRECONDITION_FAILED", "decision.outcome", memory_key=KEY, realized_outcome="no gaps", success=True)
    finally:
        await leases.release(lease)
    assert "Realized" not in (await a.ok("memory.get", memory_key=KEY))["value"]
    await a.ok("decision.outcome", memory_key=KEY, realized_outcome="no gaps", success=True)


async def test_outcome_on_a_locked_key_is_423(desk: Desk) -> None:
    a = desk.as_agent("planner")
    await a.ok("decision.record", **STORAGE)
    await a.ok("memory.lock", memory_key=KEY, ttl_seconds=30)
    await a.refused(423, "LOCKED", "decision.outcome", memory_key=KEY, realized_outcome="no gaps")
    await a.ok("memory.unlock", memory_key=KEY)


class _DeadKV:
    """A NATS KV bucket whose server is gone: every call fails as a lost connection does."""

    def __getattr__(self, name: str) -> Any:
        async def fail(*_a: Any, **_k: Any) -> Any:
            raise ConnectionError("nats: connection closed")

        return fail


async def test_outcome_answers_503_when_the_lease_store_is_unreachable(
    desk: Desk, stack: Instance, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = desk.as_agent("planner")
    await a.ok("decision.record", **STORAGE)
    plane = next(p for p in stack.planes if getattr(p, "name", "") == "decisions")
    monkeypatch.setattr(plane.rows.d, "leases", LeaseStore(_DeadKV()))  # type: ignore[arg-type]
    await a.refused(503, "BACKEND_UNAVAILABLE", "decision.outcome", memory_key=KEY, realized_outcome="no gaps", success=True)
    monkeypatch.undo()
    assert "Realized" not in (await a.ok("memory.get", memory_key=KEY))["value"]


async def test_outcome_answers_409_when_the_decision_changes_during_the_call(
    desk: Desk, stack: Instance, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = desk.as_agent("planner")
    await a.ok("decision.record", **STORAGE)
    plane = next(p for p in stack.planes if getattr(p, "name", "") == "decisions")
    embedder = plane.rows.d.embedder
    real = embedder.embed_one
    fired: list[dict[str, Any]] = []

    async def embed_then_rerecord(text: str) -> list[float]:
        # The outcome has read the row and is embedding its new statement: the writer decides again now.
        if text.endswith("Realized: no gaps.") and not fired:
            fired.append(await a.ok("decision.record", **{**STORAGE, "outcome": "keep transcripts 60 days"}))
        return await real(text)

    monkeypatch.setattr(embedder, "embed_one", embed_then_rerecord)
    await a.refused(409, "PRECONDITION_FAILED", "decision.outcome", memory_key=KEY, realized_outcome="no gaps", success=True)
    monkeypatch.undo()
    assert fired and fired[0]["superseded_prior"] is True
    row = await a.ok("memory.get", memory_key=KEY)
    assert "60 days" in row["value"] and "Realized" not in row["value"]


async def test_a_later_failure_of_the_same_decision_undoes_its_credit_and_calibration_reads_the_correction(desk: Desk) -> None:
    await seed_notes(desk)
    run = uuid.uuid4().hex
    a = desk.as_agent("planner", run_id=run)
    replay = "decision/notes/ops-replay"
    await a.ok("memory.get", memory_key=replay)
    await a.ok("decision.record", **{**STORAGE, "influenced_by": []}, memories_used=[replay])
    first = await a.ok("decision.outcome", memory_key=KEY, realized_outcome="no gaps in the first week", success=True)
    assert first["credited"] == [replay]
    r = await a.ok("memory.get", memory_key=replay)
    assert (r["credits"], r.get("charges", 0)) == (1, 0)
    cal = await a.ok("decision.calibration", agent="planner", category="storage")
    assert (cal["rows"][0]["count"], cal["rows"][0]["successes"]) == (1, 1)

    later = await a.ok("decision.outcome", memory_key=KEY, realized_outcome="replays failed past day 20", success=False)
    assert later["uncredited"] == [replay] and later["charged"] == [replay] and later.get("credited", []) == []
    r = await a.ok("memory.get", memory_key=replay)
    assert (r.get("credits", 0), r["charges"]) == (0, 1)
    cal = await a.ok("decision.calibration", agent="planner", category="storage")
    row = cal["rows"][0]  # an answer leaves out a field at its zero value
    assert (row["count"], row.get("successes", 0), row.get("success_rate", 0.0)) == (1, 0, 0.0)


async def test_a_decision_that_names_no_memory_credits_none(desk: Desk) -> None:
    await seed_notes(desk)
    a = desk.as_agent("planner", run_id=uuid.uuid4().hex)
    await a.ok("memory.get", memory_key="decision/notes/ops-replay")
    await a.ok("decision.record", **{**STORAGE, "influenced_by": []})
    out = await a.ok("decision.outcome", memory_key=KEY, realized_outcome="no gaps", success=True)
    assert out.get("credited", []) == [] and (await a.ok("memory.get", memory_key="decision/notes/ops-replay")).get("credits", 0) == 0

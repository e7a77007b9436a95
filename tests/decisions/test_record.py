"""decision.record over REST: the row, the key, supersede, restatement, pins, locks,
attestation and conflict flagging (spec 003, Decisions)."""

from __future__ import annotations

from .conftest import STORAGE, Desk

KEY = "decision/storage/retention-for-raw-transcripts-in-the-support-namespace"


async def test_record_writes_a_decision_row_under_the_derived_key(desk: Desk) -> None:
    a = desk.as_agent("planner")
    rec = await a.ok("decision.record", **STORAGE)
    assert (rec["memory_key"], rec["created"], rec["superseded_prior"], rec["restated"], rec["stage"]) == (
        KEY,
        True,
        False,
        False,
        "decided",
    )
    row = await a.ok("memory.get", memory_key=KEY)
    assert row["memory_type"] == "decision"
    assert row["tags"] == ["decision:category:storage"]
    assert row["pinned"] is False
    assert row["agent_id"] == "planner"
    assert "storage" not in row["value"].split(".")[0]  # the category is not in the statement
    hist = await a.ok("memory.history", memory_key=KEY)
    assert [r["status"] for r in hist["records"]] == ["active"]
    assert hist["records"][0]["category"] == "storage"


async def test_record_writes_an_edge_from_each_cause_and_influence(desk: Desk) -> None:
    a = desk.as_agent("planner")
    await a.ok("decision.record", **{**STORAGE, "caused_by": ["incident/2026-11-replay-gap"]})
    chain = await a.ok("decision.chain", memory_key=KEY, direction="upstream")
    edges = {(e["from_key"], e["kind"]) for e in chain["edges"]}
    assert edges == {("policy/legal/hold", "influenced_by"), ("incident/2026-11-replay-gap", "caused_by")}


async def test_a_category_or_scenario_without_a_letter_or_digit_is_refused(desk: Desk) -> None:
    a = desk.as_agent("planner")
    err = await a.refused(400, "MISSING_IDENTITY_FIELD", "decision.record", **{**STORAGE, "category": "!!! ???"})
    assert err["detail"]["field"] == "category"
    err = await a.refused(400, "MISSING_IDENTITY_FIELD", "decision.record", **{**STORAGE, "scenario": "— … ✓"})
    assert err["detail"]["field"] == "scenario"


async def test_a_scenario_in_any_script_records(desk: Desk) -> None:
    a = desk.as_agent("planner")
    rec = await a.ok(
        "decision.record",
        category="保存",
        scenario="サポートの生ログを何日保存するか",
        outcome="三十日保存する",
        reasoning="再生に三十日必要",
    )
    assert rec["memory_key"] == "decision/保存/サポートの生ログを何日保存するか"
    assert (await a.ok("memory.get", memory_key=rec["memory_key"]))["value"].startswith(
        "サポートの生ログを何日保存するか. Decided 三十日保存する because"
    )


async def test_parts_past_their_limits_are_refused_and_long_alternatives_are_cut(desk: Desk) -> None:
    a = desk.as_agent("planner")
    await a.refused(422, "VALIDATION_FAILED", "decision.record", **{**STORAGE, "scenario": "s" * 2001})
    await a.refused(422, "VALIDATION_FAILED", "decision.record", **{**STORAGE, "outcome": "o" * 1001})
    await a.refused(422, "VALIDATION_FAILED", "decision.record", **{**STORAGE, "reasoning": "r" * 4001})
    await a.refused(422, "VALIDATION_FAILED", "decision.record", **{**STORAGE, "alternatives": [f"alt {i}" for i in range(11)]})
    long_alt = "move to " + " ".join(f"services/archive/shard_{i}.py" for i in range(30))
    rec = await a.ok("decision.record", **{**STORAGE, "alternatives": [long_alt]})
    rejected = rec["statement"].split("Rejected: ", 1)[1]
    assert rejected.endswith("…") and len(rejected) <= 300
    assert long_alt.startswith(rejected[:-1]) and long_alt[len(rejected) - 1] == " "


async def test_the_reasoning_restating_the_outcome_reads_as_a_bare_decision(desk: Desk) -> None:
    a = desk.as_agent("planner")
    rec = await a.ok(
        "decision.record",
        category="security",
        scenario="tokens in logs",
        outcome="Never log bearer tokens",
        reasoning="never log bearer tokens.",
    )
    assert rec["statement"] == "tokens in logs. Decided Never log bearer tokens."


async def test_deciding_the_same_scenario_again_supersedes_and_history_keeps_the_prior(desk: Desk) -> None:
    a = desk.as_agent("planner")
    await a.ok("decision.record", **STORAGE)
    again = await a.ok(
        "decision.record",
        **{**STORAGE, "scenario": "Retention for RAW transcripts in the support namespace.", "outcome": "keep transcripts 45 days"},
    )
    assert again["memory_key"] == KEY
    assert (again["created"], again["superseded_prior"], again["restated"]) == (False, True, False)
    hist = await a.ok("memory.history", memory_key=KEY)
    assert [r["status"] for r in hist["records"]] == ["active", "superseded"]
    assert [r["outcome"] for r in hist["records"]] == ["keep transcripts 45 days", "keep transcripts 30 days"]
    assert len(hist["versions"]) == 2
    assert "45 days" in (await a.ok("memory.get", memory_key=KEY))["value"]


async def test_a_word_for_word_re_record_is_a_restatement_that_reinforces_the_row(desk: Desk) -> None:
    a = desk.as_agent("planner")
    await a.ok("decision.record", **STORAGE)
    again = await a.ok("decision.record", **STORAGE)
    assert (again["created"], again["superseded_prior"], again["restated"]) == (False, False, True)
    row = await a.ok("memory.get", memory_key=KEY)
    assert row["reinforcements"] == 1
    hist = await a.ok("memory.history", memory_key=KEY)
    assert [r["status"] for r in hist["records"]] == ["active"]


async def test_a_proposal_carries_the_proposed_tag_and_reads_proposed(desk: Desk) -> None:
    a = desk.as_agent("planner")
    rec = await a.ok("decision.record", **{**STORAGE, "stage": "proposed", "tags": ["team:support"]})
    assert rec["statement"].startswith("retention for raw transcripts in the support namespace. Proposed keep transcripts 30 days because")
    row = await a.ok("memory.get", memory_key=KEY)
    assert set(row["tags"]) == {"team:support", "decision:category:storage", "decision:proposed"}
    prior = await a.ok("decision.precedents", query="how long are support transcripts kept", category="storage")
    assert prior["precedents"][0]["stage"] == "proposed"
    decided = await a.ok("decision.record", **{**STORAGE, "stage": "decided", "tags": ["decision:proposed"]})
    assert decided["stage"] == "decided" and "decision:proposed" not in (await a.ok("memory.get", memory_key=KEY))["tags"]


async def test_an_unknown_stage_or_confidence_out_of_range_is_refused(desk: Desk) -> None:
    a = desk.as_agent("planner")
    await a.refused(422, "VALIDATION_FAILED", "decision.record", **{**STORAGE, "stage": "maybe"})
    await a.refused(422, "VALIDATION_FAILED", "decision.record", **{**STORAGE, "confidence": 1.5})


async def test_a_locked_row_refuses_record_with_423_until_released(desk: Desk) -> None:
    a = desk.as_agent("planner")
    await a.ok("decision.record", **STORAGE)
    lock = await a.ok("memory.lock", memory_key=KEY, ttl_seconds=60)
    assert lock["locked"] is True
    await a.refused(423, "LOCKED", "decision.record", **{**STORAGE, "outcome": "keep transcripts 60 days"})
    assert (await a.ok("memory.get", memory_key=KEY))["locked"] is True
    await a.ok("memory.unlock", memory_key=KEY)
    assert (await a.ok("decision.record", **{**STORAGE, "outcome": "keep transcripts 60 days"}))["superseded_prior"] is True


async def test_only_the_holder_or_an_admin_releases_a_lock(desk: Desk) -> None:
    owner = desk.as_agent("planner")
    await owner.ok("memory.lock", memory_key="notes/locked", ttl_seconds=60)
    other = desk.as_agent("other-writer", role="writer")
    await desk.grant("other-writer", "writer")
    await other.refused(403, "AUTH_INSUFFICIENT", "memory.unlock", memory_key="notes/locked")
    await other.refused(409, "PRECONDITION_FAILED", "memory.lock", memory_key="notes/locked", ttl_seconds=60)
    await owner.ok("memory.unlock", memory_key="notes/locked")


async def test_a_pinned_writer_row_refuses_a_different_decision_and_writes_nothing(desk: Desk) -> None:
    a = desk.as_agent("planner")
    await a.ok("decision.record", **STORAGE)
    await a.ok("memory.pin", memory_key=KEY)
    before = await a.ok("memory.history", memory_key=KEY)
    await a.refused(409, "PINNED_CONFLICT", "decision.record", **{**STORAGE, "outcome": "keep transcripts 90 days"})
    after = await a.ok("memory.history", memory_key=KEY)
    assert after == before
    # The same decision word for word is a restatement, which a pinned row accepts.
    assert (await a.ok("decision.record", **STORAGE))["restated"] is True
    assert (await a.ok("memory.get", memory_key=KEY, agent_id="planner"))["pinned"] is True


async def test_the_pin_guards_only_its_writers_row(desk: Desk) -> None:
    a = desk.as_agent("planner")
    await a.ok("decision.record", **STORAGE)
    await a.ok("memory.pin", memory_key=KEY)
    b = desk.as_agent("auditor")
    other = await b.ok("decision.record", **{**STORAGE, "outcome": "keep transcripts 14 days"})
    assert (other["created"], other["superseded_prior"]) == (True, True)
    hist = await a.ok("memory.history", memory_key=KEY)
    assert hist["records"][0]["agent_id"] == "auditor" and hist["records"][0]["status"] == "active"
    assert (await a.ok("memory.get", memory_key=KEY, agent_id="planner"))["pinned"] is True


async def test_an_admin_unpins_and_then_the_writer_decides_otherwise(desk: Desk) -> None:
    await desk.grant("planner", "writer")
    w = desk.as_agent("planner", role="writer")
    await w.ok("decision.record", **STORAGE)
    await w.ok("memory.pin", memory_key=KEY)
    await w.refused(403, "AUTH_INSUFFICIENT", "memory.unpin", memory_key=KEY)
    admin = desk.as_agent("admin")
    await admin.ok("memory.unpin", memory_key=KEY, agent_id="planner", user_id="", session_id="")
    rec = await w.ok("decision.record", **{**STORAGE, "outcome": "keep transcripts 90 days"})
    assert rec["superseded_prior"] is True


async def test_an_attested_row_takes_the_write_and_reads_stale_until_verified(desk: Desk) -> None:
    a = desk.as_agent("planner")
    await a.ok("decision.record", **STORAGE)
    v = await a.ok("memory.verify", memory_key=KEY)
    assert v["attestation"] == "current"
    rec = await a.ok("decision.record", **{**STORAGE, "outcome": "keep transcripts 40 days"})
    assert rec["superseded_prior"] is True
    assert (await a.ok("memory.get", memory_key=KEY))["attestation"] == "stale"
    await a.ok("memory.verify", memory_key=KEY)
    assert (await a.ok("memory.get", memory_key=KEY))["attestation"] == "current"


async def test_a_close_decision_under_another_key_is_flagged_never_merged(desk: Desk) -> None:
    a = desk.as_agent("planner")
    first = await a.ok("decision.record", **STORAGE)
    close = await a.ok(
        "decision.record",
        **{**STORAGE, "category": "retention", "scenario": "retention of raw transcripts in the support namespace"},
    )
    assert close["memory_key"] != first["memory_key"]
    assert close["conflicts"] == [first["memory_key"]]
    assert close["created"] is True and close["superseded_prior"] is False
    assert (await a.ok("memory.get", memory_key=first["memory_key"]))["value"] == first["statement"]
    far = await a.ok("decision.record", category="build", scenario="which CI runner builds the wheels", outcome="GitHub-hosted runners")
    assert far.get("conflicts", []) == []


async def test_a_deleted_decision_is_not_flagged_by_the_live_version_before_it(desk: Desk) -> None:
    """The conflict check reads each row's newest version: the live one a delete superseded is
    still stored (until a merge, in its own part) and must not count."""
    a = desk.as_agent("planner")
    first = await a.ok("decision.record", **STORAGE)
    await a.ok("memory.delete", memory_key=first["memory_key"])
    close = await a.ok(
        "decision.record",
        **{**STORAGE, "category": "retention", "scenario": "retention of raw transcripts in the support namespace"},
    )
    assert close["memory_key"] != first["memory_key"]
    assert close.get("conflicts", []) == []


async def test_a_viewer_reads_but_does_not_record(desk: Desk) -> None:
    await desk.as_agent("planner").ok("decision.record", **STORAGE)
    await desk.grant("reader", "viewer")
    v = desk.as_agent("reader", role="viewer")
    await v.refused(403, "AUTH_INSUFFICIENT", "decision.record", **STORAGE)
    assert (await v.ok("decision.precedents", query="transcript retention"))["precedents"]
    await v.ok("memory.get", memory_key=KEY)

"""The memory surface decisions stand on (spec 003, Decisions: Files, Source, restatement,
pins): memory.set, memory.for_file and context.pack, and long values stored as chunks that
memory.search reads."""

from __future__ import annotations

import pytest

from tests.conftest import call, unique

from .conftest import STORAGE, Desk

KEY = "decision/storage/retention-for-raw-transcripts-in-the-support-namespace"
ROWS_PY = "services/decisions/loom_decisions/service/rows.py"


# --- memory.set


async def test_set_writes_restates_by_bytes_and_revises(desk: Desk) -> None:
    a = desk.as_agent("planner")
    first = await a.ok(
        "memory.set",
        memory_key="notes/replay",
        value="Replays read 30 days.",
        tags=["team:support"],
        source_resource_id="knowledge:support/runbook.md#Replay",
        source_class="derived",
    )
    assert (first["created"], first.get("restated", False), first["version"]) == (True, False, 1)
    again = await a.ok("memory.set", memory_key="notes/replay", value="Replays read 30 days.")
    assert (again.get("created", False), again["restated"], again["reinforcements"]) == (False, True, 1)
    # One byte differs: a revision, not a restatement.
    revised = await a.ok("memory.set", memory_key="notes/replay", value="Replays read 30 days")
    assert revised.get("restated", False) is False and revised["version"] == 3
    row = await a.ok("memory.get", memory_key="notes/replay")
    assert (row["value"], row["memory_type"], row["version"]) == ("Replays read 30 days", "note", 3)
    history = await a.ok("memory.history", memory_key="notes/replay")
    assert [v["op"] for v in history["versions"]] == ["memory.set"] * 3
    assert first["value_hash"] != revised["value_hash"]


async def test_set_stores_source_and_files_given_or_detected(desk: Desk) -> None:
    a = desk.as_agent("planner")
    await a.ok(
        "memory.set",
        memory_key="notes/source",
        value="See the runbook.",
        files=["ops/retention.yaml"],
        source_resource_id="knowledge:support/runbook.md#Replay",
        source_class="derived",
    )
    row = await a.ok("memory.get", memory_key="notes/source")
    assert (row["files"], row["source_resource_id"], row["source_class"]) == (
        ["ops/retention.yaml"],
        "knowledge:support/runbook.md#Replay",
        "derived",
    )
    out = await a.ok(
        "memory.set",
        memory_key="notes/detected",
        value="Rows are versioned in loom_decisions.service.rows; the schema is src/Storages/MergeTreeData.cpp (see https://example.com/a/b.py).",
    )
    assert out["files"] == ["loom_decisions/service/rows.py", "src/Storages/MergeTreeData.cpp"]


async def test_set_honours_pins_and_locks(desk: Desk) -> None:
    a = desk.as_agent("planner")
    await a.ok("memory.set", memory_key="notes/pinned", value="Never delete audit rows.")
    await a.ok("memory.pin", memory_key="notes/pinned")
    await a.refused(409, "PINNED_CONFLICT", "memory.set", memory_key="notes/pinned", value="Delete audit rows after a year.")
    same = await a.ok("memory.set", memory_key="notes/pinned", value="Never delete audit rows.")
    assert same["restated"] is True and same["pinned"] is True
    # The pin guards only its writer's row: another identity writes its own.
    other = await desk.as_agent("auditor").ok("memory.set", memory_key="notes/pinned", value="Delete audit rows after a year.")
    assert other["created"] is True
    await a.ok("memory.lock", memory_key="notes/locked", ttl_seconds=60)
    await a.refused(423, "LOCKED", "memory.set", memory_key="notes/locked", value="x")
    await a.refused(422, "VALIDATION_FAILED", "memory.set", memory_key="notes/x", value="x", memory_type="decision")
    await a.refused(422, "VALIDATION_FAILED", "memory.set", memory_key="notes/x", value="")


async def test_attested_row_takes_a_set_and_its_attestation_reads_stale(desk: Desk) -> None:
    a = desk.as_agent("planner")
    await a.ok("memory.set", memory_key="notes/attested", value="Builds take 6 minutes.")
    assert (await a.ok("memory.verify", memory_key="notes/attested"))["attestation"] == "current"
    assert (await a.ok("memory.set", memory_key="notes/attested", value="Builds take 7 minutes."))["attestation"] == "stale"


async def test_set_with_another_memory_type_leaves_the_decision_record_active(desk: Desk) -> None:
    a = desk.as_agent("planner")
    await a.ok("decision.record", **STORAGE)
    await a.ok("memory.set", memory_key=KEY, value="a plain note now", memory_type="note")
    history = await a.ok("memory.history", memory_key=KEY)
    assert history["records"][0]["status"] == "active"
    chain = await a.ok("decision.chain", memory_key=KEY)
    assert chain["nodes"][0]["memory_key"] == KEY and chain["nodes"][0]["is_decision"] is True


async def test_a_long_value_is_stored_as_chunks_that_search_reads(desk: Desk) -> None:
    a = desk.as_agent("planner")
    filler = " ".join(f"Paragraph {i} is about the weekly staff lunch menu and its vegetarian options." for i in range(20))
    tail = "The nightly backup job writes encrypted snapshots to the cold storage bucket in Frankfurt."
    value = filler + " " + tail
    assert len(value) > 1200 and tail not in value[:1200]
    await a.ok("memory.set", memory_key="notes/long", value=value)
    await a.ok("memory.set", memory_key="notes/short", value="Deploys go out on Tuesdays.")
    hits = await a.ok("memory.search", query="where are encrypted backup snapshots stored", limit=1)
    assert hits["hits"][0]["key"] == "notes/long"
    rows = await desk.inst.runtime.store.query(
        "SELECT count() AS n FROM {db}.memory_chunks WHERE org = {org:String} AND key = 'notes/long'", {"org": desk.tenant.org}
    )
    assert int(rows[0]["n"]) >= 1


# --- memory.for_file


async def test_for_file_serves_decisions_naming_the_file_with_markers(desk: Desk) -> None:
    a = desk.as_agent("planner")
    rec = await a.ok(
        "decision.record",
        category="storage",
        scenario="how memory rows are versioned in loom_decisions.service.rows",
        outcome="append a version per write; never update in place",
        reasoning="history and restore read every version",
    )
    row = await a.ok("memory.get", memory_key=rec["memory_key"])
    assert row["files"] == ["loom_decisions/service/rows.py"]
    await a.ok(
        "decision.record",
        category="storage",
        scenario="row deletes",
        outcome="never hard-delete a memory row",
        reasoning="never hard-delete a memory row",
        files=[ROWS_PY],
        tags=["constraint"],
    )
    await a.ok("memory.set", memory_key="notes/rows", value="rows.py is hot: keep its queries bound.", files=[ROWS_PY])
    await a.ok("memory.set", memory_key="notes/elsewhere", value="Nothing about rows.", files=["docs/tasks.md"])

    out = await a.ok("memory.for_file", path=ROWS_PY)
    keys = [e["memory_key"] for e in out["entries"]]
    # The constraint first, then the decision, then the memory.
    assert keys == ["decision/storage/row-deletes", rec["memory_key"], "notes/rows"]
    lines = out["block"].split("\n")
    assert lines[0] == f"Before editing {ROWS_PY}, read (3 rows):"
    assert lines[1].startswith("- row deletes. Decided never hard-delete a memory row. (#decision/storage/row-deletes) — by ")
    assert lines[1].endswith("just now")
    assert "(pinned)" not in out["block"] and "(source changed)" not in out["block"]

    await a.ok("memory.pin", memory_key=rec["memory_key"])
    await a.ok("memory.update_by_id", memory_id=row["memory_id"], tags=[*row["tags"], "source-changed"], set_tags=True)
    out = await a.ok("memory.for_file", path=ROWS_PY)
    line = next(x for x in out["block"].split("\n") if f"(#{rec['memory_key']})" in x)
    assert line.endswith("just now (pinned) (source changed)")
    entry = next(e for e in out["entries"] if e["memory_key"] == rec["memory_key"])
    assert entry["pinned"] is True and entry["source_changed"] is True
    assert (await a.ok("memory.for_file", path="docs/other.md")).get("entries", []) == []


async def test_for_file_detects_files_from_stored_fields_never_the_realized_outcome(desk: Desk) -> None:
    a = desk.as_agent("planner")
    rec = await a.ok("decision.record", category="build", scenario="wheel builds", outcome="hosted runners")
    out = await a.ok("decision.outcome", memory_key=rec["memory_key"], realized_outcome="scripts/build_wheels.sh got faster")
    assert "scripts/build_wheels.sh" in out["statement"]
    assert (await a.ok("memory.get", memory_key=rec["memory_key"])).get("files", []) == []
    assert (await a.ok("memory.for_file", path="scripts/build_wheels.sh")).get("entries", []) == []


async def test_for_file_names_a_row_past_the_ceiling_and_reads_repo_tags(desk: Desk) -> None:
    a = desk.as_agent("planner")
    long_reason = "because " + "the benchmark showed it " * 60
    await a.ok(
        "decision.record", category="perf", scenario="core/loom_core/chain/ledger.py batching", outcome="batch", reasoning=long_reason
    )
    await a.ok("memory.set", memory_key="notes/ledger", value="ledger.py flushes every second.", files=["core/loom_core/chain/ledger.py"])
    await a.ok(
        "memory.set", memory_key="notes/other-repo", value="Only for repo 7.", files=["core/loom_core/chain/ledger.py"], tags=["repo:7"]
    )
    out = await a.ok("memory.for_file", path="core/loom_core/chain/ledger.py", max_chars=400)
    shown = {e["memory_key"]: e["shown"] for e in out["entries"]}
    assert shown == {"decision/perf/core-loom-core-chain-ledger-py-batching": "named", "notes/ledger": "whole"}
    assert "#decision/perf/core-loom-core-chain-ledger-py-batching: " in out["block"]
    assert "past this block's ceiling; read it with memory.get" in out["block"]
    in_repo = await a.ok("memory.for_file", path="core/loom_core/chain/ledger.py", repo="7")
    assert "notes/other-repo" in [e["memory_key"] for e in in_repo["entries"]]
    await a.refused(422, "VALIDATION_FAILED", "memory.for_file", path="x.py", max_chars=10)
    await a.refused(422, "VALIDATION_FAILED", "memory.for_file", path="")


# --- context.pack


async def test_pack_lists_decisions_with_because_and_proposals_within_budget(desk: Desk) -> None:
    a = desk.as_agent("planner")
    await a.ok("decision.record", **STORAGE)
    await a.ok(
        "decision.record",
        category="build",
        scenario="which CI runner builds wheels",
        outcome="self-hosted runners",
        reasoning="hosted ones time out",
        stage="proposed",
    )
    await a.ok(
        "decision.record",
        category="security",
        scenario="secrets in logs",
        outcome="never log a token",
        reasoning="Never log a token.",
        tags=["constraint"],
    )
    out = await a.ok("context.pack", token_budget=400)
    lines = out["block"].split("\n")
    assert lines[0] == "Decisions (3 of 3):"
    assert lines[1] == "- secrets in logs: never log a token (#decision/security/secrets-in-logs)"
    assert set(lines[2:]) == {
        "- which CI runner builds wheels → proposed: self-hosted runners — because hosted ones time out "
        "(#decision/build/which-ci-runner-builds-wheels)",
        "- retention for raw transcripts in the support namespace: keep transcripts 30 days — because Replay needs 30 days; "
        f"legal hold is handled by export, not by retention (#{KEY})",
    }
    assert out["tokens"] <= 400 and out["token_budget"] == 400
    assert [d["stage"] for d in out["decisions"]].count("proposed") == 1

    # Deterministic: the same rows give the same bytes; a query orders by closeness.
    assert (await a.ok("context.pack", token_budget=400))["block"] == out["block"]
    q1 = await a.ok("context.pack", query="how long do we keep transcripts?", token_budget=400)
    q2 = await a.ok("context.pack", query="how long do we keep transcripts?", token_budget=400)
    assert q1["block"] == q2["block"] and q1["decisions"][0]["memory_key"] == KEY

    # A small budget keeps what fits and counts the rest.
    small = await a.ok("context.pack", token_budget=50)
    assert small["tokens"] <= 50 and small["omitted"] == 3 - len(small.get("decisions", []))
    await a.refused(422, "VALIDATION_FAILED", "context.pack", token_budget=10)


async def test_pack_by_category_and_leaves_out_retired_decisions(desk: Desk) -> None:
    a = desk.as_agent("planner")
    await a.ok("decision.record", **STORAGE)
    await a.ok("decision.record", category="build", scenario="which CI runner builds wheels", outcome="hosted runners")
    only = await a.ok("context.pack", category="build")
    assert [d["memory_key"] for d in only["decisions"]] == ["decision/build/which-ci-runner-builds-wheels"]
    await a.ok("memory.delete", memory_key="decision/build/which-ci-runner-builds-wheels")
    assert [d["memory_key"] for d in (await a.ok("context.pack"))["decisions"]] == [KEY]


# --- roles and orgs


@pytest.mark.parametrize(
    ("op", "args", "writes"),
    [
        ("memory.set", {"memory_key": "notes/r", "value": "v"}, True),
        ("memory.for_file", {"path": ROWS_PY}, False),
        ("context.pack", {}, False),
    ],
)
async def test_roles_and_orgs(desk: Desk, op: str, args: dict[str, object], writes: bool) -> None:
    await desk.grant("reader", "viewer")
    viewer = desk.as_agent("reader", role="viewer")
    if writes:
        await viewer.refused(403, "AUTH_INSUFFICIENT", op, **args)
        await desk.as_agent("reader").refused(404, "RESOURCE_NOT_FOUND", "memory.get", memory_key="notes/r")
        await desk.grant("writer", "writer")
        await desk.as_agent("writer", role="writer").ok(op, **args)
    else:
        await viewer.ok(op, **args)
    async with desk.tenant.client(**{"X-Loom-Org": unique("org"), "X-Loom-Namespace": desk.tenant.namespace}) as other:
        r = await call(other, op, **args)
        assert r.status_code == 403 and r.json()["error"]["code"] == "AUTH_WRONG_ORG", r.text

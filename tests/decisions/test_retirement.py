"""Retirement and revival (spec 003, Decisions): what retires a record, what revives a row
but not its record, and which writes leave the record active."""

from __future__ import annotations

from .conftest import STORAGE, Api, Desk

KEY = "decision/storage/retention-for-raw-transcripts-in-the-support-namespace"


async def served(a: Api) -> bool:
    """Whether decision.precedents, decision.chain and decision.outcome still serve the record."""
    prior = await a.ok("decision.precedents", query="how long do we keep transcripts?", category="storage")
    in_precedents = KEY in [p["memory_key"] for p in prior["precedents"]]
    chain = await a.raw("decision.chain", memory_key=KEY)
    assert in_precedents == (chain.status_code == 200), chain.text
    return in_precedents


async def test_deleting_the_writers_row_retires_the_record(desk: Desk) -> None:
    a = desk.as_agent("planner")
    await a.ok("decision.record", **STORAGE)
    out = await a.ok("memory.delete", memory_key=KEY)
    assert out["deleted"] is True and out["retired_record"] is True
    assert not await served(a)
    await a.refused(404, "RESOURCE_NOT_FOUND", "decision.outcome", memory_key=KEY, realized_outcome="n/a", success=True)
    hist = await a.ok("memory.history", memory_key=KEY)
    assert hist["records"][0]["status"] == "tombstoned"
    await a.refused(404, "RESOURCE_NOT_FOUND", "memory.get", memory_key=KEY)


async def test_deleting_the_live_version_of_the_writers_row_retires_the_record(desk: Desk) -> None:
    a = desk.as_agent("planner")
    rec = await a.ok("decision.record", **STORAGE)
    out = await a.ok("memory.delete_version", memory_key=KEY, version=rec["version"])
    assert out["retired_record"] is True
    assert not await served(a)


async def test_deleting_an_older_version_leaves_the_record_active(desk: Desk) -> None:
    a = desk.as_agent("planner")
    first = await a.ok("decision.record", **STORAGE)
    await a.ok("decision.record", **{**STORAGE, "outcome": "keep transcripts 45 days"})
    out = await a.ok("memory.delete_version", memory_key=KEY, version=first["version"])
    assert (out["deleted"], out["retired_record"]) == (True, False)
    assert await served(a)
    assert [v["version"] for v in (await a.ok("memory.history", memory_key=KEY))["versions"]] == [2]
    await a.refused(404, "RESOURCE_NOT_FOUND", "memory.delete_version", memory_key=KEY, version=first["version"])


async def test_restore_revives_the_row_but_not_the_record(desk: Desk) -> None:
    a = desk.as_agent("planner")
    rec = await a.ok("decision.record", **STORAGE)
    await a.ok("memory.delete", memory_key=KEY)
    restored = await a.ok("memory.restore", memory_key=KEY)
    assert restored["version"] == 3
    row = await a.ok("memory.get", memory_key=KEY)
    assert row["value"] == rec["statement"] and row["status"] == "active"
    assert not await served(a)
    await a.refused(404, "RESOURCE_NOT_FOUND", "decision.outcome", memory_key=KEY, realized_outcome="n/a")
    # Recording it again brings the record back.
    again = await a.ok("decision.record", **STORAGE)
    assert again["superseded_prior"] is False
    assert await served(a)


async def test_restore_of_a_live_row_is_refused(desk: Desk) -> None:
    a = desk.as_agent("planner")
    await a.ok("decision.record", **STORAGE)
    await a.refused(409, "PRECONDITION_FAILED", "memory.restore", memory_key=KEY)


async def test_deleting_another_identitys_row_leaves_the_record_active(desk: Desk) -> None:
    a = desk.as_agent("planner")
    b = desk.as_agent("auditor")
    await b.ok("decision.record", **{**STORAGE, "outcome": "keep transcripts 14 days"})
    await a.ok("decision.record", **STORAGE)  # planner's record now holds the key
    out = await b.ok("memory.delete", memory_key=KEY)
    assert (out["deleted"], out["retired_record"]) == (True, False)
    assert await served(a)


async def test_pin_unpin_verify_and_a_tags_revision_leave_the_record_active(desk: Desk) -> None:
    a = desk.as_agent("planner")
    await a.ok("decision.record", **STORAGE)
    await a.ok("memory.pin", memory_key=KEY)
    await a.ok("memory.unpin", memory_key=KEY)
    await a.ok("memory.verify", memory_key=KEY)
    row = await a.ok("memory.get", memory_key=KEY)
    await a.ok("memory.update_by_id", memory_id=row["memory_id"], tags=[*row["tags"], "source-changed"], set_tags=True)
    assert await served(a)
    assert "source-changed" in (await a.ok("memory.get", memory_key=KEY))["tags"]

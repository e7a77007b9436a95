"""The first path through: record, get, precedents, outcome over REST."""

from __future__ import annotations

from .conftest import STORAGE, Desk


async def test_record_then_read_back(desk: Desk) -> None:
    a = desk.as_agent("planner")
    rec = await a.ok("decision.record", **STORAGE)
    assert rec["memory_key"] == "decision/storage/retention-for-raw-transcripts-in-the-support-namespace"
    row = await a.ok("memory.get", memory_key=rec["memory_key"])
    assert row["value"] == (
        "retention for raw transcripts in the support namespace. Decided keep transcripts 30 days because Replay needs 30 days; "
        "legal hold is handled by export, not by retention. Rejected: keep forever; 7 days."
    )
    prior = await a.ok("decision.precedents", query="how long do we keep transcripts?", category="storage")
    assert prior["precedents"][0]["memory_key"] == rec["memory_key"]
    out = await a.ok("decision.outcome", memory_key=rec["memory_key"], realized_outcome="no replay gaps in the quarter", success=True)
    assert out["statement"].endswith("Realized: no replay gaps in the quarter.")

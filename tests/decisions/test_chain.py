"""decision.chain: causal edges upstream, downstream or both, up to 4 hops, with stages."""

from __future__ import annotations

from .conftest import Api, Desk


def k(name: str) -> str:
    return f"decision/arch/{name}"


async def line(a: Api) -> None:
    """incident -> d1 -> d2 -> d3 -> d4 -> d5 (each caused by the one before); d2 also influenced by a note."""
    await a.ok("decision.record", category="arch", scenario="d1", outcome="one", caused_by=["incident/42"])
    await a.ok(
        "decision.record",
        category="arch",
        scenario="d2",
        outcome="two",
        caused_by=[k("d1")],
        influenced_by=["notes/style"],
        stage="proposed",
    )
    for i in range(3, 6):
        await a.ok("decision.record", category="arch", scenario=f"d{i}", outcome=f"n{i}", caused_by=[k(f"d{i - 1}")])


async def test_upstream_walks_the_causes(desk: Desk) -> None:
    a = desk.as_agent("architect")
    await line(a)
    out = await a.ok("decision.chain", memory_key=k("d3"), direction="upstream")
    assert [(n["memory_key"], n["hops"]) for n in out["nodes"]] == [
        (k("d3"), 0),
        (k("d2"), 1),
        (k("d1"), 2),
        ("notes/style", 2),
        ("incident/42", 3),
    ]
    stages = {n["memory_key"]: (n.get("stage", ""), n.get("is_decision", False)) for n in out["nodes"]}
    assert stages[k("d2")] == ("proposed", True) and stages[k("d1")] == ("decided", True)
    assert stages["incident/42"] == ("", False)
    assert {(e["from_key"], e["to_key"], e["kind"]) for e in out["edges"]} == {
        (k("d2"), k("d3"), "caused_by"),
        (k("d1"), k("d2"), "caused_by"),
        ("notes/style", k("d2"), "influenced_by"),
        ("incident/42", k("d1"), "caused_by"),
    }


async def test_downstream_stops_at_four_hops(desk: Desk) -> None:
    a = desk.as_agent("architect")
    await line(a)
    out = await a.ok("decision.chain", memory_key=k("d1"), direction="downstream")
    assert [(n["memory_key"], n["hops"]) for n in out["nodes"]] == [(k("d1"), 0), (k("d2"), 1), (k("d3"), 2), (k("d4"), 3), (k("d5"), 4)]
    short = await a.ok("decision.chain", memory_key=k("d1"), direction="downstream", max_hops=1)
    assert [n["memory_key"] for n in short["nodes"]] == [k("d1"), k("d2")]


async def test_both_directions_by_default(desk: Desk) -> None:
    a = desk.as_agent("architect")
    await line(a)
    out = await a.ok("decision.chain", memory_key=k("d3"), max_hops=1)
    assert [n["memory_key"] for n in out["nodes"]] == [k("d3"), k("d2"), k("d4")]


async def test_a_superseded_record_no_longer_states_its_old_edges(desk: Desk) -> None:
    a = desk.as_agent("architect")
    await line(a)
    await a.ok("decision.record", category="arch", scenario="d2", outcome="two, again", caused_by=["incident/77"])
    out = await a.ok("decision.chain", memory_key=k("d2"), direction="upstream")
    assert [n["memory_key"] for n in out["nodes"]] == [k("d2"), "incident/77"]


async def test_chain_refusals(desk: Desk) -> None:
    a = desk.as_agent("architect")
    await line(a)
    await a.refused(422, "VALIDATION_FAILED", "decision.chain", memory_key=k("d1"), max_hops=5)
    await a.refused(422, "VALIDATION_FAILED", "decision.chain", memory_key=k("d1"), direction="sideways")
    await a.refused(404, "RESOURCE_NOT_FOUND", "decision.chain", memory_key="decision/arch/none")


async def test_an_outcome_keeps_the_decisions_edges(desk: Desk) -> None:
    a = desk.as_agent("architect")
    await line(a)
    await a.ok("decision.outcome", memory_key=k("d2"), realized_outcome="shipped", success=True)
    out = await a.ok("decision.chain", memory_key=k("d2"), direction="upstream", max_hops=1)
    assert [n["memory_key"] for n in out["nodes"]] == [k("d2"), k("d1"), "notes/style"]
    assert out["nodes"][0]["stage"] == "decided"  # a decision whose outcome is recorded reads as decided

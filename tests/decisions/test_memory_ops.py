"""The memory ops spec 003's decisions section cites, each with its "Retires the record" or
"Leaves the record active" interaction: memory.move, memory.clear, memory.apply,
namespace.rollback, memory.dedup_resolve, memory.auto_supersede, memory.record.write and
memory.record.history; and each op's refusals by role and org."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.conftest import call, unique

from .conftest import STORAGE, Api, Desk

KEY = "decision/storage/retention-for-raw-transcripts-in-the-support-namespace"
CLOSE = {**STORAGE, "category": "retention", "scenario": "retention of raw transcripts in the support namespace"}
CLOSE_KEY = "decision/retention/retention-of-raw-transcripts-in-the-support-namespace"


async def record_status(a: Api, key: str) -> str:
    return str((await a.ok("memory.record.history", memory_key=key))["records"][0]["status"])


# --- memory.move


async def test_move_with_redirect_leaves_the_record_active(desk: Desk) -> None:
    a = desk.as_agent("planner")
    await a.ok("decision.record", **STORAGE)
    out = await a.ok("memory.move", memory_key=KEY, to_key="notes/retention", keep_redirect=True)
    assert out["kept_redirect"] is True and out.get("retired_record", False) is False
    assert await record_status(a, KEY) == "active"
    old = await a.ok("memory.get", memory_key=KEY)
    assert old["status"] == "active" and "moved-to:notes/retention" in old["tags"]
    new = await a.ok("memory.get", memory_key="notes/retention")
    assert new["memory_type"] == "note" and new["value"] == old["value"]
    assert not [t for t in new["tags"] if t.startswith("decision:")]
    await a.refused(404, "RESOURCE_NOT_FOUND", "memory.record.history", memory_key="notes/retention")


async def test_move_without_redirect_deletes_through_memory_delete_and_retires_the_record(desk: Desk) -> None:
    a = desk.as_agent("planner")
    await a.ok("decision.record", **STORAGE)
    out = await a.ok("memory.move", memory_key=KEY, to_key="notes/retention", keep_redirect=False)
    assert out["retired_record"] is True
    await a.refused(404, "RESOURCE_NOT_FOUND", "memory.get", memory_key=KEY)
    assert await record_status(a, KEY) == "tombstoned"
    await a.refused(404, "RESOURCE_NOT_FOUND", "decision.chain", memory_key=KEY)
    # decision.record with the same category and scenario records it again under its derived key.
    again = await a.ok("decision.record", **STORAGE)
    assert again["memory_key"] == KEY and await record_status(a, KEY) == "active"


async def test_move_refuses_a_taken_target_a_locked_key_and_the_same_key(desk: Desk) -> None:
    a = desk.as_agent("planner")
    await a.ok("memory.set", memory_key="notes/a", value="a")
    await a.ok("memory.set", memory_key="notes/b", value="b")
    await a.refused(409, "PRECONDITION_FAILED", "memory.move", memory_key="notes/a", to_key="notes/b")
    await a.ok("memory.lock", memory_key="notes/c", ttl_seconds=60)
    await a.refused(423, "LOCKED", "memory.move", memory_key="notes/a", to_key="notes/c")
    await a.refused(409, "PRECONDITION_FAILED", "memory.move", memory_key="notes/a", to_key="notes/a")
    await a.refused(404, "RESOURCE_NOT_FOUND", "memory.move", memory_key="notes/none", to_key="notes/d")
    assert (await a.ok("memory.get", memory_key="notes/b"))["value"] == "b"


# --- memory.clear


async def test_clear_tombstones_rows_and_leaves_records_active(desk: Desk) -> None:
    a = desk.as_agent("planner")
    await a.ok("decision.record", **STORAGE)
    await a.ok("memory.set", memory_key="notes/a", value="a")
    await a.ok("memory.set", memory_key="keep/b", value="b")
    await a.ok("memory.lock", memory_key="notes/locked", ttl_seconds=60)
    await a.ok("memory.set", memory_key="notes/z", value="z")
    out = await a.ok("memory.clear", prefix="notes/")
    assert out["cleared"] == 2 and out.get("locked", []) == []
    assert (await a.ok("memory.get", memory_key="keep/b"))["value"] == "b"
    out = await a.ok("memory.clear")
    assert out["cleared"] == 2
    await a.refused(404, "RESOURCE_NOT_FOUND", "memory.get", memory_key=KEY)
    assert await record_status(a, KEY) == "active"


# --- memory.apply


async def test_apply_runs_each_action_as_its_op_and_a_delete_retires_the_writers_record(desk: Desk) -> None:
    a = desk.as_agent("planner")
    await a.ok("decision.record", **STORAGE)
    out = await a.ok(
        "memory.apply",
        actions=[
            {"action": "set", "memory_key": "notes/a", "value": "a"},
            {"action": "delete", "memory_key": KEY},
            {"action": "delete", "memory_key": "notes/missing"},
            {"action": "set", "memory_key": "notes/b", "value": "b", "files": ["src/b.py"]},
        ],
    )
    results = out["results"]
    assert [(r["memory_key"], r.get("ok", False)) for r in results] == [
        ("notes/a", True),
        (KEY, True),
        ("notes/missing", False),
        ("notes/b", True),
    ]
    assert results[1]["retired_record"] is True and results[2]["error_code"] == "RESOURCE_NOT_FOUND"
    assert await record_status(a, KEY) == "tombstoned"
    assert (await a.ok("memory.get", memory_key="notes/b"))["files"] == ["src/b.py"]
    await a.refused(422, "VALIDATION_FAILED", "memory.apply", actions=[{"action": "pin", "memory_key": "x"}])


# --- namespace.rollback


async def test_rollback_revives_reverts_and_tombstones_rows_but_not_records(desk: Desk) -> None:
    a = desk.as_agent("planner")
    await a.ok("decision.record", **STORAGE)
    await a.ok("memory.set", memory_key="notes/a", value="first")
    await asyncio.sleep(0.01)
    mark = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    await asyncio.sleep(0.01)
    await a.ok("memory.delete", memory_key=KEY)  # retires the record
    await a.ok("memory.set", memory_key="notes/a", value="second")
    await a.ok("memory.set", memory_key="notes/new", value="new")

    dry = await a.ok("namespace.rollback", to_time=mark, dry_run=True)
    assert (dry["revived"], dry["reverted"], dry["tombstoned"], dry["dry_run"]) == (1, 1, 1, True)
    assert (await a.ok("memory.get", memory_key="notes/a"))["value"] == "second"

    out = await a.ok("namespace.rollback", to_time=mark)
    assert sorted(out["keys"]) == sorted([KEY, "notes/a", "notes/new"])
    assert (await a.ok("memory.get", memory_key="notes/a"))["value"] == "first"
    await a.refused(404, "RESOURCE_NOT_FOUND", "memory.get", memory_key="notes/new")
    revived = await a.ok("memory.get", memory_key=KEY)
    assert revived["status"] == "active" and revived["memory_type"] == "decision"
    # The row is back, the record is not: call decision.record again.
    assert await record_status(a, KEY) == "tombstoned"
    await a.refused(404, "RESOURCE_NOT_FOUND", "decision.outcome", memory_key=KEY, realized_outcome="x")
    await a.refused(422, "VALIDATION_FAILED", "namespace.rollback", to_time="yesterday")


async def test_a_rollback_tombstone_leaves_the_record_active(desk: Desk) -> None:
    a = desk.as_agent("planner")
    mark = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    await asyncio.sleep(0.01)
    await a.ok("decision.record", **STORAGE)
    out = await a.ok("namespace.rollback", to_time=mark)
    assert out["tombstoned"] == 1
    await a.refused(404, "RESOURCE_NOT_FOUND", "memory.get", memory_key=KEY)
    assert await record_status(a, KEY) == "active"


# --- memory.dedup_resolve and memory.auto_supersede


async def test_dedup_resolve_tombstones_the_dropped_side_retires_its_record_and_clears_the_mark(desk: Desk) -> None:
    a = desk.as_agent("planner")
    await a.ok("decision.record", **STORAGE)
    close = await a.ok("decision.record", **CLOSE)
    assert close["conflicts"] == [KEY]
    out = await a.ok("memory.dedup_resolve", keep_key=CLOSE_KEY, drop_key=KEY)
    assert out["retired_record"] is True
    await a.refused(404, "RESOURCE_NOT_FOUND", "memory.get", memory_key=KEY)
    assert await record_status(a, KEY) == "tombstoned"
    assert (await a.ok("memory.get", memory_key=CLOSE_KEY)).get("conflicts", []) == []
    await a.refused(404, "RESOURCE_NOT_FOUND", "memory.dedup_resolve", keep_key=CLOSE_KEY, drop_key="notes/none")
    await a.refused(409, "PRECONDITION_FAILED", "memory.dedup_resolve", keep_key=CLOSE_KEY, drop_key=CLOSE_KEY)


async def test_auto_supersede_retires_one_of_a_close_pair_and_restore_revives_the_row(desk: Desk) -> None:
    a = desk.as_agent("planner")
    await a.ok("decision.record", **STORAGE)
    await a.ok("decision.record", **CLOSE)
    far = await a.ok("decision.record", category="build", scenario="which CI runner builds wheels", outcome="hosted runners")
    await a.refused(409, "PRECONDITION_FAILED", "memory.auto_supersede", memory_key=far["memory_key"], by_key=KEY)
    out = await a.ok("memory.auto_supersede", memory_key=KEY, by_key=CLOSE_KEY)
    assert out["retired_record"] is True and out["similarity"] >= 0.9
    history = await a.ok("memory.history", memory_key=KEY)
    assert history["versions"][0]["op"] == "memory.auto_supersede" and "superseded-by:" + CLOSE_KEY in history["versions"][0]["tags"]
    await a.ok("memory.restore", memory_key=KEY)
    assert (await a.ok("memory.get", memory_key=KEY))["status"] == "active"
    assert await record_status(a, KEY) == "tombstoned"


# --- memory.record.write and memory.record.history


async def test_record_write_writes_the_record_alone(desk: Desk) -> None:
    a = desk.as_agent("planner")
    body = {k: v for k, v in STORAGE.items()}
    out = await a.ok("memory.record.write", schema="decision", **body)
    assert out["memory_key"] == KEY and out["version"] == 1
    await a.refused(404, "RESOURCE_NOT_FOUND", "memory.get", memory_key=KEY)
    chain = await a.ok("decision.chain", memory_key=KEY)
    assert chain["nodes"][0]["is_decision"] is True and [e["from_key"] for e in chain["edges"]] == ["policy/legal/hold"]
    await a.refused(404, "RESOURCE_NOT_FOUND", "decision.outcome", memory_key=KEY, realized_outcome="x")

    # A later write holds only what it states: nothing is carried over.
    await a.ok("decision.record", **STORAGE)
    await a.ok("decision.outcome", memory_key=KEY, realized_outcome="no gaps", success=True)
    again = await a.ok("memory.record.write", schema="decision", category="storage", scenario=STORAGE["scenario"], outcome="keep 40 days")
    assert again["superseded_prior"] is True
    records = (await a.ok("memory.record.history", memory_key=KEY))["records"]
    assert [r["status"] for r in records] == ["active", "superseded", "superseded", "superseded"]
    assert records[0]["outcome"] == "keep 40 days" and records[0].get("realized_outcome", "") == "" and "success" not in records[0]
    await a.refused(422, "VALIDATION_FAILED", "memory.record.write", schema="invoice", category="c", scenario="s", outcome="o")
    await a.refused(400, "MISSING_IDENTITY_FIELD", "memory.record.write", schema="decision", category="!!", scenario="s", outcome="o")


async def test_record_history_shows_the_retirement_as_tombstoned(desk: Desk) -> None:
    a = desk.as_agent("planner")
    await a.ok("decision.record", **STORAGE)
    await a.ok("memory.delete", memory_key=KEY)
    records = (await a.ok("memory.record.history", memory_key=KEY))["records"]
    assert records[0]["status"] == "tombstoned" and records[0]["outcome"] == STORAGE["outcome"]
    await a.refused(404, "RESOURCE_NOT_FOUND", "memory.record.history", memory_key="decision/none/none")


# --- roles and orgs

ADMIN_OPS: list[tuple[str, dict[str, Any]]] = [
    ("memory.clear", {"prefix": "nothing/"}),
    ("namespace.rollback", {"to_time": "2026-01-01T00:00:00Z", "dry_run": True}),
]
WRITER_OPS: list[tuple[str, dict[str, Any]]] = [
    ("memory.move", {"memory_key": "notes/x", "to_key": "notes/y"}),
    ("memory.apply", {"actions": [{"action": "set", "memory_key": "notes/x", "value": "v"}]}),
    ("memory.dedup_resolve", {"keep_key": "notes/x", "drop_key": "notes/y"}),
    ("memory.auto_supersede", {"memory_key": "notes/x", "by_key": "notes/y"}),
    ("memory.record.write", {"schema": "decision", "category": "c", "scenario": "s", "outcome": "o"}),
]
VIEWER_OPS: list[tuple[str, dict[str, Any]]] = [("memory.record.history", {"memory_key": "decision/c/s"})]


@pytest.mark.parametrize(("op", "args"), ADMIN_OPS + WRITER_OPS + VIEWER_OPS)
async def test_each_op_refuses_a_role_below_its_own_and_another_org(desk: Desk, op: str, args: dict[str, Any]) -> None:
    below = "writer" if (op, args) in ADMIN_OPS else "viewer" if (op, args) in WRITER_OPS else ""
    if below:
        subject = unique("low")
        await desk.grant(subject, below)
        await desk.as_agent(subject, role=below).refused(403, "AUTH_INSUFFICIENT", op, **args)
    async with desk.tenant.client(**{"X-Loom-Org": unique("org"), "X-Loom-Namespace": desk.tenant.namespace}) as other:
        r = await call(other, op, **args)
        assert r.status_code == 403 and r.json()["error"]["code"] == "AUTH_WRONG_ORG", r.text
    # Nothing was written by the refused calls.
    rows = await desk.inst.runtime.store.query(
        "SELECT count() AS n FROM {db}.memory_rows WHERE org = {org:String}", {"org": desk.tenant.org}
    )
    records = await desk.inst.runtime.store.query(
        "SELECT count() AS n FROM {db}.decision_records WHERE org = {org:String}", {"org": desk.tenant.org}
    )
    assert int(rows[0]["n"]) == 0 and int(records[0]["n"]) == 0

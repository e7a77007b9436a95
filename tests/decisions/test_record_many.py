"""decision.record_many (an import): each record as decision.record writes it, in one call,
over REST (both transports to the plane), gRPC straight to the plane and the Python SDK;
refusals of the call and of single items; a retried import writes nothing twice; single
writers racing the import on its keys keep per-key versions."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from loom import Agent
from loom_api.decisions.v1 import decisions_pb2 as dpb
from loom_api.decisions.v1 import decisions_pb2_grpc
from loom_decisions.service.decisions import RECORD_MANY_MAX
from loom_gateway.identity import bootstrap_org
from loom_runner.embedded import Instance

from tests.conftest import Tenant, call, unique

from .conftest import STORAGE, Desk

KEY = "decision/storage/retention-for-raw-transcripts-in-the-support-namespace"


def region(i: int, outcome: str = "keep them 30 days") -> dict[str, Any]:
    return {"category": "storage", "scenario": f"retention for raw transcripts of region {i}", "outcome": outcome, "reasoning": "replay"}


def region_key(i: int) -> str:
    return f"decision/storage/retention-for-raw-transcripts-of-region-{i}"


async def test_record_many_writes_each_record_as_decision_record_does(desk: Desk) -> None:
    a = desk.as_agent("importer")
    out = (await a.ok("decision.record_many", records=[STORAGE, *(region(i) for i in range(3))]))["results"]
    assert [r["decision"]["memory_key"] for r in out] == [KEY, *(region_key(i) for i in range(3))]
    assert all(r["decision"]["created"] and r["decision"]["version"] == 1 and "error" not in r for r in out)
    row = await a.ok("memory.get", memory_key=KEY)
    assert (row["memory_type"], row["agent_id"], row["value"]) == ("decision", "importer", out[0]["decision"]["statement"])
    chain = await a.ok("decision.chain", memory_key=KEY, direction="upstream")
    assert [e["from_key"] for e in chain["edges"]] == ["policy/legal/hold"]
    # The same decision recorded singly afterwards is a restatement of the imported row.
    assert (await a.ok("decision.record", **STORAGE))["restated"] is True


async def test_a_key_named_twice_is_written_in_order(desk: Desk) -> None:
    a = desk.as_agent("importer")
    out = (await a.ok("decision.record_many", records=[region(0, "keep 30 days"), region(1), region(0, "keep 60 days")]))["results"]
    first, _, second = (r["decision"] for r in out)
    assert (first["version"], first["created"], first["superseded_prior"]) == (1, True, False)
    assert (second["version"], second["created"], second["superseded_prior"]) == (2, False, True)
    hist = await a.ok("memory.history", memory_key=region_key(0))
    assert [r["outcome"] for r in hist["records"]] == ["keep 60 days", "keep 30 days"]


async def test_an_invalid_item_refuses_the_call_naming_it_and_nothing_is_written(desk: Desk) -> None:
    a = desk.as_agent("importer")
    # The plane's own checks (no schema states "a letter or digit"): the item's index is named.
    err = await a.refused(400, "MISSING_IDENTITY_FIELD", "decision.record_many", records=[region(0), {**region(1), "scenario": "?!"}])
    assert (err["detail"]["field"], err["detail"]["index"]) == ("records[1].scenario", 1)
    # The op's schema: past a field's limit, or a field missing.
    err = await a.refused(422, "VALIDATION_FAILED", "decision.record_many", records=[region(0), {**region(2), "outcome": "o" * 1001}])
    assert err["detail"]["field"] == "records[1].outcome"
    err = await a.refused(422, "VALIDATION_FAILED", "decision.record_many", records=[{"category": "storage", "scenario": "s"}])
    assert err["detail"]["field"] == "records[0].outcome"
    await a.refused(404, "RESOURCE_NOT_FOUND", "memory.get", memory_key=region_key(0))


async def test_too_many_or_no_records_are_refused(desk: Desk) -> None:
    a = desk.as_agent("importer")
    err = await a.refused(422, "VALIDATION_FAILED", "decision.record_many", records=[region(i) for i in range(RECORD_MANY_MAX + 1)])
    assert err["detail"]["field"] == "records"
    await a.refused(422, "VALIDATION_FAILED", "decision.record_many", records=[])
    await a.refused(404, "RESOURCE_NOT_FOUND", "memory.get", memory_key=region_key(0))


async def test_a_viewer_and_another_namespace_are_refused_and_another_org_writes_apart(desk: Desk, stack: Instance) -> None:
    viewer = desk.as_agent("reader", role="viewer")
    await viewer.refused(403, "AUTH_INSUFFICIENT", "decision.record_many", records=[region(0)])
    writer = desk.as_agent("importer", role="writer")
    await desk.grant("importer", "writer")
    r = await writer.raw("decision.record_many", records=[region(0)], namespace=unique("ns"))
    assert r.status_code in (403, 404), r.text
    other_org, _ = await bootstrap_org(stack.runtime.identity, stack.runtime.codec, unique("org"), unique("ns"), 3600)
    # Another org's admin naming this namespace addresses the namespace of that name in its own org.
    async with desk.tenant.client(other_org, **{"X-Loom-Namespace": desk.tenant.namespace}) as stranger:
        assert (await call(stranger, "decision.record_many", records=[region(0)])).status_code == 200
    await desk.as_agent("importer").refused(404, "RESOURCE_NOT_FOUND", "memory.get", memory_key=region_key(0))


async def test_a_retried_import_writes_nothing_twice(desk: Desk) -> None:
    a = desk.as_agent("importer")
    records = [STORAGE, *(region(i) for i in range(4))]
    first = (await a.ok("decision.record_many", records=records))["results"]
    rows_before = await a.ok("memory.history", memory_key=KEY)
    again = (await a.ok("decision.record_many", records=records))["results"]
    for before, after in zip(first, again, strict=True):
        d = after["decision"]
        assert (d["restated"], d["created"], d["superseded_prior"], d["version"]) == (True, False, False, before["decision"]["version"])
    assert await a.ok("memory.history", memory_key=KEY) == rows_before
    assert (await a.ok("memory.get", memory_key=KEY))["reinforcements"] == 0
    # One record changed in the file: only it is written.
    changed = (await a.ok("decision.record_many", records=[STORAGE, region(0, "keep them 45 days")]))["results"]
    assert changed[0]["decision"]["restated"] is True
    assert (changed[1]["decision"]["version"], changed[1]["decision"]["superseded_prior"]) == (2, True)


async def test_a_locked_key_or_a_pinned_row_refuses_its_item_only(desk: Desk) -> None:
    a = desk.as_agent("importer")
    await a.ok("decision.record_many", records=[region(0), region(1)])
    await a.ok("memory.lock", memory_key=region_key(0), ttl_seconds=60)
    await a.ok("memory.pin", memory_key=region_key(1))
    out = (await a.ok("decision.record_many", records=[region(0, "keep 90 days"), region(1, "keep 90 days"), region(2), region(1)]))[
        "results"
    ]
    assert (out[0]["error"]["code"], out[0]["error"]["http_status"]) == ("LOCKED", 423)
    assert (out[1]["error"]["code"], out[1]["error"]["http_status"]) == ("PINNED_CONFLICT", 409)
    assert out[2]["decision"]["created"] is True
    assert out[3]["decision"]["restated"] is True  # the pinned row's own decision, word for word
    assert [r["outcome"] for r in (await a.ok("memory.history", memory_key=region_key(0)))["records"]] == ["keep them 30 days"]


async def test_a_key_named_many_times_answers_each_as_its_turn_finds_the_key(desk: Desk) -> None:
    """Rounds after one that wrote nothing under a key answer from what that round read (the
    key's lock is held across the call): each answer is still the one its turn would get."""
    a = desk.as_agent("importer")
    same, changed = region(0, "keep 30 days"), region(0, "keep 60 days")
    out = [r["decision"] for r in (await a.ok("decision.record_many", records=[same] * 6 + [changed] * 4 + [same] * 3))["results"]]
    assert [(d["created"], d["restated"], d["superseded_prior"], d["version"]) for d in out] == [
        (True, False, False, 1),
        *[(False, True, False, 1)] * 5,
        (False, False, True, 2),
        *[(False, True, False, 2)] * 3,
        (False, False, True, 3),
        *[(False, True, False, 3)] * 2,
    ]
    assert [d["statement"] for d in out] == [out[0]["statement"]] * 6 + [out[6]["statement"]] * 4 + [out[0]["statement"]] * 3
    hist = await a.ok("memory.history", memory_key=region_key(0))
    assert [r["outcome"] for r in hist["records"]] == ["keep 30 days", "keep 60 days", "keep 30 days"]
    assert (await a.ok("memory.get", memory_key=region_key(0)))["reinforcements"] == 0
    # A pinned row refuses every record that would change it, and holds its own decision restated.
    await a.ok("memory.pin", memory_key=region_key(0))
    out = (await a.ok("decision.record_many", records=[changed] * 3 + [same] * 2 + [changed]))["results"]
    assert [r["error"]["code"] if "error" in r else r["decision"]["restated"] for r in out] == ["PINNED_CONFLICT"] * 3 + [True] * 2 + [
        "PINNED_CONFLICT"
    ]
    assert len((await a.ok("memory.history", memory_key=region_key(0)))["records"]) == 3


async def test_single_records_racing_an_import_on_its_keys_keep_per_key_versions(desk: Desk) -> None:
    a, b = desk.as_agent("importer"), desk.as_agent("other")
    n = 12
    imported = a.ok("decision.record_many", records=[region(i, "import says 30 days") for i in range(n)])
    # At once: the import, the same writer deciding each key otherwise, and another identity too.
    mine = [a.ok("decision.record", **region(i, "single says 60 days")) for i in range(n)]
    theirs = [b.ok("decision.record", **region(i, "other says 90 days")) for i in range(n)]
    bulk, *singles = await asyncio.gather(imported, *mine, *theirs)
    for i in range(n):
        answers = [bulk["results"][i]["decision"], singles[i], singles[n + i]]
        mine_versions = sorted(x["version"] for x in answers[:2])
        assert mine_versions == [1, 2], answers  # the writer's row: one version each, in some order
        assert answers[2]["version"] == 1  # the other identity's row is its own
        hist = await a.ok("memory.history", memory_key=region_key(i), agent_id="importer")
        records = hist["records"]
        assert sorted(int(r["version"]) for r in records) == [1, 2, 3]  # the key's record: one version per write
        assert [r["status"] for r in records] == ["active", "superseded", "superseded"]
        assert sorted(x["superseded_prior"] for x in answers) == [False, True, True]  # only the first superseded nothing
        # The writer's head is its newest version.
        head = await a.ok("memory.get", memory_key=region_key(i), agent_id="importer")
        newest = max(answers[:2], key=lambda x: x["version"])
        assert head["value"] == newest["statement"]


async def test_record_many_over_grpc_straight_to_the_plane(desk: Desk, stack: Instance, transport: str) -> None:
    if transport != "grpc":
        pytest.skip("the plane serves gRPC under the grpc transport")
    md = [("authorization", f"Bearer {desk.tenant.token}"), ("x-loom-namespace", desk.tenant.namespace), ("x-loom-agent", "importer")]
    async with grpc.aio.insecure_channel(stack.grpc_address("decisions")) as channel:
        stub = decisions_pb2_grpc.DecisionServiceStub(channel)
        req = dpb.RecordDecisionsRequest(records=[dpb.RecordDecisionRequest(**region(i)) for i in range(3)])
        out = await stub.RecordDecisions(req, metadata=md)
        assert [r.decision.memory_key for r in out.results] == [region_key(i) for i in range(3)]
        assert all(r.decision.created and not r.HasField("error") for r in out.results)
        bad = dpb.RecordDecisionsRequest(records=[dpb.RecordDecisionRequest(**region(3)), dpb.RecordDecisionRequest(category="x")])
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.RecordDecisions(bad, metadata=md)
        assert refused.value.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION)
    a = desk.as_agent("importer")
    await a.refused(404, "RESOURCE_NOT_FOUND", "memory.get", memory_key=region_key(3))


@pytest.fixture
async def agent(tenant: Tenant) -> AsyncIterator[Agent]:
    async with Agent(org=tenant.org, namespace=tenant.namespace, agent="importer", api_key=tenant.token, base_url=tenant.base_url) as a:
        yield a


async def test_record_many_through_the_python_sdk(agent: Agent) -> None:
    out = await agent.ops.decision.record_many(records=[region(i) for i in range(3)])  # type: ignore[misc]
    assert [r["decision"]["memory_key"] for r in out["results"]] == [region_key(i) for i in range(3)]
    assert (await agent.ops.memory.get(memory_key=region_key(2)))["agent_id"] == "importer"


async def test_the_ledger_holds_one_decision_record_row_per_record(desk: Desk) -> None:
    a = desk.as_agent("importer")
    await a.ok("decision.record", **region(0))
    await a.ok("memory.lock", memory_key=region_key(0), ttl_seconds=60)
    await a.ok("decision.record_many", records=[region(0, "keep 90 days"), region(1), region(2)])
    rt = desk.inst.runtime
    rows: list[dict[str, Any]] = []
    for _ in range(100):
        await rt.ledger.flush()
        rows = await rt.store.query(
            "SELECT op, ok, error_code FROM {db}.agent_events WHERE org = {org:String} AND op LIKE 'decision.record%'",
            {"org": desk.tenant.org},
        )
        if len(rows) >= 4:
            break
        await asyncio.sleep(0.05)
    assert sorted((r["op"], int(r["ok"]), r["error_code"]) for r in rows) == [
        ("decision.record", 0, "LOCKED"),
        ("decision.record", 1, ""),
        ("decision.record", 1, ""),
        ("decision.record", 1, ""),
    ]

"""The memory.* ops: reads that return keys (and the exposure rows they record under the call's
run, which breadth_within reads), identities, revisions by id, live row counts."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from loom_core.bus import NatsServer
from loom_core.exposures import live_rows
from loom_core.store.embedded import EmbeddedStore
from loom_decisions.service.rows import Rows
from loom_decisions.store.memory import MemoryStore
from loom_runner.embedded import Instance

from tests.conftest import Tenant
from tests.policy.conftest import enforce_stack, enforce_tenant, new_tenant, start_policy_instance  # noqa: F401

from .conftest import STORAGE, Api, Desk

KEY = "decision/storage/retention-for-raw-transcripts-in-the-support-namespace"


async def exposures_of(inst: Instance, org: str, run_id: str) -> list[tuple[str, str]]:
    # The plane stores exposure rows in the background: wait for the inserts begun so far.
    for plane in inst.planes:
        if plane.name == "decisions":
            await plane.rows.exposures.flush()  # type: ignore[attr-defined]
    rows = await inst.runtime.store.query(
        "SELECT op, key FROM {db}.memory_exposures WHERE org = {org:String} AND run_id = {run:String} ORDER BY op, key",
        {"org": org, "run": run_id},
    )
    return [(r["op"], r["key"]) for r in rows]


async def test_get_answers_the_row_with_its_identity_and_state(desk: Desk) -> None:
    a = desk.as_agent("planner", user="u-1", session="s-1")
    rec = await a.ok("decision.record", **STORAGE)
    row = await a.ok("memory.get", memory_key=KEY)
    assert {
        k: row[k]
        for k in ("key", "value", "version", "memory_type", "pinned", "agent_id", "user_id", "session_id", "attestation", "status")
    } == {
        "key": KEY,
        "value": rec["statement"],
        "version": 1,
        "memory_type": "decision",
        "pinned": False,
        "agent_id": "planner",
        "user_id": "u-1",
        "session_id": "s-1",
        "attestation": "none",
        "status": "active",
    }
    assert row["tags"] == ["decision:category:storage"] and row["memory_id"] and row["value_hash"]


async def test_get_picks_an_identity_by_user_or_session(desk: Desk) -> None:
    await desk.as_agent("planner", user="u-1").ok("decision.record", **STORAGE)
    await desk.as_agent("planner", user="u-2").ok("decision.record", **{**STORAGE, "outcome": "keep transcripts 10 days"})
    a = desk.as_agent("reader")
    assert "30 days" in (await a.ok("memory.get", memory_key=KEY, user_id="u-1"))["value"]
    assert "10 days" in (await a.ok("memory.get", memory_key=KEY, user_id="u-2"))["value"]
    assert "10 days" in (await a.ok("memory.get", memory_key=KEY))["value"]  # the newest identity's
    await a.refused(404, "RESOURCE_NOT_FOUND", "memory.get", memory_key=KEY, session_id="nobody")
    await a.refused(404, "RESOURCE_NOT_FOUND", "memory.get", memory_key="no/such/key")


async def test_list_filters_by_type_tag_and_prefix(desk: Desk) -> None:
    a = desk.as_agent("planner")
    await a.ok("decision.record", **STORAGE)
    await a.ok("decision.record", category="build", scenario="which CI runner builds wheels", outcome="hosted runners", stage="proposed")
    assert len((await a.ok("memory.list", memory_type="decision"))["rows"]) == 2
    assert [r["key"] for r in (await a.ok("memory.list", tag="decision:proposed"))["rows"]] == [
        "decision/build/which-ci-runner-builds-wheels"
    ]
    assert [r["key"] for r in (await a.ok("memory.list", prefix="decision/storage/"))["rows"]] == [KEY]
    await a.refused(422, "VALIDATION_FAILED", "memory.list", limit=501)


async def test_search_finds_a_row_by_meaning(desk: Desk) -> None:
    a = desk.as_agent("planner")
    await a.ok("decision.record", **STORAGE)
    await a.ok("decision.record", category="build", scenario="which CI runner builds wheels", outcome="hosted runners")
    hits = (await a.ok("memory.search", query="how long are customer chat logs retained?"))["hits"]
    assert hits[0]["key"] == KEY and hits[0]["score"] > hits[1]["score"]
    await a.refused(422, "VALIDATION_FAILED", "memory.search", query="  ")
    await a.refused(422, "VALIDATION_FAILED", "memory.search", query="x", limit=51)


async def test_history_lists_every_version_newest_first(desk: Desk) -> None:
    a = desk.as_agent("planner")
    await a.ok("decision.record", **STORAGE)
    await a.ok("memory.pin", memory_key=KEY)
    hist = await a.ok("memory.history", memory_key=KEY)
    assert [(v["version"], v["op"], v["pinned"]) for v in hist["versions"]] == [(2, "memory.pin", True), (1, "decision.record", False)]
    await a.refused(404, "RESOURCE_NOT_FOUND", "memory.history", memory_key="never/stored")


async def test_update_by_id_is_conditional_on_the_value_and_keeps_pin_and_attestation(desk: Desk) -> None:
    a = desk.as_agent("planner")
    await a.ok("decision.record", **STORAGE)
    await a.ok("memory.pin", memory_key=KEY)
    await a.ok("memory.verify", memory_key=KEY)
    row = await a.ok("memory.get", memory_key=KEY)
    await a.refused(
        409, "PRECONDITION_FAILED", "memory.update_by_id", memory_id=row["memory_id"], tags=["x"], set_tags=True, if_value_hash="0" * 64
    )
    out = await a.ok(
        "memory.update_by_id", memory_id=row["memory_id"], tags=["source-changed"], set_tags=True, if_value_hash=row["value_hash"]
    )
    assert (out["pinned"], out["attestation"]) == (True, "current")
    out = await a.ok("memory.update_by_id", memory_id=row["memory_id"], value="Transcripts of the support namespace are kept for a month.")
    assert (out["pinned"], out["attestation"]) == (True, "stale")
    hits = (await a.ok("memory.search", query="support transcripts kept a month", limit=1))["hits"]
    assert hits[0]["value"] == "Transcripts of the support namespace are kept for a month."
    await a.refused(404, "RESOURCE_NOT_FOUND", "memory.update_by_id", memory_id="nope", tags=[], set_tags=True)


async def test_writes_publish_the_namespaces_live_row_count(desk: Desk) -> None:
    a = desk.as_agent("planner")
    rows: Rows = next(p for p in desk.inst.planes if p.name == "decisions").rows
    await a.ok("decision.record", **STORAGE)
    await a.ok("decision.record", category="build", scenario="which CI runner builds wheels", outcome="hosted runners")
    store = desk.inst.runtime.store
    await rows.live_published()  # published in the background, a count at most once a second
    assert await live_rows(store, desk.tenant.org, desk.tenant.namespace) == {"memory": 2}
    await a.ok("memory.delete", memory_key=KEY)
    await rows.live_published()
    assert await live_rows(store, desk.tenant.org, desk.tenant.namespace) == {"memory": 1}


async def test_a_record_that_adds_no_live_row_publishes_no_count(desk: Desk) -> None:
    """decision.record publishes the count only when it made a new live row: a writer's new
    version of its own live row (a revision, a restatement) leaves the count as it was."""
    rows: Rows = next(p for p in desk.inst.planes if p.name == "decisions").rows
    store, org, ns = desk.inst.runtime.store, desk.tenant.org, desk.tenant.namespace

    async def published() -> list[str]:
        await rows.live_published()
        found = await store.query(
            "SELECT toString(updated_at) AS at FROM {db}.live_row_counts FINAL WHERE org = {org:String} AND namespace = {ns:String}",
            {"org": org, "ns": ns},
        )
        return [str(r["at"]) for r in found]

    planner = desk.as_agent("planner")
    await planner.ok("decision.record", **STORAGE)
    first = await published()
    assert (await planner.ok("decision.record", **{**STORAGE, "outcome": "keep raw transcripts 60 days"}))["created"] is False
    await planner.ok("decision.record", **STORAGE)
    assert await published() == first
    assert (await desk.as_agent("reviewer").ok("decision.record", **STORAGE))["created"] is True
    assert await published() != first
    assert await live_rows(store, org, ns) == {"memory": 2}


async def test_callers_that_find_the_live_count_lapsed_share_one_count(desk: Desk) -> None:
    await desk.as_agent("planner").ok("decision.record", **STORAGE)
    mem = MemoryStore(desk.inst.runtime.store)
    counted: list[int] = []
    live_count = mem.live_count

    async def noted(org: str, ns: str) -> int:
        counted.append(await live_count(org, ns))
        return counted[-1]

    mem.live_count = noted  # type: ignore[method-assign]  # a spy on the real count
    org, ns = desk.tenant.org, desk.tenant.namespace
    assert await asyncio.gather(*(mem.live_count_cached(org, ns) for _ in range(50))) == [1] * 50
    assert counted == [1]
    assert await mem.live_count_cached(org, ns) == 1 and counted == [1]  # within its 30 s
    # Lapsed: the next callers share one more count; one of them cancelled leaves it to the others.
    waiting = [asyncio.ensure_future(mem.live_count_cached(org, ns, ttl=0.0)) for _ in range(20)]
    await asyncio.sleep(0)
    waiting[0].cancel()
    assert await asyncio.gather(*waiting[1:]) == [1] * 19
    assert counted == [1, 1]


async def test_key_returning_reads_record_exposures_under_the_calls_run(desk: Desk) -> None:
    await desk.as_agent("planner").ok("decision.record", **STORAGE)
    run = uuid.uuid4().hex
    a = desk.as_agent("reader", run_id=run)
    await a.ok("memory.get", memory_key=KEY)
    await a.ok("memory.list", memory_type="decision")
    await a.ok("memory.search", query="transcript retention")
    await a.ok("decision.precedents", query="transcript retention")
    await a.ok("decision.chain", memory_key=KEY)
    assert await exposures_of(desk.inst, desk.tenant.org, run) == [
        ("decision.chain", KEY),
        ("decision.chain", "policy/legal/hold"),
        ("decision.precedents", KEY),
        ("memory.get", KEY),
        ("memory.list", KEY),
        ("memory.search", KEY),
    ]


@pytest.fixture(scope="module")
async def quiet_stack(stack: Instance, data_dir: Path, store: EmbeddedStore, nats_server: NatsServer) -> AsyncIterator[Instance]:
    inst = await start_policy_instance(data_dir, store, nats_server, "decisions-no-exposures", memory_exposure_ledger_enabled=False)
    yield inst
    await inst.stop()


async def test_with_the_exposure_ledger_off_reads_record_none(quiet_stack: Instance) -> None:
    t = await new_tenant(quiet_stack)
    run = uuid.uuid4().hex
    async with t.client(**{"X-Loom-Agent": "reader", "X-Loom-Run-Id": run}) as c:
        api = Api(c, "reader")
        await api.ok("decision.record", **STORAGE)
        await api.ok("memory.get", memory_key=KEY)
        await api.ok("memory.search", query="transcript retention")
    assert await exposures_of(quiet_stack, t.org, run) == []


async def test_search_keeps_only_each_rows_newest_version(quiet_stack: Instance) -> None:
    t = await new_tenant(quiet_stack)  # memory_vectors holds both versions of the key until a merge
    async with t.client(**{"X-Loom-Agent": "planner"}) as c:
        api = Api(c, "planner")
        await api.ok("decision.record", **STORAGE)
        await api.ok("decision.record", **{**STORAGE, "outcome": "keep transcripts 45 days"})
        await api.ok("decision.record", category="build", scenario="which CI runner builds wheels", outcome="hosted runners")
        hits = (await api.ok("memory.search", query="how long are support transcripts kept?", limit=5))["hits"]
    assert [(h["key"], h["version"]) for h in hits][:1] == [(KEY, 2)]
    assert len(hits) == 2 and "45 days" in hits[0]["value"]


async def test_breadth_within_denies_once_memory_reads_showed_too_many_keys(enforce_stack: Instance, enforce_tenant: Tenant) -> None:  # noqa: F811
    async with enforce_tenant.client(**{"X-Loom-Agent": "bot"}) as c:
        api = Api(c, "bot")
        for i in range(3):
            await api.ok("decision.record", category="notes", scenario=f"note number {i}", outcome=f"value {i}")
        await api.ok(
            "policy.set",
            name="not-too-broad",
            effect="forbid",
            actions=["memory.get"],
            condition={"op": "breadth_within", "within": "1h", "cmp": "gt", "value": 2},
        )
        await api.ok("memory.get", memory_key="decision/notes/note-number-0")
        await api.ok("memory.get", memory_key="decision/notes/note-number-1")
        await api.ok("memory.get", memory_key="decision/notes/note-number-2")  # shown 2 before this call: allowed
        err = await api.refused(403, "POLICY_FORBIDDEN", "memory.get", memory_key="decision/notes/note-number-0")
    leaf = err["detail"]["rules"][0]["leaves"][0]
    assert (leaf["op"], leaf["observed"]) == ("breadth_within", 3.0)


async def test_update_by_id_meets_the_conflict_check_again(desk: Desk) -> None:
    a = desk.as_agent("planner")
    first = await a.ok("decision.record", **STORAGE)
    other = await a.ok("decision.record", category="build", scenario="which CI runner builds wheels", outcome="hosted runners")
    assert other.get("conflicts", []) == []
    row = await a.ok("memory.get", memory_key=other["memory_key"])
    # Revised to say what the first decision says: now marked as its conflict.
    await a.ok("memory.update_by_id", memory_id=row["memory_id"], value=first["statement"])
    assert (await a.ok("memory.get", memory_key=other["memory_key"]))["conflicts"] == [first["memory_key"]]
    # Revised away again: the stale mark is cleared.
    await a.ok("memory.update_by_id", memory_id=row["memory_id"], value="which CI runner builds wheels. Decided hosted runners.")
    assert (await a.ok("memory.get", memory_key=other["memory_key"])).get("conflicts", []) == []


async def test_search_puts_a_row_naming_the_identifier_above_rows_that_paraphrase_it(desk: Desk) -> None:
    a = desk.as_agent("planner")
    named = await a.ok(
        "decision.record",
        category="ops",
        scenario="switching the history-policy gate on for the production deployment after a week of shadow decisions",
        outcome="set LOOM_POLICY_MODE=enforce",
        reasoning="replay showed no false denials",
    )
    await a.ok("decision.record", category="ops", scenario="policy mode", outcome="enforce policies")
    await a.ok("decision.record", category="ops", scenario="policy gate mode for production", outcome="enforce")
    out = await a.ok("memory.search", query="LOOM_POLICY_MODE", limit=3)
    assert out["hits"][0]["key"] == named["memory_key"] and not out.get("weak")
    out = await a.ok("memory.search", query="what is LOOM_POLICY_MODE set to in production?", limit=3)
    assert out["hits"][0]["key"] == named["memory_key"]


async def test_search_says_when_nothing_stored_is_about_the_query(desk: Desk) -> None:
    a = desk.as_agent("planner")
    await a.ok("decision.record", **STORAGE)
    weak = await a.ok("memory.search", query="banana bread recipe with walnuts")
    assert weak["weak"] is True
    strong = await a.ok("memory.search", query="how long are customer chat logs retained?")
    assert not strong.get("weak") and strong["hits"][0]["key"] == KEY

"""search.unified, MCP `loom_search` (spec 003, Decisions: unified search): one search over the
memories, decisions and tasks the token can read, each source read through its own op as the
caller, so each is authorized as that op is (role per namespace, history policies); ranked on
one scale."""

from __future__ import annotations

import time
from typing import Any

import httpx2
import pytest
from loom import Agent
from loom_core.errors import LoomError
from loom_core.identity.tokens import Principal, new_token_id
from loom_core.op_caller import HttpOpCaller
from loom_runner.embedded import Instance
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import Tenant, call, unique
from tests.policy.conftest import enforce_stack, enforce_tenant  # noqa: F401

from .conftest import STORAGE, Desk

DECISION_KEY = "decision/storage/retention-for-raw-transcripts-in-the-support-namespace"
QUERY = "how long do we keep raw transcripts"


async def mcp_search(url: str, token: str, args: dict[str, Any]) -> Any:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http), mode="legacy") as client,
    ):
        names = {t.name for t in (await client.list_tools()).tools}
        assert "loom_search" in names and "loom_search_unified" not in names
        return await client.call_tool("loom_search", args)


async def seed(t: Tenant, other_ns: str) -> str:
    """A decision, a memory and a task in the tenant's namespace; a memory in another one. The task's id."""
    async with t.client(**{"X-Loom-Namespace": t.namespace}) as c:
        assert (await call(c, "namespace.create", name=other_ns)).status_code == 200
        assert (await call(c, "decision.record", **STORAGE)).status_code == 200
        assert (await call(c, "memory.set", memory_key="notes/replay", value="Replays read 30 days of raw transcripts.")).status_code == 200
        inbox = unique("ops")
        assert (await call(c, "inbox.register", inbox=inbox)).status_code == 200
        r = await call(c, "task.create", inbox=inbox, kind="chore", title="Purge raw transcripts older than 30 days")
        assert r.status_code == 200, r.text
        task_id = str(r.json()["task"]["task_id"])
        r = await call(c, "task.create", inbox=inbox, kind="chore", title="Rotate the signing key of the webhook")
        assert r.status_code == 200, r.text
    async with t.client(**{"X-Loom-Namespace": other_ns}) as c:
        r = await call(c, "memory.set", memory_key="notes/elsewhere", value="Transcripts in the other team are kept a week.")
        assert r.status_code == 200
    return task_id


def token_for(desk: Desk, sub: str, roles: dict[str, str]) -> str:
    now = int(time.time())
    p = Principal(
        jti=new_token_id("test-"),
        sub=sub,
        org=desk.tenant.org,
        roles=roles,
        iat=now,
        exp=now + 3600,
        default_namespace=desk.tenant.namespace,
    )
    return desk.inst.runtime.codec.encode(p)


async def test_loom_search_ranks_memories_decisions_and_tasks_of_every_readable_namespace(desk: Desk) -> None:
    t = desk.tenant
    other_ns = unique("ns")
    task_id = await seed(t, other_ns)

    res = await mcp_search(desk.inst.base_url + "/mcp", t.token, {"query": QUERY, "limit": 10})
    assert not res.is_error, res
    body = res.structured_content
    found = {(r["kind"], r["namespace"], r["key"]) for r in body["results"]}
    assert ("decision", t.namespace, DECISION_KEY) in found
    assert ("memory", t.namespace, "notes/replay") in found
    assert ("memory", other_ns, "notes/elsewhere") in found
    assert ("task", t.namespace, task_id) in found
    # A task about something else is not a hit (no word of the query, far in meaning).
    assert [r["key"] for r in body["results"] if r["kind"] == "task"] == [task_id]
    task = next(r for r in body["results"] if r["kind"] == "task")
    assert task["status"] == "todo" and task["text"] == "Purge raw transcripts older than 30 days"
    assert next(r for r in body["results"] if r["kind"] == "decision")["stage"] == "decided"
    assert sorted(body["namespaces"]) == sorted([t.namespace, other_ns])
    scores = [r["score"] for r in body["results"]]
    assert scores == sorted(scores, reverse=True) and all(0 < s <= 1 for s in scores)

    # The same op over REST, by its dotted name; sources narrow what is read.
    async with t.client() as c:
        r = await call(c, "search.unified", query=QUERY, sources=["task"])
        assert r.status_code == 200, r.text
        assert {(h["kind"], h["key"]) for h in r.json()["results"]} == {("task", task_id)}
        r = await call(c, "search.unified", query=QUERY, sources=["decision"], namespaces=[t.namespace])
        assert [(h["kind"], h["key"]) for h in r.json()["results"]] == [("decision", DECISION_KEY)]

    # And through the SDK's generated method.
    async with Agent(org=t.org, namespace=t.namespace, agent="sdk", api_key=t.token, base_url=t.base_url) as agent:
        got = await agent.ops.search.unified(query=QUERY, namespaces=[other_ns])
        assert [(h["kind"], h["key"]) for h in got["results"]] == [("memory", "notes/elsewhere")]


async def test_loom_search_reads_only_the_namespaces_the_token_may_read(desk: Desk) -> None:
    t = desk.tenant
    other_ns = unique("ns")
    task_id = await seed(t, other_ns)
    await desk.grant("reader", "viewer")
    viewer = token_for(desk, "sa:reader", {t.namespace: "viewer"})

    res = await mcp_search(desk.inst.base_url + "/mcp", viewer, {"query": QUERY})
    assert not res.is_error, res
    body = res.structured_content
    assert {r["namespace"] for r in body["results"]} == {t.namespace}
    assert ("task", task_id) in {(r["kind"], r["key"]) for r in body["results"]}
    assert body["namespaces"] == [t.namespace]

    # Naming a namespace it holds no role in reads nothing there, and says which source refused.
    asked = await mcp_search(desk.inst.base_url + "/mcp", viewer, {"query": "transcripts", "namespaces": [other_ns]})
    assert not asked.is_error, asked
    out = asked.structured_content
    assert out["results"] == [] and out["namespaces"] == []
    assert {(s["namespace"], s["source"], s["code"]) for s in out["skipped"]} == {
        (other_ns, "memory", "AUTH_INSUFFICIENT"),
        (other_ns, "task", "AUTH_INSUFFICIENT"),
    }


async def test_loom_search_refuses_a_token_with_no_role_another_org_and_bad_input(desk: Desk) -> None:
    t = desk.tenant
    nobody = token_for(desk, "sa:nobody", {})
    async with t.client(nobody) as c:
        r = await call(c, "search.unified", query=QUERY)
        assert r.status_code == 403 and r.json()["error"]["code"] == "AUTH_INSUFFICIENT", r.text
    res = await mcp_search(desk.inst.base_url + "/mcp", nobody, {"query": QUERY})
    assert res.is_error and res.structured_content["error"]["code"] == "AUTH_INSUFFICIENT"
    async with t.client(**{"X-Loom-Org": unique("org")}) as c:
        r = await call(c, "search.unified", query=QUERY)
        assert r.status_code == 403 and r.json()["error"]["code"] == "AUTH_WRONG_ORG", r.text
    async with t.client() as c:
        for bad in (
            {"query": ""},
            {"query": "x", "limit": 500},
            {"query": "x", "sources": ["files"]},
            {"query": "x", "namespaces": ["Bad NS"]},
        ):
            r = await call(c, "search.unified", **bad)
            assert r.status_code == 422 and r.json()["error"]["code"] == "VALIDATION_FAILED", (bad, r.text)
    bad = await mcp_search(desk.inst.base_url + "/mcp", t.token, {"query": "x", "limit": 500})
    assert bad.is_error


async def test_loom_search_gives_no_tasks_to_a_caller_a_policy_keeps_from_reading_tasks(
    enforce_stack: Instance,  # noqa: F811
    enforce_tenant: Tenant,  # noqa: F811
) -> None:
    t = enforce_tenant
    task_id = await seed(t, unique("ns"))
    async with Agent(org=t.org, namespace=t.namespace, agent="admin", api_key=t.token, base_url=t.base_url) as admin:
        await admin.policy.set(
            "no-task-reads",
            effect="forbid",
            actions=["task.list"],
            condition={"op": "count_within", "within": "1h", "operation": "task.list", "cmp": "gte", "value": 0},
            description="This namespace's tasks are read from the dashboard only.",
        )
    async with t.client(**{"X-Loom-Agent": "nosy", "X-Loom-Namespace": t.namespace}) as c:
        r = await call(c, "task.list")
        assert r.status_code == 403 and r.json()["error"]["code"] == "POLICY_FORBIDDEN", r.text
        r = await call(c, "search.unified", query=QUERY, namespaces=[t.namespace])
        assert r.status_code == 200, r.text
        body = r.json()
        kinds = {h["kind"] for h in body["results"]}
        assert "task" not in kinds and task_id not in {h["key"] for h in body["results"]}
        assert {"memory", "decision"} <= kinds
        assert body["skipped"] == [{"namespace": t.namespace, "source": "task", "code": "POLICY_FORBIDDEN"}]
        assert body["namespaces"] == [t.namespace]


async def test_a_clusters_plane_reads_the_ops_through_a_gateway_over_http(desk: Desk) -> None:
    """LOOM_SEARCH_LOOM_URL's caller: the ops as the caller, a refusal as its LoomError."""
    t = desk.tenant
    await seed(t, unique("ns"))
    ops = HttpOpCaller(desk.inst.base_url)
    try:
        found = await ops("memory.search", {"query": QUERY, "namespace": t.namespace}, {"authorization": f"Bearer {t.token}"}, "rest")
        assert DECISION_KEY in {h["key"] for h in found["hits"]}
        nobody = token_for(desk, "sa:nobody", {})
        with pytest.raises(LoomError) as refused:
            await ops("task.list", {"namespace": t.namespace}, {"authorization": f"Bearer {nobody}"}, "rest")
        assert refused.value.code.value == "AUTH_INSUFFICIENT" and refused.value.http_status == 403
    finally:
        await ops.close()

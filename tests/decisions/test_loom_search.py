"""MCP `loom_search` (spec 003, Decisions: unified search): one search over the memories,
decisions and tasks the token can read, through the `mcp` SDK's client against the running
stack; a namespace the token holds no role in answers nothing."""

from __future__ import annotations

import time
from typing import Any

import httpx2
from loom_core.identity.tokens import Principal, new_token_id
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import call, unique

from .conftest import STORAGE, Desk


async def mcp_search(url: str, token: str, args: dict[str, Any]) -> Any:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http), mode="legacy") as client,
    ):
        names = {t.name for t in (await client.list_tools()).tools}
        assert "loom_search" in names
        return await client.call_tool("loom_search", args)


async def test_loom_search_finds_memories_decisions_and_tasks_across_readable_namespaces(desk: Desk) -> None:
    t = desk.tenant
    other_ns = unique("ns")
    async with t.client(**{"X-Loom-Namespace": t.namespace}) as c:
        assert (await call(c, "namespace.create", name=other_ns)).status_code == 200
        assert (await call(c, "decision.record", **STORAGE)).status_code == 200
        assert (await call(c, "memory.set", memory_key="notes/replay", value="Replays read 30 days of raw transcripts.")).status_code == 200
        inbox = unique("ops")
        assert (await call(c, "inbox.register", inbox=inbox)).status_code == 200
        r = await call(c, "task.create", inbox=inbox, kind="chore", title="Purge raw transcripts older than 30 days")
        assert r.status_code == 200, r.text
    async with t.client(**{"X-Loom-Namespace": other_ns}) as c:
        assert (
            await call(c, "memory.set", memory_key="notes/elsewhere", value="Transcripts in the other team are kept a week.")
        ).status_code == 200

    res = await mcp_search(desk.inst.base_url + "/mcp", t.token, {"query": "how long do we keep raw transcripts", "limit": 10})
    assert not res.is_error, res
    body = res.structured_content
    found = {(r["kind"], r["namespace"], r["key"]) for r in body["results"]}
    assert ("decision", t.namespace, "decision/storage/retention-for-raw-transcripts-in-the-support-namespace") in found
    assert ("memory", t.namespace, "notes/replay") in found
    assert ("memory", other_ns, "notes/elsewhere") in found
    assert any(k == "task" and ns == t.namespace for k, ns, _ in found)
    assert sorted(body["namespaces"]) == sorted([t.namespace, other_ns])
    scores = [r["score"] for r in body["results"]]
    assert scores == sorted(scores, reverse=True)

    # A token that holds a role in one namespace only searches that one.
    now = int(time.time())
    p = Principal(
        jti=new_token_id("test-"),
        sub="sa:reader",
        org=t.org,
        roles={t.namespace: "viewer"},
        iat=now,
        exp=now + 3600,
        default_namespace=t.namespace,
    )
    await desk.grant("reader", "viewer")
    narrow = desk.inst.runtime.codec.encode(p)
    res = await mcp_search(desk.inst.base_url + "/mcp", narrow, {"query": "how long do we keep raw transcripts"})
    assert not res.is_error, res
    assert {r["namespace"] for r in res.structured_content["results"]} == {t.namespace}
    asked = await mcp_search(desk.inst.base_url + "/mcp", narrow, {"query": "transcripts", "namespaces": [other_ns]})
    assert asked.structured_content["results"] == [] and asked.structured_content["namespaces"] == []
    bad = await mcp_search(desk.inst.base_url + "/mcp", t.token, {"query": "x", "limit": 500})
    assert bad.is_error

"""The assistant as a real LibreChat runs it (issue G2): the agent's tool names against the
toolset's listing, the toolset's reach under an answer's token, the chat route through the op
chain (rate class, gate, one ledger row, hostile bodies), OpenAI compatibility in strict mode,
streamed tool calls in pieces, the answer's limit on streams, and auth_off at tools/list."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import mcp_types as types
import pytest
from loom_core.bus import NatsServer
from loom_core.store.embedded import EmbeddedStore
from loom_gateway.identity import bootstrap_org
from loom_runner.embedded import start_instance
from loom_runner.http import HttpServer
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import call, make_settings, unique

from .conftest import Asker, Bench, chat_body, sse_events
from .emulator import Emulator, Turn, agent_yaml_tools

CHAT = "/v1/assistant/chat/completions"
# A history-policy condition that always holds (count of any op in the hour >= 0).
ALWAYS = {"op": "count_within", "within": "1h", "operation": "*", "cmp": "gte", "value": 0}


def rows_query(org: str, op: str = "assistant.ask") -> tuple[str, dict[str, str]]:
    return (
        "SELECT op, ok, error_code, transport, upstream_cost_usd, run_id, request_id FROM {db}.agent_events"
        " WHERE org = {org:String} AND op = {op:String} ORDER BY ts",
        {"org": org, "op": op},
    )


async def answer_rows(bench: Bench, org: str, n: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for _ in range(200):
        await bench.inst.runtime.ledger.flush()
        rows = await bench.inst.runtime.store.query(*rows_query(org))
        if len(rows) >= n:
            return rows
        await asyncio.sleep(0.05)
    raise AssertionError(f"expected {n} assistant.ask rows, got {rows}")


# -- the agent's tools: named as LibreChat names them, and the toolset's listing --------------


async def test_agent_yaml_names_exactly_the_assistant_toolset_as_librechat_exposes_it(bench: Bench, asker: Asker) -> None:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {asker.token}"}, timeout=30) as http,
        Client(streamable_http_client(f"{asker.base_url}/mcp?toolset=assistant", http_client=http), mode="legacy") as client,
    ):
        listed = {t.name for t in (await client.list_tools()).tools}
    # LibreChat's name for an MCP server's tool: `<tool>` + Constants.mcp_delimiter `_mcp_` +
    # the server name (`loom` in deploy/librechat/assistant.librechat.yaml).
    exposed = {f"{name}_mcp_loom" for name in listed}
    named = set(agent_yaml_tools())
    assert not named - exposed, f"agent.yaml names tools the toolset does not list: {sorted(named - exposed)}"
    assert not exposed - named, f"the toolset lists tools agent.yaml does not name: {sorted(exposed - named)}"
    # The spec's tools for the agent that this build serves are on both sides.
    for op in ("grants.list", "memory.search", "memory.get", "help.search", "help.get", "insights.catalog", "insights.query"):
        assert f"loom_{op.replace('.', '_')}_mcp_loom" in named


async def test_the_emulator_offers_the_model_only_the_tools_the_agent_names(bench: Bench, asker: Asker) -> None:
    seen: list[list[str]] = []

    async def misnamed(turn: Turn) -> None:
        seen.append(list(turn.tools))
        # auth.whoami is served over MCP by name, but the agent was not given it.
        await turn.call("auth.whoami", {})
        await turn.say("never")

    bench.emu.script = misnamed
    async with asker.client() as c:
        r = await c.post(CHAT, json=chat_body())
    assert seen and seen[0] == agent_yaml_tools()
    # The model could not make the call: the answer failed, and no auth.whoami reached Loom.
    assert r.status_code == 503 and r.json()["error"]["detail"] == {"reason": "failing"}
    assert not bench.emu.tool_results


# -- the toolset's reach: an answer's token writes nothing, on any door -------------------------

WRITES: dict[str, tuple[str, dict[str, Any]]] = {
    "identity": ("token.mint", {"roles": {"{ns}": "viewer"}, "ttl_seconds": 60}),
    "grants": ("grants.set", {"subject": "user:mallory", "role": "admin"}),
    "namespaces": ("namespace.create", {"name": "made-by-the-assistant"}),
    "service accounts": ("sa.create", {"name": "assistant-sa"}),
    "tasks": ("task.create", {"inbox": "x", "kind": "k", "brief": {}}),
    "inboxes": ("inbox.register", {"inbox": "x"}),
    "decisions": ("decision.record", {"category": "c", "scenario": "s", "outcome": "o"}),
    "memories": ("memory.delete", {"memory_key": "k"}),
    "policies": (
        "policy.set",
        {
            "name": "p",
            "effect": "forbid",
            "actions": ["grants.list"],
            "condition": {"op": "breadth_within", "within": "1h", "cmp": "gt", "value": 2},
        },
    ),
    "assistant controls": ("budget.set", {"daily_cost_cap_usd": 100.0}),
}


async def _answer_token(bench: Bench, asker: Asker) -> str:
    async with asker.client() as c:
        assert (await c.post(CHAT, json=chat_body())).status_code == 200
    return str(bench.emu.chat_bodies[-1]["parent_message_id"])


@pytest.mark.parametrize("family", sorted(WRITES))
async def test_an_answers_token_is_refused_every_write_on_every_door(bench: Bench, asker: Asker, family: str) -> None:
    op, raw = WRITES[family]
    args = json.loads(json.dumps(raw).replace("{ns}", asker.namespace))
    token = await _answer_token(bench, asker)
    async with asker.client(token) as c:
        rest = await call(c, op, **args)
    assert rest.status_code == 403, rest.text
    assert rest.json()["error"]["code"] == "AUTH_INSUFFICIENT" and rest.json()["error"]["detail"]["reason"] == "assistant_toolset"
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http,
        Client(streamable_http_client(f"{asker.base_url}/mcp?toolset=assistant", http_client=http), mode="legacy") as client,
    ):
        res: types.CallToolResult = await client.call_tool("loom_" + op.replace(".", "_"), args)
    assert res.is_error and res.structured_content["error"]["detail"]["reason"] == "assistant_toolset"  # type: ignore[index]


async def test_an_answers_token_still_reads_the_toolset(bench: Bench, asker: Asker) -> None:
    token = await _answer_token(bench, asker)
    async with asker.client(token) as c:
        r = await call(c, "grants.list")
    assert r.status_code == 200, r.text


def test_no_jwt_is_decoded_without_verification_anywhere_in_the_repo() -> None:
    root = Path(__file__).resolve().parents[2]
    needles = ("get_unverified_claims", "get_unverified_header", '"verify_signature": False', "'verify_signature': False")
    hits = [
        f"{p.relative_to(root)}: {n}"
        for p in root.rglob("*.py")
        if ".venv" not in p.parts and p.name != Path(__file__).name
        for n in needles
        if n in p.read_text(errors="replace")
    ]
    assert not hits, hits


# -- one door: the chain's rate class, gate and ledger row --------------------------------------


async def test_a_chat_is_one_ledger_row_the_chain_writes(bench: Bench, asker: Asker) -> None:
    async with asker.client(**{"X-Loom-Request-Id": unique("req")}) as c:
        whole = await c.post(CHAT, json=chat_body())
        streamed = await c.post(CHAT, json=chat_body(stream=True))
    assert whole.status_code == streamed.status_code == 200
    rows = await answer_rows(bench, asker.org, 2)
    assert len(rows) == 2 and all(r["ok"] and r["transport"] == "rest" for r in rows)
    # Each row carries its answer's spend and run id (1200 + 300 tokens on claude-haiku-4-5).
    assert {r["run_id"] for r in rows} == {whole.json()["id"], sse_events(streamed.text)[0]["id"]}  # type: ignore[index]
    assert all(r["upstream_cost_usd"] == pytest.approx(0.0027) for r in rows)


async def test_a_chat_has_its_own_rate_class_and_says_when_to_retry(bench: Bench, asker: Asker, monkeypatch: pytest.MonkeyPatch) -> None:
    limiter = bench.inst.runtime.limiter
    monkeypatch.setitem(limiter.per_minute, "chat", 1)
    async with asker.client() as c:
        first = await c.post(CHAT, json=chat_body())
        second = await c.post(CHAT, json=chat_body())
        # assistant.ask is `heavy`: the chat's limit does not spend it.
        asked = await call(c, "assistant.ask", question="hi")
    assert first.status_code == 200
    assert second.status_code == 429 and int(second.headers["retry-after"]) >= 1
    err = second.json()["error"]
    assert err["code"] == "RATE_LIMITED" and err["detail"]["rate_class"] == "chat" and err["retryable"] is True
    assert asked.status_code == 200, asked.text
    assert len(bench.emu.chat_bodies) == 2  # the limited chat never reached LibreChat
    # assistant.ask's own class is limited too, and says when to retry the same way.
    monkeypatch.setitem(limiter.per_minute, "heavy", 1)
    async with asker.client() as c:
        await call(c, "assistant.ask", question="hi")  # the bucket, cut to one, holds one
        again = await call(c, "assistant.ask", question="hi")
    assert again.status_code == 429 and int(again.headers["retry-after"]) >= 1
    assert again.json()["error"]["detail"]["rate_class"] == "heavy"
    rows = await answer_rows(bench, asker.org, 5)
    assert sorted((r["ok"], r["error_code"]) for r in rows) == [(False, "RATE_LIMITED")] * 2 + [(True, "")] * 3


@pytest.fixture(scope="module")
async def enforce(data_dir: Path, store: EmbeddedStore, nats_server: NatsServer) -> AsyncIterator[tuple[Any, Emulator]]:
    """A replica with the history-policy gate enforcing and the assistant configured."""
    emu = Emulator(loom_url="")
    server = HttpServer(emu.app())
    await server.start()
    settings = make_settings(
        data_dir, assistant_librechat_url=f"http://127.0.0.1:{server.port}", assistant_setup_retry_s=0.05, policy_mode="enforce"
    )
    inst = await start_instance(settings, store=store, nats_url=nats_server.url, name="loom-test-assistant-enforce")
    emu.loom_url = inst.base_url
    plane = next(p for p in inst.planes if p.name == "assistant")
    async with asyncio.timeout(30):
        await plane.setup.wait_ready()
    yield inst, emu
    await inst.stop()
    await server.stop()


async def test_the_policy_gate_refuses_a_chat_as_it_refuses_the_op(enforce: tuple[Any, Emulator]) -> None:
    inst, emu = enforce
    org, ns = unique("org"), unique("ns")
    admin, _ = await bootstrap_org(inst.runtime.identity, inst.runtime.codec, org, ns, 3600)
    async with httpx.AsyncClient(base_url=inst.base_url, headers={"Authorization": f"Bearer {admin}"}, timeout=60) as c:
        minted = (await call(c, "token.mint", roles={ns: "viewer"}, ttl_seconds=3600)).json()
        r = await call(c, "policy.set", name="no-assistant", effect="forbid", actions=["assistant.ask"], condition=ALWAYS)
        assert r.status_code == 200, r.text
    asked = len(emu.chat_bodies)
    async with httpx.AsyncClient(base_url=inst.base_url, headers={"Authorization": f"Bearer {minted['token']}"}, timeout=60) as c:
        chat = await c.post(CHAT, json=chat_body())
        op = await call(c, "assistant.ask", question="hi")
    for r in (chat, op):
        assert r.status_code == 403 and r.json()["error"]["code"] == "POLICY_FORBIDDEN", r.text
    assert len(emu.chat_bodies) == asked


# -- hostile bodies -----------------------------------------------------------------------------


def _hostile() -> dict[str, tuple[bytes, str, tuple[int, str, str]]]:
    """name -> (body, content type, the refusal: status, code, detail.reason). The gateway's
        limits for every route answer first (loom_gateway.limits); the chat's own 4 MiB cap after, by
    the same rules (loom_core.json_limits)."""
    ok = json.dumps(chat_body()).encode()
    invalid = (422, "VALIDATION_FAILED", "invalid character")
    return {
        "10,000-deep JSON": (
            b'{"messages":' + b"[" * 10_000 + b"]" * 10_000 + b"}",
            "application/json",
            (400, "REQUEST_TOO_DEEP", "too deep"),
        ),
        "10 MB body": (
            b'{"messages":[{"role":"user","content":"' + b"a" * (10 * 1024 * 1024) + b'"}]}',
            "application/json",
            (413, "REQUEST_TOO_LARGE", "too large"),
        ),
        "NaN": (
            b'{"messages":[{"role":"user","content":"q"}],"temperature":NaN}',
            "application/json",
            (422, "VALIDATION_FAILED", "not a finite number"),
        ),
        "wrong content type": (ok, "text/plain", (415, "UNSUPPORTED_MEDIA_TYPE", "unsupported media type")),
        "NUL in a string": (b'{"messages":[{"role":"user","content":"a\\u0000b"}]}', "application/json", invalid),
        "a raw NUL byte": (ok[:-1] + b"\x00}", "application/json", (422, "VALIDATION_FAILED", "invalid JSON")),
    }


async def test_hostile_bodies_are_refused_before_anything_runs_and_hold_no_slot(
    bench: Bench, asker: Asker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    async with asker.client() as c:
        for name, (body, content_type, (status, code, reason)) in _hostile().items():
            r = await c.post(CHAT, content=body, headers={"Content-Type": content_type})
            assert r.status_code == status, (name, r.status_code, r.text[:200])
            err = r.json()["error"]
            assert err["code"] == code and err["detail"]["reason"] == reason, (name, err)
            assert err["retryable"] is False
        # Both of the namespace's slots are free: two answers run at once.
        gate = asyncio.Event()
        bench.emu.gate = gate
        both = [asyncio.create_task(c.post(CHAT, json=chat_body())) for _ in range(2)]
        async with asyncio.timeout(10):
            for _ in range(2):
                await bench.emu.chat_seen.acquire()
        gate.set()
        done = await asyncio.gather(*both)
    assert [d.status_code for d in done] == [200, 200]
    assert len(bench.emu.chat_bodies) == 2  # LibreChat was called for the two answers only
    assert not [rec for rec in caplog.records if rec.exc_info], "a traceback was logged"
    # Nothing was charged or ledgered for the refused bodies.
    rows = await answer_rows(bench, asker.org, 2)
    assert len(rows) == 2 and all(r["ok"] for r in rows)


# -- OpenAI compatibility, strict -----------------------------------------------------------------


async def test_the_openai_client_lists_the_agent_and_every_chunk_validates_strictly(bench: Bench, asker: Asker) -> None:
    from openai import AsyncOpenAI  # imported here: ~0.5 CPU-s that every worker's collection paid
    from openai.types.chat import ChatCompletion, ChatCompletionChunk

    async def script(turn: Turn) -> None:
        await turn.call("grants.list", {})
        await turn.call("task.counts", {})
        await turn.say("Two reads. ")
        await turn.say("Nothing stored in Loom answers this.")

    bench.emu.script = script
    client = AsyncOpenAI(base_url=f"{asker.base_url}/v1/assistant", api_key=asker.token)
    models = [m async for m in client.models.list()]
    assert [m.id for m in models] == ["claude-haiku-4-5"]
    assert models[0].model_extra == {"loom_agent_id": bench.plane.setup.row.agent_id}
    whole = await client.chat.completions.create(model="loom", messages=[{"role": "user", "content": "q"}])
    ChatCompletion.model_validate(whole.model_dump(exclude_unset=True), strict=True)
    assert whole.model == "claude-haiku-4-5" and whole.model_extra["loom_agent_id"] == bench.plane.setup.row.agent_id  # type: ignore[index]
    await client.close()
    async with asker.client() as c:
        r = await c.post(CHAT, json=chat_body(stream=True))
    events = sse_events(r.text)
    assert events[-1] == "[DONE]"
    parsed = [ChatCompletionChunk.model_validate(e, strict=True) for e in events[:-1]]
    assert all(p.model == "claude-haiku-4-5" for p in parsed)
    loom = [p for p in parsed if p.model_extra and "loom_event" in p.model_extra]
    assert [p.model_extra["loom_event"] for p in loom if p.model_extra][-2:] == ["loom.text_done", "loom.citations"]
    assert all(p.choices == [] for p in loom)


# -- streamed tool calls, merged by index ----------------------------------------------------------

# A stream in the shape LibreChat's agents API sends (librechat-protocol.md "Streaming"): two
# model steps, three tool calls, each call's id and name first and its arguments in pieces that
# carry only the index; the second step numbers its call from 0 again.
CAPTURED = [
    {"delta": {"role": "assistant"}},
    {
        "delta": {
            "tool_calls": [
                {"index": 0, "id": "toolu_01A", "type": "function", "function": {"name": "loom_memory_search_mcp_loom", "arguments": ""}}
            ]
        }
    },
    {"delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"que'}}]}},
    {"delta": {"tool_calls": [{"index": 0, "function": {"arguments": 'ry": "dep'}}]}},
    {"delta": {"tool_calls": [{"index": 0, "function": {"arguments": 'loys"}'}}]}},
    {
        "delta": {
            "tool_calls": [
                {"index": 1, "id": "toolu_01B", "type": "function", "function": {"name": "loom_help_search_mcp_loom", "arguments": ""}}
            ]
        }
    },
    {"delta": {"tool_calls": [{"index": 1, "function": {"arguments": '{"query"'}}]}},
    {"delta": {"tool_calls": [{"index": 1, "function": {"arguments": ': "deploy"}'}}]}},
    {
        "delta": {
            "tool_calls": [
                {"index": 0, "id": "toolu_02C", "type": "function", "function": {"name": "loom_memory_get_mcp_loom", "arguments": ""}}
            ]
        }
    },
    {"delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"key": '}}]}},
    {"delta": {"tool_calls": [{"index": 0, "function": {"arguments": '"deploy/window"}'}}]}},
    {"delta": {"content": "Deploys run nightly [memory:deploy/window@v1]."}},
    {"delta": {}, "finish_reason": "stop"},
]


def test_tool_call_deltas_are_merged_by_index_each_call_once() -> None:
    from loom_assistant.domain.stream import ToolCalls

    calls = ToolCalls()
    for part in CAPTURED:
        calls.add_chunk({"id": "chatcmpl-x", "object": "chat.completion.chunk", "choices": [{"index": 0, "finish_reason": None, **part}]})
    assert len(calls) == 3
    assert [(c.id, c.name, json.loads(c.arguments)) for c in calls.calls] == [
        ("toolu_01A", "loom_memory_search_mcp_loom", {"query": "deploys"}),
        ("toolu_01B", "loom_help_search_mcp_loom", {"query": "deploy"}),
        ("toolu_02C", "loom_memory_get_mcp_loom", {"key": "deploy/window"}),
    ]


async def test_a_stream_of_several_tool_calls_in_pieces_counts_each_step_once(bench: Bench, asker: Asker) -> None:
    async def script(turn: Turn) -> None:
        await turn.call("grants.list", {})
        await turn.call("task.counts", {})
        await turn.call("help.search", {"query": "how are tasks claimed"})
        await turn.say("Nothing stored in Loom answers this.")

    bench.emu.script = script
    async with asker.client() as c:
        r = await c.post(CHAT, json=chat_body(stream=True))
    events = [e for e in sse_events(r.text) if isinstance(e, dict)]
    pieces = [tc for e in events for ch in e["choices"] for tc in ch["delta"].get("tool_calls") or []]
    assert len(pieces) > 3 and sum("id" in p for p in pieces) == 3  # split, as LibreChat streams them
    final = next(e for e in events if e.get("loom_event") == "loom.citations")
    # Every step, none twice, the last one too: the read waited for exactly three rows.
    assert [s["op"] for s in final["steps"]] == ["grants.list", "task.counts", "help.search"]
    assert final["support"] == "none"


# -- the answer's limit on streams and whole answers ----------------------------------------------


async def test_past_the_answer_ttl_a_stream_ends_with_an_error_event_charged_and_its_slot_freed(
    bench: Bench, asker: Asker, monkeypatch: pytest.MonkeyPatch
) -> None:
    bridge = bench.plane.bridge
    monkeypatch.setattr(bridge, "settings", bridge.settings.model_copy(update={"assistant_answer_ttl_s": 1}))
    never = asyncio.Event()
    bench.emu.gate = never  # LibreChat starts the answer and never finishes it
    async with asker.client() as c:
        streamed = await c.post(CHAT, json=chat_body(stream=True))
        whole = await c.post(CHAT, json=chat_body())
    events = sse_events(streamed.text)
    assert events[-1] == "[DONE]"
    error = events[-2]
    assert error["loom_event"] == "loom.error" and error["choices"] == []  # type: ignore[index]
    assert error["error"]["code"] == "OVERLOADED" and error["error"]["detail"]["reason"] == "answer_ttl"  # type: ignore[index]
    assert whole.status_code == 503 and whole.json()["error"]["detail"]["reason"] == "answer_ttl"
    assert bench.plane.bridge._running[(asker.org, asker.namespace)] == 0
    rows = await answer_rows(bench, asker.org, 2)
    # Not a service failure, and never $0: the ceiling for an answer cut before its usage.
    assert [(r["ok"], r["error_code"]) for r in rows] == [(False, "OVERLOADED")] * 2
    assert all(r["upstream_cost_usd"] == pytest.approx(0.10) for r in rows)
    assert (await bench.plane.health())["assistant"]["ok"] is True


# -- auth_off when tools/list goes out without the token ---------------------------------------------


async def test_tools_list_without_the_token_turns_the_assistant_auth_off(bench: Bench, asker: Asker) -> None:
    async def script(turn: Turn) -> None:
        assert turn.tools == []  # the listing was refused: the agent has no tools
        await turn.say("Nothing stored in Loom answers this.")

    bench.emu.script = script
    bench.emu.listing_auth = False
    for stream in (True, False):
        bench.plane.bridge.token_path_observed.clear()
        async with asker.client() as c:
            assert (await c.post(CHAT, json=chat_body(stream=stream))).status_code == 200
        async with asyncio.timeout(10):
            await bench.plane.bridge.token_path_observed.wait()
    assert (await bench.plane.health())["assistant"] == {"ok": False, "required": False, "reason": "auth_off"}
    async with asker.client() as c:
        ready = await c.get("/v1/health/ready")
        refused = await c.post(CHAT, json=chat_body())
    assert ready.json()["checks"]["assistant"]["reason"] == "auth_off"
    assert refused.status_code == 503 and refused.json()["error"]["detail"] == {"reason": "auth_off"}


async def test_a_gateway_only_process_tells_the_bridge_process_when_tools_list_comes_without_the_token(
    bench: Bench, asker: Asker, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cluster mode: the gateway holds no bridge (`loom serve --gateway` relays the chat to
    LOOM_ASSISTANT_BRIDGE_URL). LibreChat's tools/list without the token is refused 401 there
    too (the gateway cannot verify a token, but a missing one needs no verifying), the bridge's
    own listener is told, and the gateway's readiness shows the bridge's auth_off."""
    from loom_runner.cluster import start_relay_gateway

    bridge_port = await bench.plane.serve_chat("127.0.0.1", 0)
    monkeypatch.setenv("LOOM_ASSISTANT_BRIDGE_URL", f"http://127.0.0.1:{bridge_port}")
    gateway = await start_relay_gateway(make_settings(data_dir), bench.inst.addresses)
    own_url = bench.emu.loom_url
    try:

        async def script(turn: Turn) -> None:
            assert turn.tools == []  # the listing was refused: the agent has no tools
            await turn.say("Nothing stored in Loom answers this.")

        bench.emu.script = script
        bench.emu.loom_url = gateway.base_url  # LibreChat's MCP server is the gateway process
        bench.emu.listing_auth = False
        async with asker.client() as c:
            c.base_url = httpx.URL(gateway.base_url)
            listed = await c.get("/v1/ops", params={"toolset": "assistant"})
            assert listed.status_code == 200
            for stream in (True, False):
                bench.plane.bridge.token_path_observed.clear()
                assert (await c.post(CHAT, json=chat_body(stream=stream))).status_code == 200
                async with asyncio.timeout(10):
                    await bench.plane.bridge.token_path_observed.wait()
            ready = await c.get("/v1/health/ready")
            refused = await c.post(CHAT, json=chat_body())
        assert (await bench.plane.health())["assistant"] == {"ok": False, "required": False, "reason": "auth_off"}
        assert ready.json()["checks"]["assistant"] == {"ok": False, "required": False, "reason": "auth_off"}
        assert refused.status_code == 503 and refused.json()["error"]["detail"] == {"reason": "auth_off"}
    finally:
        bench.emu.loom_url = own_url
        await gateway.stop()
        assert bench.plane._server is not None
        bench.plane._server.should_exit = True


async def test_the_doctor_names_librechat_s_mcp_auth_off_from_the_bridge_in_process_and_over_its_listener(
    bench: Bench, asker: Asker, data_dir: Path
) -> None:
    """`librechat.mcp_auth`: LibreChat's MCP header shows on no LibreChat API, so the doctor reads
    the bridge's own finding: in the serving process (`loom doctor` beside `loom up`), or in a
    cluster from the bridge's listener."""
    from loom_assistant.doctor import mcp_auth_check
    from loom_core.doctor import DoctorContext, Verdict

    runtime = bench.inst.runtime
    in_process = DoctorContext(runtime.settings, runtime.store, runtime.bus)
    healthy = await mcp_auth_check(in_process)
    assert healthy.verdict == Verdict.OK

    async def script(turn: Turn) -> None:
        await turn.say("Nothing stored in Loom answers this.")

    bench.emu.script = script
    bench.emu.listing_auth = False
    for _ in range(2):
        bench.plane.bridge.token_path_observed.clear()
        async with asker.client() as c:
            assert (await c.post(CHAT, json=chat_body())).status_code == 200
        async with asyncio.timeout(10):
            await bench.plane.bridge.token_path_observed.wait()
    found = await mcp_auth_check(in_process)
    assert (found.verdict, found.fault) == (Verdict.FAULT, "librechat-mcp-auth-off")
    assert "librechat.yaml" in found.fix

    port = await bench.plane.serve_chat("127.0.0.1", 0)
    try:
        cluster = make_settings(data_dir, assistant_librechat_url=bench.emu_url, assistant_bridge_url=f"http://127.0.0.1:{port}")
        over_http = await mcp_auth_check(DoctorContext(cluster, None, None))
        assert (over_http.verdict, over_http.fault) == (Verdict.FAULT, "librechat-mcp-auth-off")
    finally:
        assert bench.plane._server is not None
        bench.plane._server.should_exit = True
    nowhere = make_settings(data_dir, assistant_librechat_url=bench.emu_url)
    assert (await mcp_auth_check(DoctorContext(nowhere, None, None))).verdict == Verdict.UNCHECKED
    unset = make_settings(data_dir)
    assert (await mcp_auth_check(DoctorContext(unset, None, None))).verdict == Verdict.NOT_APPLICABLE


async def test_a_bridge_listener_refuses_a_malformed_notice_and_counts_none(bench: Bench) -> None:
    """The bridge's own listener takes {"run_id": <label>} and nothing else."""
    port = await bench.plane.serve_chat("127.0.0.1", 0)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as c:
            bad = [
                await c.post("/v1/assistant/observed/tokenless", content=b"not json"),
                await c.post("/v1/assistant/observed/tokenless", json={"run_id": "a b"}),
                await c.post("/v1/assistant/observed/tokenless", json={"run_id": 7}),
                await c.post("/v1/assistant/observed/tokenless", content=b'{"run_id": "' + b"x" * 2000 + b'"}'),
            ]
            good = await c.post("/v1/assistant/observed/tokenless", json={"run_id": "msg-1"})
            health = await c.get("/v1/assistant/health")
        assert [(r.status_code, r.json()["error"]["code"]) for r in bad] == [
            (422, "VALIDATION_FAILED"),
            (422, "VALIDATION_FAILED"),
            (422, "VALIDATION_FAILED"),
            (413, "REQUEST_TOO_LARGE"),
        ]
        assert good.status_code == 204
        assert health.json() == {"assistant": {"ok": True, "required": False}}
    finally:
        assert bench.plane._server is not None
        bench.plane._server.should_exit = True


async def test_ready_shows_the_assistant_checks_failure(bench: Bench, asker: Asker) -> None:
    from loom_assistant.service.setup import Status

    state = bench.plane.setup.state
    saved = state.status, state.failure_kind
    try:
        state.status, state.failure_kind = Status.FAILING, "unopenable_row"
        async with asker.client() as c:
            ready = await c.get("/v1/health/ready")
    finally:
        state.status, state.failure_kind = saved
    check = ready.json()["checks"]["assistant"]
    assert check == {"ok": False, "required": False, "reason": "failing", "failure": "assistant_service_failing"}


# -- memory reads not recorded ----------------------------------------------------------------------


def test_the_assistant_reads_whether_memory_reads_are_recorded_from_the_decisions_setting() -> None:
    from loom_assistant.plane import memory_reads_recorded
    from loom_core.settings import Settings

    assert memory_reads_recorded(Settings(plane_overrides={})) is True
    assert memory_reads_recorded(Settings(plane_overrides={"memory_exposure_ledger_enabled": False})) is False


async def test_with_memory_reads_not_recorded_a_memory_citation_says_so_and_is_unchecked(
    bench: Bench, asker: Asker, monkeypatch: pytest.MonkeyPatch
) -> None:
    from loom_assistant.domain.citations import REASON_MEMORY_NOT_RECORDED

    monkeypatch.setattr(bench.plane.checker, "memory_reads_recorded", False)

    async def script(turn: Turn) -> None:
        await turn.call("memory.list", {})
        await turn.say("Deploys run nightly [memory:deploy/window@v1].")

    bench.emu.script = script
    async with asker.client() as c:
        r = await c.post(CHAT, json=chat_body())
    (cited,) = r.json()["citations"]
    assert cited["verified"] is False and cited["reason"] == REASON_MEMORY_NOT_RECORDED == "this deployment does not record memory reads"
    assert r.json()["support"] == "unchecked"


async def test_a_client_gone_at_once_frees_the_slot_closes_the_upstream_and_is_charged(bench: Bench, asker: Asker) -> None:
    # The chat app itself, as the gateway hands it the ASGI call, with a client that is gone
    # as soon as its body is read.
    body = json.dumps(chat_body(stream=True)).encode()
    messages = [{"type": "http.request", "body": body, "more_body": False}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": "POST",
        "path": CHAT,
        "headers": [(b"authorization", f"Bearer {asker.token}".encode()), (b"content-type", b"application/json")],
    }
    await bench.plane.chat_app()(scope, receive, send)
    assert bench.plane.bridge._running[(asker.org, asker.namespace)] == 0
    await asyncio.wait_for(bench.emu.aborted.wait(), 10)
    (row,) = await answer_rows(bench, asker.org, 1)
    assert row["upstream_cost_usd"] == pytest.approx(0.10)


async def test_an_answer_stream_never_iterated_is_still_settled_by_aclose() -> None:
    from loom_assistant.service.bridge import AnswerStream

    settled: list[str] = []

    async def relay() -> AsyncIterator[bytes]:
        try:
            yield b"data: x\n\n"
        finally:
            settled.append("relay")

    async def never_relayed() -> None:
        settled.append("never")

    untouched = AnswerStream(relay(), never_relayed)  # type: ignore[arg-type]
    await untouched.aclose()
    started = AnswerStream(relay(), never_relayed)  # type: ignore[arg-type]
    assert await started.__anext__() == b"data: x\n\n"
    await started.aclose()
    assert settled == ["never", "relay"]

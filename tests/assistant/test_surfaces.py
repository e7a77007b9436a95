"""Every surface of the assistant against the emulator: the chat route with the official
`openai` client (streaming included), assistant.ask over REST, gRPC, MCP (by name only) and
the SDK, and the assistant toolset's listing."""

from __future__ import annotations

import asyncio

import grpc
import httpx2
import mcp_types as types
import pytest
from loom import Agent
from loom_api.assistant.v1 import assistant_pb2 as pb
from loom_api.assistant.v1 import assistant_pb2_grpc
from loom_assistant.domain import opsets
from loom_core.grpc_errors import from_rpc_error
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import call

from .conftest import Asker, Bench
from .emulator import Turn


async def cited_script(turn: Turn) -> None:
    grants = await turn.call("grants.list", {})
    await turn.call("task.counts", {})
    assert grants.ok, grants.body
    await turn.say("You read as viewer. ")
    await turn.say("Nothing else is claimed.")


async def test_openai_client_works_unmodified_whole_and_streaming(bench: Bench, asker: Asker) -> None:
    from openai import AsyncOpenAI  # imported here: ~0.5 CPU-s that every worker's collection paid

    client = AsyncOpenAI(base_url=f"{asker.base_url}/v1/assistant", api_key=asker.token)
    bench.emu.script = cited_script
    whole = await client.chat.completions.create(model="loom", messages=[{"role": "user", "content": "what is my role?"}])
    assert whole.choices[0].message.content == "You read as viewer. Nothing else is claimed."
    stream = await client.chat.completions.create(model="loom", messages=[{"role": "user", "content": "what is my role?"}], stream=True)
    text = []
    async for chunk in stream:
        # Loom's events carry no choices: a client that guards for them skips them.
        for choice in chunk.choices:
            if choice.delta.content:
                text.append(choice.delta.content)
    assert "".join(text) == "You read as viewer. Nothing else is claimed."
    await client.close()


async def test_openai_client_sees_a_refusal_as_an_api_error(bench: Bench, asker: Asker) -> None:
    import openai

    client = openai.AsyncOpenAI(base_url=f"{asker.base_url}/v1/assistant", api_key=asker.admin)
    with pytest.raises(openai.PermissionDeniedError):
        await client.chat.completions.create(model="loom", messages=[{"role": "user", "content": "hi"}])
    await client.close()


async def test_assistant_ask_over_rest_carries_citations_and_support_beside_the_text(bench: Bench, asker: Asker) -> None:
    bench.emu.script = cited_script
    async with asker.client() as c:
        r = await call(
            c,
            "assistant.ask",
            question="what is my role?",
            history=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
        )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["text"] == "You read as viewer. Nothing else is claimed."
    # Uncited, after calls that found data with no citation form: unchecked.
    assert body["support"] == "unchecked" and body.get("citations", []) == []
    sent = bench.emu.chat_bodies[-1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]


async def test_assistant_ask_over_grpc(bench: Bench, asker: Asker) -> None:
    async with grpc.aio.insecure_channel(bench.inst.grpc_address("assistant")) as channel:
        stub = assistant_pb2_grpc.AssistantServiceStub(channel)
        out = await stub.Ask(pb.AskRequest(question="hi"), metadata=[("authorization", f"Bearer {asker.token}")])
        assert out.text == "Hello! Ask me about this namespace." and out.support == "none" and out.run_id.startswith("chatcmpl-")
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.Ask(pb.AskRequest(question="hi"), metadata=[("authorization", f"Bearer {asker.admin}")])
    err = from_rpc_error(info.value)
    assert err.code == "AUTH_INSUFFICIENT" and err.detail is not None and err.detail["reason"] == "org_wide"


async def test_assistant_ask_records_its_spend_on_the_op_ledger_row(bench: Bench, asker: Asker) -> None:
    async with asker.client() as c:
        assert (await call(c, "assistant.ask", question="hi")).status_code == 200
    for _ in range(200):
        await bench.inst.runtime.ledger.flush()
        rows = await bench.inst.runtime.store.query(
            "SELECT upstream_cost_usd FROM {db}.agent_events WHERE org = {org:String} AND op = 'assistant.ask'", {"org": asker.org}
        )
        if rows:
            break
        await asyncio.sleep(0.05)
    assert rows and rows[0]["upstream_cost_usd"] == pytest.approx(0.0027)


async def test_sdk_stream_yields_the_text_and_ends_with_the_checked_answer(bench: Bench, asker: Asker) -> None:
    bench.emu.script = cited_script
    async with Agent(org=asker.org, namespace=asker.namespace, agent="sdk-test", api_key=asker.token, base_url=asker.base_url) as a:
        stream = a.assistant.stream("what is my role?")
        texts = [t async for t in stream]
        answer = await stream.final()
        whole = await a.assistant.ask("what is my role?")
        generated = await a.ops.assistant.ask(question="hi")
    # Only text comes out of the loop: loom.step and loom.text_done are skipped, as in the TypeScript SDK.
    assert all(isinstance(t, str) and t for t in texts)
    assert "".join(texts) == answer.text == stream.text == "You read as viewer. Nothing else is claimed."
    assert answer.support == stream.support == "unchecked"
    assert answer.citations == [] and answer.stopped is False
    assert [s.op for s in answer.steps or []] == ["grants.list", "task.counts"]
    assert whole.text == answer.text and whole.steps is None
    assert generated["text"] == "You read as viewer. Nothing else is claimed."


async def test_sdk_citations_are_the_generated_citation_the_ask_op_answers_with(bench: Bench, asker: Asker) -> None:
    async def script(turn: Turn) -> None:
        await turn.call("grants.list", {})
        await turn.say("The key [memory:notes/plan@v2] says so.")

    bench.emu.script = script
    async with Agent(org=asker.org, namespace=asker.namespace, agent="sdk-test", api_key=asker.token, base_url=asker.base_url) as a:
        streamed = await a.assistant.stream("why?").final()
        whole = await a.assistant.ask("why?")
        generated = await a.ops.assistant.ask(question="why?")
    (cite,) = streamed.citations or []
    # One type for a citation in the SDK: `loom.assistant.v1.Citation` as JSON, as the op returns it.
    assert cite == {
        "kind": "memory",
        "ref": "notes/plan",
        "verified": False,
        "reason": cite["reason"],
        "anchor": "",
        "text": "[memory:notes/plan@v2]",
    }
    assert "memory.search" in cite["reason"]
    assert whole.citations == [cite] and generated["citations"] == [cite]


async def test_sdk_stream_closed_early_closes_the_request_upstream(bench: Bench, asker: Asker) -> None:
    async def talkative(turn: Turn) -> None:
        for i in range(400):
            await turn.say(f"word{i} ")

    bench.emu.script, bench.emu.chunk_delay_s = talkative, 0.05
    async with Agent(org=asker.org, namespace=asker.namespace, agent="sdk-test", api_key=asker.token, base_url=asker.base_url) as a:
        async with a.assistant.stream("talk") as stream:
            async for text in stream:
                assert text.startswith("word")
                if stream.text.count(" ") >= 3:
                    break
        await asyncio.wait_for(bench.emu.aborted.wait(), 30)
        answer = await stream.final()
    assert answer.stopped is True and answer.citations is None and answer.support is None
    assert answer.text.startswith("word0 word1 word2 ")


async def test_mcp_calls_assistant_ask_by_name_but_no_listing_shows_it(bench: Bench, asker: Asker) -> None:
    base = bench.inst.base_url
    for ts in (None, "all", "assistant", "admin"):
        url = f"{base}/mcp" + (f"?toolset={ts}" if ts else "")
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {asker.token}"}, timeout=30) as http,
            Client(streamable_http_client(url, http_client=http), mode="legacy") as client,
        ):
            names = {t.name for t in (await client.list_tools()).tools}
            assert "assistant.ask" not in names
            if ts is None:
                res: types.CallToolResult = await client.call_tool("assistant.ask", {"question": "hi"})
                assert not res.is_error, res
                assert res.structured_content["text"] == "Hello! Ask me about this namespace."  # type: ignore[index]


async def test_the_agent_calling_the_assistant_is_refused_as_a_self_call(bench: Bench, asker: Asker) -> None:
    # The agent is not given the assistant (its tools are the toolset's reads); its token
    # calling it by name anyway, as a tool call LibreChat would send, is a self call.
    async with asker.client() as c:
        r = await c.post("/v1/assistant/chat/completions", json={"messages": [{"role": "user", "content": "loop"}]})
    assert r.status_code == 200
    answer_token = str(bench.emu.chat_bodies[-1]["parent_message_id"])
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {answer_token}"}, timeout=30) as http,
        Client(streamable_http_client(f"{asker.base_url}/mcp?toolset=assistant", http_client=http), mode="legacy") as client,
    ):
        res: types.CallToolResult = await client.call_tool("loom_assistant_ask", {"question": "ask yourself"})
    assert res.is_error and res.structured_content["error"]["code"] == "ASSISTANT_SELF_CALL"  # type: ignore[index]
    assert len(bench.emu.chat_bodies) == 1  # LibreChat was asked once: by the caller, never by itself


async def test_assistant_toolset_ops_are_reads_each_in_exactly_one_support_set(bench: Bench) -> None:
    catalog = bench.inst.runtime.catalog
    listed = catalog.listed("assistant")
    for op in listed:
        assert not op.write_shaped, op.name
        memberships = [op.name in s for s in (opsets.CITABLE, opsets.UNCITABLE, opsets.NO_NAMESPACE_DATA)]
        assert memberships.count(True) == 1, op.name
    assert "assistant.ask" not in {op.name for op in listed}
    ask = catalog.get("assistant.ask")
    assert ask is not None and ask.experimental and not ask.toolsets
    assert ask.name not in {op.name for op in catalog.listed("all")}
    # The sets never overlap, whatever the catalog holds today.
    assert not (
        opsets.CITABLE & opsets.UNCITABLE or opsets.CITABLE & opsets.NO_NAMESPACE_DATA or opsets.UNCITABLE & opsets.NO_NAMESPACE_DATA
    )


async def test_assistant_toolset_drops_run_id_and_defaults_the_namespace_to_the_tokens_first(bench: Bench, asker: Asker) -> None:
    async def script(turn: Turn) -> None:
        await turn.call("grants.list", {"run_id": "someone-elses-run"})
        await turn.say("ok")

    bench.emu.script = script
    async with asker.client() as c:
        r = await c.post("/v1/assistant/chat/completions", json={"messages": [{"role": "user", "content": "who?"}]})
    assert r.status_code == 200
    (result,) = bench.emu.tool_results
    # Not dropped, `run_id` is no field of grants.list and the call would fail validation.
    assert result.ok, result.body
    run_id = r.json()["id"]
    for _ in range(200):
        await bench.inst.runtime.ledger.flush()
        rows = await bench.inst.runtime.store.query(
            "SELECT namespace, run_id FROM {db}.agent_events WHERE org = {org:String} AND op = 'grants.list'", {"org": asker.org}
        )
        if rows:
            break
        await asyncio.sleep(0.05)
    assert rows == [{"namespace": asker.namespace, "run_id": run_id}]


async def test_a_cluster_gateway_relays_the_chat_to_the_bridge_url(bench: Bench, asker: Asker, monkeypatch: pytest.MonkeyPatch) -> None:
    from fastapi import FastAPI
    from loom_gateway.assistant_routes import register
    from loom_runner.http import HttpServer

    port = await bench.plane.serve_chat("127.0.0.1", 0)
    monkeypatch.setenv("LOOM_ASSISTANT_BRIDGE_URL", f"http://127.0.0.1:{port}")
    gateway = FastAPI()
    assert bench.inst.relay is not None
    register(gateway, bench.inst.relay)
    server = HttpServer(gateway)
    await server.start()
    try:
        bench.emu.script = cited_script
        async with asker.client() as c:
            c.base_url = f"http://127.0.0.1:{server.port}"  # type: ignore[assignment]
            whole = await c.post("/v1/assistant/chat/completions", json={"messages": [{"role": "user", "content": "q"}]})
            streamed = await c.post("/v1/assistant/chat/completions", json={"messages": [{"role": "user", "content": "q"}], "stream": True})
            refused = await c.post(
                "/v1/assistant/chat/completions",
                json={"messages": [{"role": "user", "content": "q"}]},
                headers={"Authorization": f"Bearer {asker.admin}"},
            )
        assert whole.status_code == 200 and whole.json()["choices"][0]["message"]["content"].startswith("You read as viewer.")
        assert streamed.headers["content-type"].startswith("text/event-stream") and streamed.text.rstrip().endswith("data: [DONE]")
        assert refused.status_code == 403 and refused.json()["error"]["detail"]["reason"] == "org_wide"
    finally:
        await server.stop()
        assert bench.plane._server is not None
        bench.plane._server.should_exit = True

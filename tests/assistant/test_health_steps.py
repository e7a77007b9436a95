"""ASSISTANT_UNAVAILABLE's reasons, the never-required `assistant` health check, and the live
loom.step events of a streamed answer."""

from __future__ import annotations

import asyncio
import json

import pytest
from loom_assistant.domain.support import RUN_ROWS_CUT
from loom_assistant.service.setup import Status
from loom_runner.embedded import Instance

from tests.conftest import Tenant, call

from .conftest import Asker, Bench, chat_body, run_row, sse_events
from .emulator import Script, Turn

CHAT = "/v1/assistant/chat/completions"


async def test_no_librechat_configured_answers_unavailable_not_configured(stack: Instance, tenant: Tenant) -> None:
    async with tenant.client() as c:
        minted = (await call(c, "token.mint", roles={tenant.namespace: "viewer"})).json()
    async with tenant.client(minted["token"]) as c:
        r1 = await call(c, "assistant.ask", question="hi")
        r2 = await c.post(CHAT, json=chat_body())
    for r in (r1, r2):
        assert r.status_code == 503, r.text
        assert r.json()["error"]["code"] == "ASSISTANT_UNAVAILABLE"
        err = r.json()["error"]
        # It names the setting, and says no retry fixes it (an operator sets the URL).
        assert err["detail"] == {"reason": "not_configured", "setting": "LOOM_ASSISTANT_LIBRECHAT_URL"}
        assert "LOOM_ASSISTANT_LIBRECHAT_URL" in err["message"] and err["retryable"] is False
    plane = next(p for p in stack.planes if p.name == "assistant")
    assert await plane.health() == {}  # no check when none is configured


async def test_health_check_is_never_required_and_names_starting_and_failing(bench: Bench, asker: Asker) -> None:
    plane = bench.plane
    assert await plane.health() == {"assistant": {"ok": True, "required": False}}
    state = plane.setup.state
    saved = state.status, state.failure_kind
    try:
        for status, reason in ((Status.STARTING, "starting"), (Status.FAILING, "failing")):
            state.status, state.failure_kind = status, "librechat_unavailable"
            check = (await plane.health())["assistant"]
            assert check["ok"] is False and check["required"] is False and check["reason"] == reason
            async with asker.client() as c:
                r = await c.post(CHAT, json=chat_body())
            assert r.status_code == 503 and r.json()["error"]["detail"] == {"reason": reason}
            assert r.headers.get("retry-after") is None or int(r.headers["retry-after"]) >= 1
    finally:
        state.status, state.failure_kind = saved
    assert not bench.emu.chat_bodies


async def test_streamed_answer_sends_live_steps_before_its_text(bench: Bench, asker: Asker) -> None:
    hold = asyncio.Event()

    async def script(turn: Turn) -> None:
        await turn.call("grants.list", {})
        await hold.wait()
        await turn.say("You are a viewer.")

    bench.emu.script = script
    seen: list[dict[str, object]] = []
    async with asker.client() as c, c.stream("POST", CHAT, json=chat_body(stream=True)) as r:
        async for line in r.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line[6:])
            seen.append(event)
            if event.get("loom_event") == "loom.step":
                hold.set()  # the text comes only after a step was shown
    kinds = [e.get("loom_event", "chunk") for e in seen]
    first_step = kinds.index("loom.step")
    first_text = next(i for i, e in enumerate(seen) if e["choices"] and e["choices"][0]["delta"].get("content"))
    assert first_step < first_text
    step = seen[first_step]
    assert step["steps"] == [{"op": "grants.list", "text": "Read who has access", "ok": True}] and step["choices"] == []


def _docs_calls(bench: Bench, asker: Asker, rows: int) -> Script:
    """One real help.search (no namespace data: an uncut run of it is none), then the run's
    ledger topped up to `rows` rows of the same call, as LibreChat's further calls would
    ledger them (subject, consumer loom-assistant, the answer's run id)."""
    subject = bench.inst.runtime.codec.decode(asker.token).sub

    async def script(turn: Turn) -> None:
        assert (await turn.call("help.search", {"query": "tasks"})).ok
        row = run_row(asker, op="help.search", subject=subject, transport="mcp", run_id=turn.run_id, consumer="loom-assistant", out_hits=3)
        await bench.inst.runtime.store.insert("{db}.agent_events", [row] * (rows - 1))
        await turn.say("The docs cover tasks.")

    return script


async def test_an_answer_whose_run_holds_more_than_200_rows_is_cut_unchecked_never_none(bench: Bench, asker: Asker) -> None:
    """The streamed answer's steps are its first 200 rows with steps_cut, its support unchecked
    (never none, though an uncut run of these calls is none); a whole answer is unchecked too."""
    bench.emu.script = _docs_calls(bench, asker, RUN_ROWS_CUT + 1)
    async with asker.client() as c:
        streamed = await c.post(CHAT, json=chat_body(stream=True))
        whole = await c.post(CHAT, json=chat_body())
    assert streamed.status_code == 200 and whole.status_code == 200
    final = next(e for e in sse_events(streamed.text) if isinstance(e, dict) and e.get("loom_event") == "loom.citations")
    assert final["steps_cut"] is True
    assert len(final["steps"]) == RUN_ROWS_CUT and {s["op"] for s in final["steps"]} == {"help.search"}
    assert final["support"] == "unchecked"
    assert whole.json()["support"] == "unchecked"


async def test_an_answer_of_200_rows_is_not_cut(bench: Bench, asker: Asker) -> None:
    bench.emu.script = _docs_calls(bench, asker, RUN_ROWS_CUT)
    async with asker.client() as c:
        streamed = await c.post(CHAT, json=chat_body(stream=True))
        whole = await c.post(CHAT, json=chat_body())
    final = next(e for e in sse_events(streamed.text) if isinstance(e, dict) and e.get("loom_event") == "loom.citations")
    assert "steps_cut" not in final and len(final["steps"]) == RUN_ROWS_CUT
    assert final["support"] == "none" and whole.json()["support"] == "none"


async def _answer_once(asker: Asker, bench: Bench, *, stream: bool) -> None:
    bench.plane.bridge.token_path_observed.clear()
    async with asker.client() as c:
        r = await c.post(CHAT, json=chat_body(stream=stream))
    assert r.status_code == 200
    async with asyncio.timeout(10):
        await bench.plane.bridge.token_path_observed.wait()


@pytest.mark.slow  # two answers each wait out the calls' 3 s bound for rows that never land
async def test_tool_calls_arriving_without_the_answers_token_turn_the_assistant_auth_off(bench: Bench, asker: Asker) -> None:
    """A LibreChat whose MCP header leaves the answer's token out (v0.8.7's empty placeholder):
    after two such answers the assistant answers ASSISTANT_UNAVAILABLE auth_off and its health
    check says auth_off, without calling LibreChat; the rest of Loom still serves."""

    async def script(turn: Turn) -> None:
        await turn.call("grants.list", {})
        await turn.say("Nothing stored in Loom answers this.")

    bench.emu.script = script
    bench.emu.version = "0.8.7"
    await _answer_once(asker, bench, stream=True)
    assert (await bench.plane.health())["assistant"]["ok"] is True  # one miss is not enough
    await _answer_once(asker, bench, stream=False)
    check = (await bench.plane.health())["assistant"]
    assert check == {"ok": False, "required": False, "reason": "auth_off"}
    asked = len(bench.emu.chat_bodies)
    async with asker.client() as c:
        chat = await c.post(CHAT, json=chat_body())
        op = await call(c, "assistant.ask", question="hi")
        other = await call(c, "auth.whoami")
    for r in (chat, op):
        assert r.status_code == 503 and r.json()["error"]["code"] == "ASSISTANT_UNAVAILABLE"
        assert r.json()["error"]["detail"] == {"reason": "auth_off"}
    assert len(bench.emu.chat_bodies) == asked  # refused before LibreChat is called
    assert other.status_code == 200


async def test_answers_whose_calls_carry_their_token_keep_the_assistant_on(bench: Bench, asker: Asker) -> None:
    async def script(turn: Turn) -> None:
        assert (await turn.call("grants.list", {})).ok
        await turn.say("Nothing stored in Loom answers this.")

    bench.emu.script = script
    for stream in (True, False, True):
        await _answer_once(asker, bench, stream=stream)
    assert bench.plane.bridge.token_path.misses == 0
    assert (await bench.plane.health())["assistant"] == {"ok": True, "required": False}


@pytest.mark.slow  # two answers each wait out the calls' 3 s bound for rows that never land
async def test_answers_whose_caller_was_revoked_mid_answer_do_not_turn_the_assistant_auth_off(bench: Bench, asker: Asker) -> None:
    """Refused calls of an answer whose token was ended say nothing about LibreChat: a caller
    cannot switch the assistant off for everyone by revoking its own token mid-answer."""
    revoke: dict[str, str] = {}

    async def script(turn: Turn) -> None:
        async with asker.client(asker.admin) as c:
            assert (await call(c, "token.revoke", token_id=revoke["id"])).status_code == 200
        assert not (await turn.call("grants.list", {})).ok
        await turn.say("Nothing stored in Loom answers this.")

    bench.emu.script = script
    for _ in range(2):
        minted = await asker.mint(roles={asker.namespace: "viewer"}, ttl_seconds=3600)
        revoke["id"] = str(minted["token_id"])
        bench.plane.bridge.token_path_observed.clear()
        async with asker.client(str(minted["token"])) as c:
            assert (await c.post(CHAT, json=chat_body(stream=True))).status_code == 200
        async with asyncio.timeout(10):
            await bench.plane.bridge.token_path_observed.wait()
    assert bench.plane.bridge.token_path.misses == 0
    assert (await bench.plane.health())["assistant"] == {"ok": True, "required": False}

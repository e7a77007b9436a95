"""Citations checked when the answer ends, through the emulator: each kind against this
answer's own rows, names the build does not know, and a check that cannot run."""

from __future__ import annotations

import json

import pytest

from tests.conftest import call

from .conftest import Asker, Bench, chat_body
from .emulator import Turn

CHAT = "/v1/assistant/chat/completions"


async def test_citations_not_backed_by_this_answers_calls_come_back_unverified_with_their_reasons(bench: Bench, asker: Asker) -> None:
    async def script(turn: Turn) -> None:
        await turn.call("grants.list", {})
        await turn.say("The key [memory:notes/plan@v2] says so, see [task:t-unknown] and\n```sql\nSELECT 1\n```\n")

    bench.emu.script = script
    async with asker.client() as c:
        r = await c.post(CHAT, json=chat_body())
    body = r.json()
    by_kind = {c["kind"]: c for c in body["citations"]}
    assert set(by_kind) == {"memory", "task", "sql"}
    assert not any(c["verified"] for c in body["citations"])
    assert "memory.search" in by_kind["memory"]["reason"] and by_kind["memory"]["ref"] == "notes/plan"
    assert by_kind["task"]["reason"] == "no call of this answer returned this task"
    assert by_kind["sql"]["reason"].startswith("this statement did not run in this answer")
    assert body["support"] == "unsupported"


async def test_a_help_citation_whose_check_cannot_run_is_unverified_and_the_answer_unchecked(bench: Bench, asker: Asker) -> None:
    async def script(turn: Turn) -> None:
        await turn.say("Loom answers from its docs [help:assistant § Assistant > Citations].")

    bench.emu.script = script
    async with asker.client() as c:
        has_help = (await call(c, "help.verify", citations=[])).status_code != 404
        r = await c.post(CHAT, json=chat_body())
    (cite,) = r.json()["citations"]
    assert cite["kind"] == "help" and cite["ref"] == "assistant"
    if not has_help:  # the help plane is not on this build: the check could not run
        assert cite == {**cite, "verified": False, "reason": "the check could not run"}
        assert r.json()["support"] == "unchecked"


async def test_names_the_build_neither_serves_nor_documents_are_reported_and_make_it_unsupported(bench: Bench, asker: Asker) -> None:
    async def script(turn: Turn) -> None:
        await turn.say("Run `task.teleport` with LOOM_WARP_FACTOR, or `task.get` with LOOM_ASSISTANT_MODEL.")

    bench.emu.script = script
    async with asker.client() as c:
        r = await c.post(CHAT, json=chat_body(stream=True))
    final = next(line for line in r.text.split("\n\n") if '"loom.citations"' in line)
    assert '"unknown_names":["task.teleport","LOOM_WARP_FACTOR"]' in final
    assert '"support":"unsupported"' in final


async def test_a_help_citation_copied_from_a_search_hit_verifies_with_its_anchor(bench: Bench, asker: Asker) -> None:
    async def script(turn: Turn) -> None:
        found = await turn.call("help.search", {"query": "support unsupported unchecked"})
        hit = found.body["hits"][0]
        await turn.say(f"Support is decided by a table {hit['citation']}. Made up: [help:{hit['page']} § No Such Section Anywhere].")

    bench.emu.script = script
    async with asker.client() as c:
        r = await c.post(CHAT, json=chat_body(stream=True))
    final = next(
        e for e in (json.loads(x[6:]) for x in r.text.splitlines() if x.startswith("data: {")) if e.get("loom_event") == "loom.citations"
    )
    good, bad = final["citations"]
    assert good["kind"] == "help" and good["verified"] is True and good["anchor"]
    assert bad["verified"] is False and bad["reason"] and bad["reason"] != "the check could not run"
    assert final["support"] == "supported"
    assert final["steps"] == [{"op": "help.search", "text": "Searched Loom's documentation", "ok": True}]


async def test_a_memory_citation_verifies_when_this_answers_memory_read_returned_the_key(bench: Bench, asker: Asker) -> None:
    async with asker.client(asker.admin, **{"X-Loom-Namespace": asker.namespace}) as c:
        rec = await call(c, "decision.record", category="vendor", scenario="which queue to use", outcome="NATS")
    assert rec.status_code == 200, rec.text
    key = rec.json()["memory_key"]

    async def script(turn: Turn) -> None:
        got = await turn.call("memory.get", {"memory_key": key})
        assert got.ok, got.body
        await turn.say(f"The team chose NATS [memory:{key}@v1]; another note [memory:never/read@v1].")

    bench.emu.script = script
    async with asker.client() as c:
        r = await c.post(CHAT, json=chat_body())
    good, bad = r.json()["citations"]
    assert good == {"kind": "memory", "ref": key, "verified": True, "text": f"[memory:{key}@v1]"}
    assert bad["verified"] is False and "memory.search" in bad["reason"]
    assert r.json()["support"] == "supported"


async def test_a_cluster_bridge_checks_help_citations_over_http_with_the_answer_token(bench: Bench, asker: Asker) -> None:
    from loom_core.errors import LoomError
    from loom_core.op_caller import HttpOpCaller

    ops = HttpOpCaller(bench.inst.base_url)
    try:
        cited = {"citations": ["[help:assistant.md § No Such Section Anywhere]"]}
        out = await ops("help.verify", cited, {"authorization": f"Bearer {asker.token}"}, "rest")
        assert out["results"][0]["verified"] is False
        with pytest.raises(LoomError) as info:
            await ops("help.verify", {"citations": []}, {"authorization": "Bearer not-a-token"}, "rest")
        assert info.value.code == "AUTH_INVALID"
    finally:
        await ops.close()


async def test_doc_citations_are_checked_against_the_shipped_docs_and_code_citations_are_not(bench: Bench, asker: Asker) -> None:
    async def script(turn: Turn) -> None:
        await turn.say(
            "Checked sources [doc:docs/assistant.md § The assistant > Citations], [doc:assistant.md],"
            " [doc:docs/no-such-page.md § Intro], [doc:assistant.md § Teleportation]"
            " and [code:core/loom_core/errors.py:1-3]."
        )

    bench.emu.script = script
    async with asker.client() as c:
        r = await c.post(CHAT, json=chat_body())
    got = [(c["kind"], c["ref"], c["verified"], c.get("reason", ""), c.get("anchor", "")) for c in r.json()["citations"]]
    assert got[0][:3] == ("doc", "docs/assistant.md", True) and got[0][4]  # the section's anchor
    assert got[1] == ("doc", "assistant.md", True, "", "")
    assert got[2] == ("doc", "docs/no-such-page.md", False, "this document is not one of Loom's documents (the shipped docs)", "")
    assert got[3] == ("doc", "assistant.md", False, "the document has no such section", "")
    # Spec 000: a code citation is not checked (a code index is a namespace the answer's token does not reach).
    assert got[4] == (
        "code",
        "core/loom_core/errors.py",
        False,
        "code citations are not checked: a code index is a namespace of its own",
        "",
    )
    assert r.json()["support"] == "supported"  # the spec's table: a verified citation comes first


async def test_an_answer_resting_only_on_a_code_citation_is_unchecked(bench: Bench, asker: Asker) -> None:
    async def script(turn: Turn) -> None:
        await turn.say("The refusal is raised at [code:core/loom_core/errors.py:12].")

    bench.emu.script = script
    async with asker.client() as c:
        r = await c.post(CHAT, json=chat_body())
    assert r.json()["support"] == "unchecked"

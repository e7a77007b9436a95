"""`loom decisions extract` (spec 003, Extract decisions from a document) against a local
OpenAI-compatible emulator (llm_emulator.py): dry run by default, windows of sections, grounding,
the support check, stages, the write as loom-decisions, reconcile and retire; and the command
itself, through the admin socket of the running Loom, and refusing before anything when no model
is configured."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from loom_decisions.plane import DecisionsPlane
from loom_decisions.service.llm import ChatModel
from loom_runner.cli import main
from loom_runner.embedded import admin_app
from loom_runner.http import HttpServer

from .conftest import Desk
from .llm_emulator import LlmEmulator

DOC = """# Transcript retention

![architecture](arch.png)

## Storage

We decided to keep raw transcripts for 30 days, because replay needs 30 days of history.
Keeping them forever was rejected because storage costs grow without bound.

## Future work

We propose moving old transcripts to cold storage, implemented in src/storage/cold.py.

## Summary

In short: keep raw transcripts for 30 days.
"""

STORAGE = {
    "category": "storage",
    "scenario": "raw transcript retention",
    "outcome": "keep raw transcripts 30 days",
    "outcome_quotes": ["We decided to keep raw transcripts for 30 days"],
    "reasons": [
        {"text": "replay needs 30 days of history", "quotes": ["replay needs 30 days of history"]},
        {"text": "legal asked for it", "quotes": ["legal hold requires thirty days"]},
    ],
    "rejected": [{"option": "keep forever", "reason": "storage costs grow", "quotes": ["Keeping them forever was rejected"]}],
    "stage": "decided",
    "constraint": False,
}
COLD = {
    "category": "storage",
    "scenario": "where old transcripts live",
    "outcome": "move old transcripts to cold storage",
    "outcome_quotes": ["We propose moving old transcripts to cold storage, implemented in src/storage/cold.py"],
    "reasons": [],
    "rejected": [],
    "stage": "plan",
    "constraint": False,
}
INVENTED = {
    "category": "storage",
    "scenario": "transcript encryption",
    "outcome": "encrypt transcripts at rest",
    "outcome_quotes": ["All transcripts are encrypted at rest"],
    "reasons": [],
    "rejected": [],
    "stage": "decided",
    "constraint": False,
    "anywhere": True,
}
STORAGE_KEY = "decision/storage/raw-transcript-retention"
COLD_KEY = "decision/storage/where-old-transcripts-live"


@pytest.fixture
async def emu() -> AsyncIterator[LlmEmulator]:
    e = LlmEmulator(decisions=[STORAGE, COLD, INVENTED])
    async with e.running():
        yield e


def plane_of(desk: Desk) -> DecisionsPlane:
    plane = next(p for p in desk.inst.planes if p.name == "decisions")
    assert isinstance(plane, DecisionsPlane)
    return plane


def model(emu: LlmEmulator) -> ChatModel:
    return ChatModel(emu.url, "emulated", emu.key, 30.0, {"decision_extract": 12000, "decision_support": 8000})


async def extract(desk: Desk, emu: LlmEmulator, doc: str, *, apply: bool, uri: str = "docs/retention.md", **kw: Any) -> Any:
    return await plane_of(desk).extract(desk.tenant.org, desk.tenant.namespace, uri, document=doc, apply=apply, model=model(emu), **kw)


async def test_a_dry_run_prints_what_it_would_write_and_writes_nothing(desk: Desk, emu: LlmEmulator) -> None:
    rep = await extract(desk, emu, DOC, apply=False)
    text = "\n".join(rep.lines)
    assert rep.exit_code == 0, text
    assert "section Transcript retention: image-only, rationale not extracted" in text
    assert f"{STORAGE_KEY}: new (decided): would record" in text
    assert f"{COLD_KEY}: new (proposed): would record" in text
    assert "none of the outcome's quotes is in the document text" in text  # the invented decision
    assert "reason 'legal asked for it' left out: none of its quotes is in the document text" in text
    assert emu.kinds() == ["read", "support"]  # one window: the document fits
    assert emu.requests[0]["max_tokens"] == 12000 and emu.requests[1]["max_tokens"] == 8000
    assert "[document: Transcript retention]" in emu.requests[0]["messages"][1]["content"]
    assert (await desk.as_agent("reader").ok("memory.list", memory_type="decision")).get("rows", []) == []


async def test_apply_records_as_the_extractor_with_stage_source_and_files(desk: Desk, emu: LlmEmulator) -> None:
    rep = await extract(desk, emu, DOC, apply=True)
    assert rep.exit_code == 0, rep.lines
    assert sorted(rep.written) == [STORAGE_KEY, COLD_KEY]
    a = desk.as_agent("reader")
    row = await a.ok("memory.get", memory_key=STORAGE_KEY)
    assert (row["agent_id"], row["user_id"], row["session_id"]) == ("loom-decisions", "-", "-")
    assert row["value"] == (
        "raw transcript retention. Decided keep raw transcripts 30 days because replay needs 30 days of history. "
        "Rejected: keep forever — rejected: storage costs grow."
    )
    assert row["source_resource_id"] == f"knowledge:{desk.tenant.namespace}/docs/retention.md#Transcript retention > Storage"
    assert row["source_class"] == "derived" and "source-kind:design_doc" in row["tags"]
    cold = await a.ok("memory.get", memory_key=COLD_KEY)
    assert "decision:proposed" in cold["tags"] and cold["value"].startswith("where old transcripts live. Proposed move old")
    assert cold["files"] == ["src/storage/cold.py"]
    block = await a.ok("memory.for_file", path="src/storage/cold.py")
    assert block["entries"][0]["actor"] == "process:cli:decisions"
    assert "— by cli:decisions, just now" in block["block"]
    await desk.inst.runtime.ledger.flush()
    audit = await desk.inst.runtime.store.query(
        "SELECT op, subject, agent FROM {db}.agent_events WHERE org = {org:String} AND transport = 'cli' ORDER BY op",
        {"org": desk.tenant.org},
    )
    assert [(r["op"], r["subject"], r["agent"]) for r in audit] == [("decision.record", "process:cli:decisions", "loom-decisions")] * 2

    # A second run over the same text: both still stated, nothing written.
    emu.stated = {STORAGE_KEY, COLD_KEY}
    again = await extract(desk, emu, DOC, apply=True)
    assert again.written == [] and f"{STORAGE_KEY}: unchanged" in again.lines
    assert (await a.ok("memory.get", memory_key=STORAGE_KEY))["version"] == 1
    assert "Known decisions (category | scenario):" in emu.requests[-2]["messages"][1]["content"]


async def test_a_later_run_retires_what_the_document_no_longer_states_and_tags_a_pinned_row(desk: Desk, emu: LlmEmulator) -> None:
    await extract(desk, emu, DOC, apply=True)
    a = desk.as_agent("loom-decisions", user="-", session="-")
    await a.ok("memory.pin", memory_key=COLD_KEY)
    revised = DOC.replace("We propose moving old transcripts to cold storage, implemented in src/storage/cold.py.", "Nothing planned.")
    revised = revised.replace("We decided to keep raw transcripts for 30 days", "We keep transcripts as policy says")
    emu.gone = {STORAGE_KEY, COLD_KEY}
    # A row found gone is read once more without candidates; a second check that disagrees keeps it.
    emu.gone_on_recheck = {COLD_KEY}
    kept = await extract(desk, emu, revised, apply=False)
    assert any(line.endswith("look gone: read once more without candidates") for line in kept.lines), kept.lines
    assert not any(line.startswith(f"{STORAGE_KEY}: no longer stated") for line in kept.lines)
    emu.gone_on_recheck = None
    dry = await extract(desk, emu, revised, apply=False)
    assert f"{STORAGE_KEY}: no longer stated: would delete it (memory.delete_version v1)" in dry.lines
    assert f"{COLD_KEY}: no longer stated: would tag source-changed" in dry.lines
    rep = await extract(desk, emu, revised, apply=True)
    assert rep.exit_code == 0, rep.lines
    assert rep.retired == [STORAGE_KEY] and rep.tagged == [COLD_KEY]
    history = await a.ok("memory.history", memory_key=STORAGE_KEY)
    assert history["records"][0]["status"] == "tombstoned"
    cold = await a.ok("memory.get", memory_key=COLD_KEY)
    assert cold["pinned"] is True and "source-changed" in cold["tags"]
    block = await a.ok("memory.for_file", path="src/storage/cold.py")
    assert block["block"].split("\n")[1].endswith("(pinned) (source changed)")


async def test_a_reply_cut_at_the_cap_loses_its_window_and_no_window_read_exits_1(desk: Desk, emu: LlmEmulator) -> None:
    emu.cut_reads = 1
    rep = await extract(desk, emu, DOC, apply=True)
    assert rep.exit_code == 1
    assert any("cut at the model's token limit (decision_extract, 12000)" in line and "--window-chars" in line for line in rep.lines)
    assert rep.lines[-1] == "no window was read: nothing written, nothing retired"
    rep = await extract(desk, emu, "", apply=True)
    assert rep.exit_code == 1 and "no live document" in rep.lines[-1]
    assert (await extract(desk, emu, DOC, apply=False, window_chars=100)).exit_code == 1


async def test_windows_group_sections_and_a_memory_row_of_type_document_is_read(desk: Desk, emu: LlmEmulator) -> None:
    a = desk.as_agent("author")
    appendix = "\n## Appendix\n\n" + "Notes about unrelated tooling and other topics. " * 10
    await a.ok("memory.set", memory_key="docs/retention", value=DOC + appendix, memory_type="document")
    rep = await plane_of(desk).extract(
        desk.tenant.org, desk.tenant.namespace, "docs/retention", document=None, apply=False, model=model(emu), window_chars=500
    )
    assert rep.exit_code == 0, rep.lines
    assert emu.kinds().count("read") >= 2  # the sections no longer fit one window
    assert any(f"{STORAGE_KEY}: new (decided)" in line for line in rep.lines)


# --- the command


def run_cli(argv: list[str]) -> int:
    return main(argv)


async def test_the_command_without_a_model_says_how_to_configure_one(
    desk: Desk, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    for name in ("LOOM_LLM_URL", "LOOM_LLM_PROVIDER", "LOOM_LLM_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LOOM_DATA_DIR", str(tmp_path))
    argv = ["decisions", "extract", "--org", desk.tenant.org, "--namespace", desk.tenant.namespace, "--source-uri", "x.md"]
    assert await asyncio.to_thread(run_cli, argv) == 1
    err = capsys.readouterr().err
    assert "no model is configured" in err and "LOOM_LLM_URL" in err
    monkeypatch.setenv("LOOM_LLM_PROVIDER", "openai")
    assert await asyncio.to_thread(run_cli, argv) == 1
    assert "no LOOM_LLM_API_KEY" in capsys.readouterr().err
    monkeypatch.setenv("LOOM_LLM_API_KEY", "sk-never-printed")
    assert await asyncio.to_thread(run_cli, [*argv, "--into", "repo"]) == 1
    assert "--into needs --repo" in (err := capsys.readouterr().err) and "sk-never-printed" not in err


async def test_the_command_runs_through_the_admin_socket_of_the_running_loom(
    desk: Desk, emu: LlmEmulator, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    doc = tmp_path / "retention.md"
    doc.write_text(DOC)
    data = tmp_path / "data"
    data.mkdir()
    admin = HttpServer(admin_app(desk.inst.runtime, desk.inst.planes), uds=str(data / "admin.sock"))
    await admin.start()
    try:
        monkeypatch.setenv("LOOM_DATA_DIR", str(data))
        monkeypatch.setenv("LOOM_LLM_URL", emu.url)
        monkeypatch.setenv("LOOM_LLM_API_KEY", emu.key)
        monkeypatch.setenv("LOOM_LLM_MODEL", "emulated")
        base = ["decisions", "extract", "--org", desk.tenant.org, "--namespace", desk.tenant.namespace, "--source-uri", f"file://{doc}"]
        assert await asyncio.to_thread(run_cli, base) == 0
        out = capsys.readouterr().out
        assert f"{STORAGE_KEY}: new (decided): would record" in out
        assert (await desk.as_agent("reader").ok("memory.list", memory_type="decision")).get("rows", []) == []
        assert await asyncio.to_thread(run_cli, [*base, "--apply"]) == 0
        assert f"{STORAGE_KEY}: new (decided): recorded v1" in capsys.readouterr().out
        row = await desk.as_agent("reader").ok("memory.get", memory_key=STORAGE_KEY)
        assert row["source_resource_id"].startswith(f"knowledge:{desk.tenant.namespace}/file://{doc}#")
        assert await asyncio.to_thread(run_cli, [*base[:-1], str(tmp_path / "missing.md")]) == 1
    finally:
        await admin.stop()

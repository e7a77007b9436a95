"""The index of a process: built once on the first call in a worker thread, shared by concurrent
first calls, never rebuilt; unreadable pages left out with a warning; no docs -> unavailable."""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path

import pytest
from loom_help.service.help import HelpService
from loom_help.store.pages import PageTexts, read_pages, shipped_docs_dir


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    write(root, "tasks.md", "# Tasks\n\n## Claim\n\nCall task.claim.\n")
    write(root, "operations/backups.md", "# Backups\n\nCopy the data dir.\n")
    write(root, "development/release.md", "# Release\n\nContributor notes on task.claim.\n")
    return root


async def test_concurrent_first_calls_share_one_build_in_a_worker_thread(docs: Path) -> None:
    entered = asyncio.Event()
    release = threading.Event()
    loop = asyncio.get_running_loop()
    threads: list[int] = []

    def slow_reader(root: Path) -> PageTexts:
        threads.append(threading.get_ident())
        loop.call_soon_threadsafe(entered.set)
        release.wait(timeout=30)
        return read_pages(root)

    svc = HelpService(docs, reader=slow_reader)
    calls = [asyncio.create_task(svc.search("task.claim", 5, "")) for _ in range(8)]
    calls.append(asyncio.create_task(svc.verify(["[help:tasks.md § Claim]"])))
    await entered.wait()
    release.set()
    results = await asyncio.gather(*calls)
    assert svc.builds == 1 and threads == [threads[0]] and threads[0] != threading.get_ident()
    assert all(r == results[0] for r in results[:8])
    assert results[0].hits[0].section.anchor == "claim"
    assert results[8][0].verified


async def test_the_index_is_never_rebuilt_per_call(docs: Path) -> None:
    svc = HelpService(docs)
    for _ in range(5):
        await svc.search("claim", 5, "")
    write(docs, "later.md", "# Later\n\nclaim\n")
    hits = (await svc.search("claim", 5, "")).hits
    assert svc.builds == 1 and all(h.section.page != "later.md" for h in hits)


async def test_contributor_pages_are_left_out_of_the_index(docs: Path) -> None:
    svc = HelpService(docs)
    hits = (await svc.search("task.claim", 10, "")).hits
    assert {h.section.page for h in hits} == {"tasks.md"}
    assert await svc.page("development/release.md") is None


async def test_no_docs_answers_unavailable_until_restart(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = tmp_path / "missing"
    svc = HelpService(root)
    with caplog.at_level(logging.WARNING, logger="loom_help"):
        found = await svc.search("claim", 5, "")
        assert not found.available and not found.hits
    assert "no docs folder" in caplog.text
    write(root, "tasks.md", "# Tasks\n\nclaim\n")
    found = await svc.search("claim", 5, "")
    assert not found.available and not found.hits
    assert (await svc.verify(["[help:tasks.md]"]))[0].reason == "help_unavailable"
    assert svc.builds == 1
    assert (await HelpService(root).search("claim", 5, "")).available  # a new process sees them


async def test_an_empty_docs_folder_answers_unavailable(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    found = await HelpService(tmp_path / "empty").search("claim", 5, "")
    assert not found.available and not found.hits


async def test_an_unreadable_page_is_left_out_with_a_warning(docs: Path, caplog: pytest.LogCaptureFixture) -> None:
    (docs / "latin1.md").write_bytes("# Caf\xe9\n\nclaim\n".encode("latin-1"))
    (docs / "dangling.md").symlink_to(docs / "no-such-file.md")
    svc = HelpService(docs)
    with caplog.at_level(logging.WARNING, logger="loom_help"):
        found = await svc.search("claim", 10, "")
    available, hits = found.available, found.hits
    assert available and {h.section.page for h in hits} == {"tasks.md"}
    assert "left latin1.md out" in caplog.text and "left dangling.md out" in caplog.text


def test_the_shipped_docs_are_found_beside_the_package() -> None:
    root = shipped_docs_dir()
    texts = read_pages(root)
    assert root.is_dir() and not texts.skipped
    assert {"tasks.md", "policies.md", "reference/ops.md", "reference/errors.md"} <= {p for p, _ in texts.pages}


async def test_a_cut_section_read_carries_the_outline_and_an_uncut_one_does_not(tmp_path: Path) -> None:
    from loom_api.help.v1 import help_pb2 as pb
    from loom_help.handlers import HelpHandlers

    body = "".join(f"line {i} " + "y" * 90 + "\n" for i in range(400))
    write(tmp_path, "long.md", f"# Long\n\n## Short\n\nbrief\n\n## Big\n\n{body}")
    handlers = HelpHandlers(HelpService(tmp_path))
    short = await handlers.get(pb.GetRequest(page="long.md", anchor="short"), None)  # type: ignore[arg-type]
    assert not short.outline and not short.HasField("next_offset")
    first = await handlers.get(pb.GetRequest(page="long.md", anchor="big"), None)  # type: ignore[arg-type]
    assert first.HasField("next_offset") and [o.anchor for o in first.outline] == ["long", "short", "big"]
    parts, offset = [first.text], first.next_offset
    while True:
        more = await handlers.get(pb.GetRequest(page="long.md", anchor="big", offset=offset), None)  # type: ignore[arg-type]
        parts.append(more.text)
        if not more.HasField("next_offset"):
            break
        offset = more.next_offset
    assert "".join(parts) == "## Big\n\n" + body


async def test_get_without_docs_is_refused_as_unavailable(tmp_path: Path) -> None:
    from loom_api.help.v1 import help_pb2 as pb
    from loom_core.errors import NotFound
    from loom_help.handlers import HelpHandlers

    handlers = HelpHandlers(HelpService(tmp_path / "none"))
    with pytest.raises(NotFound) as err:
        await handlers.get(pb.GetRequest(page="tasks.md"), None)  # type: ignore[arg-type]
    assert err.value.detail == {"reason": "help_unavailable"}
    assert (await handlers.search(pb.SearchRequest(query="claim"), None)).available is False  # type: ignore[arg-type]

"""Hybrid help search with the real MiniLM model: BM25 and section embeddings fused, a named
identifier first, weak results flagged, section embeddings computed once per process (an index
stopped midway leaves its chunks to the next) and never per query, BM25 (said so) until the
embeddings are ready."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from loom_core import ranking
from loom_help.domain import hybrid
from loom_help.service.help import BM25, EMBED_CHUNK, HYBRID, HelpService

from tests.help.counting import CountingModel


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    write(
        root,
        "tasks.md",
        "# Tasks\n\n## Leases\n\nA pull claims a task under a lease. `task.heartbeat` extends the lease while the worker "
        "is still busy; a worker that stops sending it loses the task to the next pull.\n\n"
        "## Claim\n\nCall `task.claim` with the task id to take one task.\n",
    )
    write(
        root,
        "backups.md",
        "# Backups\n\n## Copy the data directory\n\nStop Loom, copy the data directory with tar, start it again.\n\n"
        "## Keys\n\nKeep the JWT secret in your secret store; without it old tokens are refused after a restore.\n",
    )
    write(
        root,
        "policies.md",
        "# Policies\n\n## Modes\n\n`LOOM_POLICY_MODE` is off, shadow or enforce.\n\n"
        "## Limits\n\nA rule can forbid more than 200 deletes an hour by one caller, or require a read before a delete; "
        "the policy gate mentions task.claim only as an example of an op name.\n",
    )
    return root


async def test_a_paraphrase_finds_its_section_once_the_embeddings_are_ready(docs: Path) -> None:
    svc = HelpService(docs)
    assert await svc.hybrid_ready()
    found = await svc.search("keep my hold on a job alive while I am still working on it", 3, "")
    assert found.ranking == HYBRID and found.available and not found.weak
    assert found.hits[0].section.anchor == "leases"
    assert 0.0 <= found.hits[-1].score <= found.hits[0].score <= 1.0


async def test_a_named_identifier_comes_first(docs: Path) -> None:
    svc = HelpService(docs)
    assert await svc.hybrid_ready()
    found = await svc.search("task.claim", 5, "")
    # Both sections naming task.claim come before any section that only reads like it.
    assert [h.section.anchor for h in found.hits[:2]] == ["claim", "limits"]
    assert not found.weak
    found = await svc.search("what is LOOM_POLICY_MODE", 5, "")
    assert found.hits[0].section.anchor == "modes"


async def test_an_unrelated_question_is_weak(docs: Path) -> None:
    svc = HelpService(docs)
    assert await svc.hybrid_ready()
    found = await svc.search("banana bread recipe with walnuts", 5, "")
    assert found.weak and found.ranking == HYBRID
    assert not (await svc.search("how do I back up the data directory", 5, "")).weak


async def test_section_embeddings_are_computed_once_and_queries_never_re_embed_sections(docs: Path) -> None:
    write(docs, "unique.md", f"# Unique\n\nA page only this test's docs have: {docs}\n")
    model = CountingModel()
    svc = HelpService(docs, model=model)
    assert await svc.hybrid_ready()
    index = await svc.index()
    assert index is not None
    sections = len(index.sections)
    assert len(model.texts) == sections
    for _ in range(3):
        await svc.search("copy the data directory", 5, "")
        await svc.search("task.claim", 5, "")
    # Each distinct query embedded once (then cached); no section embedded again.
    assert len(model.texts) == sections + 2
    assert model.texts[sections:] == ["copy the data directory", "task.claim"]
    # Another index of the same docs in this process reuses the vectors.
    again = CountingModel()
    other = HelpService(docs, model=again)
    assert await other.hybrid_ready()
    assert again.texts == [] and other.vectors is not None and np.array_equal(other.vectors, svc.vectors)


async def test_indexes_of_the_same_docs_built_together_embed_each_section_once(docs: Path) -> None:
    write(docs, "unique.md", f"# Unique\n\nA page only this test's docs have: {docs}\n")
    first, second = CountingModel(), CountingModel()
    a, b = HelpService(docs, model=first), HelpService(docs, model=second)
    assert all(await asyncio.gather(a.hybrid_ready(), b.hybrid_ready()))
    index = await a.index()
    assert index is not None
    assert len(first.texts) + len(second.texts) == len(index.sections)
    assert a.vectors is not None and b.vectors is not None and np.array_equal(a.vectors, b.vectors)


class StoppingModel(CountingModel):
    """The real model, stopping the index it embeds for once it has embedded `chunks` chunks (a
    test's instance or a replaced replica stopping while its sections are embedded)."""

    def __init__(self, chunks: int) -> None:
        super().__init__()
        self.chunks = chunks
        self.service: HelpService | None = None

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        vectors = super().encode(texts)
        self.chunks -= 1
        if self.chunks == 0 and self.service is not None:
            self.service.stop()
        return vectors


async def test_an_index_built_after_one_stopped_embeds_only_what_is_left(docs: Path) -> None:
    sections = "".join(f"## Part {n}\n\nSection {n} of a long page, {docs}.\n\n" for n in range(2 * EMBED_CHUNK))
    write(docs, "long.md", f"# Long\n\n{sections}")
    stopping = StoppingModel(chunks=1)
    stopped = HelpService(docs, model=stopping)
    stopping.service = stopped
    assert await stopped.index() is not None  # starts embedding; stops after its first chunk
    resuming = CountingModel()
    svc = HelpService(docs, model=resuming)
    assert await svc.hybrid_ready()
    index = await svc.index()
    assert index is not None and stopped.vectors is None
    assert len(stopping.texts) == EMBED_CHUNK
    assert len(resuming.texts) == len(index.sections) - EMBED_CHUNK
    assert resuming.texts == [hybrid.passage(index, s) for s in index.sections][EMBED_CHUNK:]


async def test_bm25_serves_and_says_so_until_the_embeddings_are_ready(docs: Path) -> None:
    svc = HelpService(docs)
    index = await svc.index()
    assert index is not None
    if svc.vectors is None:  # the embeddings are computed after the index, in a worker thread
        found = await svc.search("task.claim", 5, "")
        assert found.ranking == BM25 and found.hits[0].section.anchor == "claim"
    assert await svc.hybrid_ready()
    assert (await svc.search("task.claim", 5, "")).ranking == HYBRID


def test_fusion_rules() -> None:
    lexical = {1: 1.0, 2: 0.5, 3: 0.1}  # shares of the query's BM25 ceiling
    dense = {3: 0.9, 4: 0.5, 1: -0.2}  # cosines: a negative one counts 0
    fused = ranking.convex(lexical, dense, 0.5)
    assert fused[1] == pytest.approx(0.5) and fused[3] == pytest.approx(0.5) and fused[4] == pytest.approx(0.25)
    assert fused[2] == pytest.approx(0.25)
    assert ranking.convex(lexical, dense, 1.0)[1] == pytest.approx(1.0)
    r = ranking.rrf(lexical, dense)
    assert r[1] == pytest.approx(1 / 61 + 1 / 63) and r[4] == pytest.approx(1 / 62)
    assert [d for _, d in ranking.exact_first(fused, {2}, 3)] == [2, 1, 3]
    assert ranking.weak(0.1, named_found=False) and not ranking.weak(0.1, named_found=True)
    assert not ranking.weak(0.6, named_found=False) and ranking.weak(None, named_found=False)

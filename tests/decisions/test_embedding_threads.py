"""The local model runs a batch's texts on several worker threads at once: every vector is the
one its text gets alone, a read's question does not wait behind the writes' texts, and an
error reaches every caller of its batch."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

import numpy as np
import pytest
from loom_core.embedding import LocalModel, local_model_files, shared_local_model
from loom_decisions.service.embedding import Embedder
from loom_decisions.settings import DecisionsSettings

STATEMENTS = [f"retention for raw transcripts in namespace {i} is {i * 7 % 90} days" + " and more" * (i % 9) for i in range(24)]


async def test_vectors_on_two_threads_are_the_ones_each_text_gets_alone() -> None:
    model = shared_local_model()
    alone = np.stack([model.encode([t])[0] for t in STATEMENTS])
    assert np.array_equal(await model.embed(STATEMENTS, workers=2), alone)
    emb = Embedder(model, batch_max=64, threads=2)
    out = await asyncio.gather(*(emb.embed([t]) for t in STATEMENTS))
    assert np.array_equal(np.concatenate(out), alone)


def test_the_threads_default_to_one_per_cpu() -> None:
    from loom_decisions.service.embedding import build_embedder

    assert DecisionsSettings().embedding_threads == 0
    emb = build_embedder(DecisionsSettings())
    assert emb._threads >= 1  # os.cpu_count() on this machine
    assert build_embedder(DecisionsSettings(embedding_threads=3))._threads == 3


class HeldWrites(LocalModel):
    """Writes' statements wait for `go` before they run; everything else runs at once."""

    def __init__(self) -> None:
        super().__init__(files=local_model_files())
        self.go = threading.Event()
        self.held = threading.Semaphore(0)  # released once per statement held

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if texts[0].startswith("retention"):
            self.held.release()
            if not self.go.wait(60):
                raise TimeoutError("the writes were never let go")
        return super().encode(texts)


async def test_a_question_runs_while_every_write_thread_is_busy() -> None:
    model = HeldWrites()
    emb = Embedder(model, batch_max=64, threads=2)
    writes = [asyncio.ensure_future(emb.embed([t])) for t in STATEMENTS[:8]]
    for _ in range(2):  # both write threads hold a statement
        assert await asyncio.to_thread(model.held.acquire, timeout=60)
    question = await emb.embed_query("how long do we keep transcripts?")
    assert not any(w.done() for w in writes)
    model.go.set()
    got = await asyncio.gather(*writes)
    assert np.allclose(question, shared_local_model().encode(["how long do we keep transcripts?"])[0])
    assert np.array_equal(np.concatenate(got), shared_local_model().encode(STATEMENTS[:8]))


class Poisoned(LocalModel):
    def __init__(self) -> None:
        super().__init__(files=local_model_files())

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if "poison" in texts:
            raise ValueError("the model could not run 'poison'")
        return super().encode(texts)


async def test_an_error_reaches_every_caller_of_its_batch_and_the_next_batch_runs() -> None:
    model = Poisoned()
    emb = Embedder(model, batch_max=64, threads=2)
    texts = [*STATEMENTS[:3], "poison", *STATEMENTS[3:6]]
    results = await asyncio.gather(*(emb.embed([t]) for t in texts), return_exceptions=True)  # one batch: queued in one tick
    assert all(isinstance(r, ValueError) for r in results)
    with pytest.raises(ValueError, match="poison"):
        await model.embed(texts, workers=2)
    assert (await emb.embed(STATEMENTS[:2])).shape == (2, 384)

"""Embeddings for memory rows and queries.

- `LocalModel` (loom_core.embedding): all-MiniLM-L6-v2 as an int8 ONNX file on onnxruntime, its
  files checked against pinned SHA-256 digests at load; one copy per process, shared with help.
- `OpenAIModel`: an OpenAI-compatible `POST {url}/embeddings` over httpx, for clusters.

`Embedder` runs the model off the event loop (worker threads for the local model: a batch's
texts spread over `embedding_threads` of them, one per CPU by default, so writes' embeddings use
every core) and batches: texts from calls that arrive while a batch runs go together into the
next one.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Protocol

import httpx
import numpy as np
from loom_core.batching import Coalescer
from loom_core.embedding import LocalModel, shared_local_model
from loom_core.errors import ErrorCode, Unavailable

from ..settings import DecisionsSettings


class Model(Protocol):
    dimensions: int

    async def embed(self, texts: Sequence[str], *, workers: int = 1) -> np.ndarray:
        """The texts' unit vectors, on up to `workers` worker threads where the model runs here."""
        ...

    async def close(self) -> None: ...


class OpenAIModel:
    """An OpenAI-compatible embeddings endpoint (`POST {url}/embeddings`)."""

    def __init__(self, url: str, model: str, api_key: str, dimensions: int, timeout: float) -> None:
        if not url:
            raise ValueError("LOOM_EMBEDDING_URL is required when LOOM_EMBEDDING_PROVIDER=openai")
        self.dimensions = dimensions
        self._model = model
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(base_url=url.rstrip("/") + "/", headers=headers, timeout=timeout)

    async def embed(self, texts: Sequence[str], *, workers: int = 1) -> np.ndarray:
        """`workers` is the local model's: the endpoint runs the texts where it runs them."""
        try:
            r = await self._client.post("embeddings", json={"model": self._model, "input": list(texts)})
        except httpx.HTTPError as exc:
            raise Unavailable(ErrorCode.BACKEND_UNAVAILABLE, f"the embeddings endpoint did not answer ({type(exc).__name__})") from None
        if r.status_code != 200:
            raise Unavailable(ErrorCode.BACKEND_UNAVAILABLE, f"the embeddings endpoint answered {r.status_code}")
        data = sorted(r.json()["data"], key=lambda d: d["index"])
        vecs = np.array([d["embedding"] for d in data], dtype=np.float32)
        if vecs.shape != (len(texts), self.dimensions):
            raise Unavailable(ErrorCode.BACKEND_UNAVAILABLE, f"the embeddings endpoint answered vectors of shape {vecs.shape}")
        unit: np.ndarray = vecs / np.clip(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12, None)
        return unit

    async def close(self) -> None:
        await self._client.aclose()


class Embedder:
    """Batches concurrent embedding requests into one model call at a time (loom_core.batching).

    Queries (`embed_query`: a search's or precedents' question) batch apart from the texts of
    writes: a read never waits for a batch of up to `batch_max` statements (~6 ms of CPU each)
    to finish before its own text runs; the two batches run side by side in worker threads.
    The local model runs a batch's texts on up to `threads` worker threads at once: a group
    runs one batch at a time, so on one thread the writes' texts would be capped at one core's
    ~180 a second."""

    def __init__(self, model: Model, batch_max: int = 64, threads: int = 1) -> None:
        self.model = model
        self.dimensions = model.dimensions
        self._threads = max(1, threads)
        self._batches: Coalescer[str, list[str], np.ndarray] = Coalescer(self._run, max_size=batch_max, size=len)

    async def embed(self, texts: Sequence[str], *, group: str = "write") -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        return await self._batches.submit(group, list(texts))

    async def embed_one(self, text: str) -> list[float]:
        return [float(x) for x in (await self.embed([text]))[0]]

    async def embed_query(self, text: str) -> list[float]:
        """A read's question, batched with other reads' questions only."""
        return [float(x) for x in (await self.embed([text], group="query"))[0]]

    async def _run(self, _: str, calls: list[list[str]]) -> list[np.ndarray]:
        flat = [t for texts in calls for t in texts]
        vecs = await self.model.embed(flat, workers=self._threads)
        out, i = [], 0
        for texts in calls:
            out.append(vecs[i : i + len(texts)])
            i += len(texts)
        return out

    async def close(self) -> None:
        await self.model.close()

    async def load(self) -> None:
        """Wait for the local model to load (in a worker thread); a remote model has nothing to load."""
        if isinstance(self.model, LocalModel):
            await self.model.start_loading()


def build_embedder(settings: DecisionsSettings) -> Embedder:
    model: Model
    if settings.embedding_provider == "openai":
        model = OpenAIModel(
            settings.embedding_url,
            settings.embedding_model,
            settings.embedding_api_key,
            settings.embedding_dimensions,
            settings.embedding_timeout_seconds,
        )
    else:
        model = shared_local_model()
    return Embedder(model, settings.embedding_batch_max, settings.embedding_threads or os.cpu_count() or 1)

"""Embeddings for memory rows and queries.

- `LocalModel` (loom_core.embedding): all-MiniLM-L6-v2 as an int8 ONNX file on onnxruntime, its
  files checked against pinned SHA-256 digests at load; one copy per process, shared with help.
- `OpenAIModel`: an OpenAI-compatible `POST {url}/embeddings` over httpx, for clusters.

`Embedder` runs the model off the event loop (a worker thread for the local model) and batches:
texts from calls that arrive while a batch runs go together into the next one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Protocol

import httpx
import numpy as np
from loom_core.embedding import LocalModel, shared_local_model
from loom_core.errors import ErrorCode, Unavailable

from ..settings import DecisionsSettings


class Model(Protocol):
    dimensions: int

    async def embed(self, texts: Sequence[str]) -> np.ndarray: ...

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

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
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
    """Batches concurrent embedding requests into one model call at a time."""

    def __init__(self, model: Model, batch_max: int = 64) -> None:
        self.model = model
        self.dimensions = model.dimensions
        self._batch_max = max(1, batch_max)
        self._pending: list[tuple[list[str], asyncio.Future[np.ndarray]]] = []
        self._running: asyncio.Task[None] | None = None

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        fut: asyncio.Future[np.ndarray] = asyncio.get_running_loop().create_future()
        self._pending.append((list(texts), fut))
        if self._running is None or self._running.done():
            self._running = asyncio.create_task(self._drain())
        return await fut

    async def embed_one(self, text: str) -> list[float]:
        return [float(x) for x in (await self.embed([text]))[0]]

    async def _drain(self) -> None:
        while self._pending:
            batch: list[tuple[list[str], asyncio.Future[np.ndarray]]] = []
            n = 0
            while self._pending and (not batch or n + len(self._pending[0][0]) <= self._batch_max):
                item = self._pending.pop(0)
                batch.append(item)
                n += len(item[0])
            texts = [t for item in batch for t in item[0]]
            try:
                vecs = await self.model.embed(texts)
            except Exception as exc:  # noqa: BLE001 - every waiter of the batch gets the error, whatever it is
                for _, fut in batch:
                    if not fut.done():
                        fut.set_exception(exc)
                continue
            i = 0
            for texts_of, fut in batch:
                if not fut.done():
                    fut.set_result(vecs[i : i + len(texts_of)])
                i += len(texts_of)

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
    return Embedder(model, settings.embedding_batch_max)

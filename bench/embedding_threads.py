"""The local model's texts/s on one worker thread against several, alternating in one process.

    .venv/bin/python bench/embedding_threads.py [--texts 192] [--threads 2] [--rounds 3] [--json]

`LocalModel.embed(texts, workers=k)`: one text a run on each of `k` threads (what the decisions
plane's `embedding_threads` sets), against `k=1` (one thread, as every write batch ran before).
The vectors must come out bit-identical; the ratio is texts/s on k threads over one, per round,
with the CPU a text and the cores the model kept busy. On an idle machine of n cores the ratio
is at most min(k, n); a busy machine gives the model what the other processes leave.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _machine import add_model_arguments, machine, use_model  # noqa: E402 - bench/ is on sys.path when a script runs


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def run(texts: list[str], threads: int, rounds: int) -> list[dict[str, Any]]:
    import numpy as np
    from loom_core.embedding import shared_local_model

    model = shared_local_model()
    await model.start_loading()
    alone = None
    out = []
    for _ in range(rounds):
        row: dict[str, Any] = {"load": os.getloadavg()[0]}
        for k in (1, threads):
            t, cpu = time.perf_counter(), cpu_seconds()
            vecs = await model.embed(texts, workers=k)
            wall, used = time.perf_counter() - t, cpu_seconds() - cpu
            if alone is None:
                alone = vecs
            if not np.array_equal(vecs, alone):
                raise SystemExit(f"the vectors on {k} threads differ from one thread's")
            row[str(k)] = {"texts_per_s": len(texts) / wall, "cpu_ms_a_text": used * 1000 / len(texts), "cores": used / wall}
        out.append(row)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--texts", type=int, default=192)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--rounds", type=int, default=3)
    add_model_arguments(ap)
    a = ap.parse_args()
    model_id = use_model(a.model)
    texts = [
        f"retention for raw transcripts in support namespace bench-{i}: keep transcripts {i % 60} days; replay needs them"
        for i in range(a.texts)
    ]
    rounds = asyncio.run(run(texts, max(2, a.threads), a.rounds))
    if a.json:
        print(json.dumps({"machine": machine(), "model": model_id, "rounds": rounds}, indent=2))
        return 0
    k = str(max(2, a.threads))
    print(f"machine: {machine()}; model {model_id}; {a.texts} texts a round, one text a run")
    for r in rounds:
        one, many = r["1"], r[k]
        print(
            f"load {r['load']:5.1f}: 1 thread {one['texts_per_s']:6.1f} texts/s ({one['cpu_ms_a_text']:.2f} ms CPU a text, "
            f"{one['cores']:.2f} cores), {k} threads {many['texts_per_s']:6.1f}/s ({many['cpu_ms_a_text']:.2f} ms, "
            f"{many['cores']:.2f} cores): {many['texts_per_s'] / one['texts_per_s']:.2f}x; vectors identical"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

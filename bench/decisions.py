"""decision.precedents latency with 10^5 decisions in one namespace, beside an exact NumPy cosine
top-25 over the same vectors in the same run, and the recall of our results against it.

    .venv/bin/python bench/decisions.py [-n 100000] [--queries 200] [--no-index] [--json]

The vectors are SYNTHETIC: embedding 10^5 statements with the local model on this shared
2-core machine would take longer than the bench should, so the decisions get 384-dimension
unit vectors drawn around 2,000 random topic centres (a decision is its topic plus noise), and
each query is a stored decision's vector perturbed as a paraphrase would be. They are written
straight into the plane's tables (memory_rows, memory_vectors, decision_records) through
Parquet, then `DecisionOps.precedents` runs as the op does, minus the query's embedding: the
embedder is handed the query vector (the local model's own per-query cost is measured apart
and printed, so the op's total is the sum). Two modes of the same search:

- exact: cosineDistance over the namespace's rows in ClickHouse (skip indexes off), the path a
  namespace takes while its cache warms;
- hnsw: ClickHouse's vector_similarity HNSW index (post-filtered, with the exact fallback);
- cache-exact / cache-hnsw: the process-local cache of the namespace (service/vector_index.py),
  built from the store here (its build time is printed), searched by a cosine scan of its
  in-memory matrix or by its usearch HNSW graph; precedents serves the hits' rows and records
  from the cache too (no store read). "its search alone" is the cache's own search.

Baseline: NumPy `M @ q` + argpartition over the same float32 matrix, in this process.

`--no-index` drops ClickHouse's HNSW index before loading and skips the hnsw mode: building it
over 10^5 vectors is what takes long on a loaded machine. `--ann-only N` also builds a usearch
index of N vectors straight from NumPy (no store) and times its search and recall, for the
10^6 figure. The model's load, its first and tenth single-text encodes, and the throughput of
concurrent single-statement embeddings batched by the Embedder are printed too.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _machine import machine  # noqa: E402 - bench/ is on sys.path when a script runs, the root after the insert above

ORG, NS = "bench-org", "bench-ns"
TOPICS = 2000
DIMS = 384
K = 25


def unit(x: np.ndarray) -> np.ndarray:
    out: np.ndarray = (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)
    return out


def synthetic(n: int, queries: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = unit(rng.standard_normal((TOPICS, DIMS)))
    topic = rng.integers(0, TOPICS, n)
    docs = unit(centres[topic] + 0.08 * rng.standard_normal((n, DIMS)))
    picks = rng.integers(0, n, queries)
    qs = unit(docs[picks] + 0.06 * rng.standard_normal((queries, DIMS)))
    return docs, qs


def pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))]


async def load(store: Any, docs: np.ndarray, tmp: Path) -> float:
    import pyarrow as pa
    import pyarrow.parquet as pq
    from loom_core.store import ch_time

    n = len(docs)
    now = ch_time()
    keys = [f"decision/bench/scenario-{i}" for i in range(n)]
    tags = [["decision:category:bench"]] * n
    t0 = time.perf_counter()
    embedding = pa.FixedSizeListArray.from_arrays(pa.array(docs.reshape(-1), pa.float32()), DIMS).cast(pa.list_(pa.float32()))
    # Both tables start with the row's identity: org, namespace, key and its writer.
    ident = {"org": [ORG] * n, "namespace": [NS] * n, "key": keys, "agent": ["bench"] * n, "user": [""] * n, "session": [""] * n}
    vec = pa.table(
        {
            **ident,
            "version": pa.array([1] * n, pa.uint64()),
            "memory_type": ["decision"] * n,
            "tags": tags,
            "live": pa.array([1] * n, pa.uint8()),
            "embedding": embedding,
        }
    )
    rows = pa.table(
        {
            **ident,
            "memory_id": [f"m{i}" for i in range(n)],
            "version": pa.array([1] * n, pa.uint64()),
            "value": [f"scenario {i}. Decided option {i % 7} because reason {i}." for i in range(n)],
            "value_hash": [""] * n,
            "memory_type": ["decision"] * n,
            "tags": tags,
            "status": ["active"] * n,
            "embedding": embedding,
        }
    )
    recs = pa.table(
        {
            "org": [ORG] * n,
            "namespace": [NS] * n,
            "key": keys,
            "version": pa.array([1] * n, pa.uint64()),
            "record_version": pa.array([1] * n, pa.uint64()),
            "status": ["active"] * n,
            "category": ["bench"] * n,
            "scenario": [f"scenario {i}" for i in range(n)],
            "outcome": [f"option {i % 7}" for i in range(n)],
            "reasoning": [f"reason {i}" for i in range(n)],
            "agent": ["bench"] * n,
        }
    )
    for name, table in (("memory_vectors", vec), ("memory_rows", rows), ("decision_records", recs)):
        path = tmp / f"{name}.parquet"
        pq.write_table(table, path)
        cols = ", ".join(table.column_names)
        extra = {"memory_rows": ", ts", "decision_records": ", recorded_at, ts"}.get(name, "")
        fill = {"memory_rows": f", '{now}'", "decision_records": f", '{now}', '{now}'"}.get(name, "")
        await store.execute(f"INSERT INTO {{db}}.{name} ({cols}{extra}) SELECT {cols}{fill} FROM file('{path}', Parquet)")
    return time.perf_counter() - t0


class QueryVector:
    """The bench's embedder model: hands back the query vector set for the next call."""

    dimensions = DIMS

    def __init__(self) -> None:
        self.next: np.ndarray = np.zeros((1, DIMS), np.float32)

    async def embed(self, texts: Any) -> np.ndarray:
        return self.next.reshape(1, DIMS)

    async def close(self) -> None:
        return None


ALL_MODES = ("exact", "hnsw", "cache-exact", "cache-hnsw")


async def run(n: int, queries: int, seed: int, index: bool = True, only: Sequence[str] = ALL_MODES) -> dict[str, Any]:
    from loom_core.embedding import LocalModel
    from loom_core.store import run_migrations
    from loom_core.store.embedded import EmbeddedStore
    from loom_decisions.service.decisions import DecisionOps
    from loom_decisions.service.embedding import Embedder
    from loom_decisions.service.rows import Deps, Rows
    from loom_decisions.settings import DecisionsSettings
    from loom_decisions.store.schema import migrations

    tmp = Path(tempfile.mkdtemp(prefix="loom-bench-decisions-"))
    store = EmbeddedStore.open(tmp / "chdb", "loom_bench")
    await run_migrations(store, migrations(DIMS))
    if not index:
        await store.execute("ALTER TABLE {db}.memory_vectors DROP INDEX embedding_hnsw")
    docs, qs = synthetic(n, queries, seed)
    load_s = await load(store, docs, tmp)

    # The exact baseline, same vectors, same process.
    exact: list[np.ndarray] = []
    np_ms: list[float] = []
    for q in qs:
        t = time.perf_counter()
        sims = docs @ q
        top = np.argpartition(-sims, K)[:K]
        top = top[np.argsort(-sims[top])]
        np_ms.append((time.perf_counter() - t) * 1000)
        exact.append(top)

    out: dict[str, Any] = {
        "n": n,
        "queries": queries,
        "load_seconds": round(load_s, 1),
        "numpy": {"p50_ms": pct(np_ms, 50), "p99_ms": pct(np_ms, 99)},
    }
    ctx = SimpleNamespace(org=ORG, namespace=NS)
    modes = [("exact", 10**12, 0), *([("hnsw", 1, 0)] if index else []), ("cache-exact", 10**12, 1), ("cache-hnsw", 10**12, 1)]
    for mode, min_rows, cache_rows in (m for m in modes if m[0] in only):
        # The floor off: synthetic vectors are not the model's, and recall is measured against the exact top 25.
        settings = DecisionsSettings(
            memory_exposure_ledger_enabled=False,
            memory_vector_index_min_rows=min_rows,
            memory_vector_cache_min_rows=cache_rows,
            memory_vector_cache_search="hnsw" if mode == "cache-hnsw" else "exact",
            decision_precedents_min_similarity=-1.0,
        )
        model = QueryVector()
        rows = Rows(Deps(settings=settings, store=store, leases=None, exposures=None, embedder=Embedder(model)))  # type: ignore[arg-type]
        ops = DecisionOps(rows)
        extra: dict[str, Any] = {}
        if cache_rows:
            t = time.perf_counter()
            await rows.vectors.wait_ready(ORG, NS)
            extra["build_s"] = time.perf_counter() - t
        model.next = qs[0]
        await ops.precedents(ctx, "warm-up", "", False, K)  # type: ignore[arg-type]
        ms: list[float] = []
        recall: list[float] = []
        for q, want in zip(qs, exact, strict=True):
            model.next = q
            t = time.perf_counter()
            got, _ = await ops.precedents(ctx, "q", "", False, K)  # type: ignore[arg-type]
            ms.append((time.perf_counter() - t) * 1000)
            got_ids = {int(p["memory_key"].rsplit("-", 1)[1]) for p in got}
            recall.append(len(got_ids & set(want.tolist())) / K)
        if cache_rows:
            space = rows.vectors._spaces[(ORG, NS)]
            own: list[float] = []
            for q in qs:
                t = time.perf_counter()
                space.search(q, K * 3, "decision", ["decision:category:bench"])
                own.append((time.perf_counter() - t) * 1000)
            extra["index_search_p50_ms"] = pct(own, 50)
            extra["index_search_p99_ms"] = pct(own, 99)
            await rows.vectors.stop()
        out[mode] = {"p50_ms": pct(ms, 50), "p99_ms": pct(ms, 99), "recall_at_25": statistics.fmean(recall), **extra}

    local = LocalModel()
    t = time.perf_counter()
    local.load()
    out["model_load_s"] = time.perf_counter() - t
    emb_ms = []
    for i in range(30):
        t = time.perf_counter()
        local.encode([f"how long do we keep transcripts of case {i}?"])
        emb_ms.append((time.perf_counter() - t) * 1000)
    out["query_embedding"] = {"p50_ms": pct(emb_ms, 50), "p99_ms": pct(emb_ms, 99), "first_ms": emb_ms[0], "tenth_ms": emb_ms[9]}
    out["embed_throughput"] = await embed_throughput(local)
    await store.close()
    return out


async def embed_throughput(local: Any, writers: int = 16, n: int = 400) -> dict[str, float]:
    """Statements per second embedded by `writers` concurrent single-statement calls through one
    Embedder (which batches the calls that arrive while a batch runs), against one call at a time."""
    from loom_decisions.service.embedding import Embedder

    texts = [
        f"retention for raw transcripts in support namespace {i}. Decided keep transcripts {i % 60} days because replay needs them; "
        "legal hold is handled by export, not by retention. Rejected: keep forever; 7 days."
        for i in range(n)
    ]
    emb = Embedder(local)
    t = time.perf_counter()
    for text in texts[:50]:
        await emb.embed_one(text)
    serial = 50 / (time.perf_counter() - t)
    queue = list(texts)

    async def writer() -> None:
        while queue:
            await emb.embed_one(queue.pop())

    t = time.perf_counter()
    await asyncio.gather(*(writer() for _ in range(writers)))
    return {"serial_per_s": serial, "concurrent_per_s": n / (time.perf_counter() - t), "writers": writers}


def ann_only(n: int, queries: int, seed: int) -> dict[str, Any]:
    """usearch over n synthetic vectors straight from NumPy: build, search p50/p99, recall@25."""
    from usearch.index import Index

    docs, qs = synthetic(n, queries, seed)
    index = Index(ndim=DIMS, metric="cos", dtype="f32", connectivity=16, expansion_add=128, expansion_search=128)
    t = time.perf_counter()
    index.add(np.arange(n, dtype=np.uint64), docs)
    build = time.perf_counter() - t
    ms, recall = [], []
    for q in qs:
        t = time.perf_counter()
        found = index.search(q, K)
        ms.append((time.perf_counter() - t) * 1000)
        sims = docs @ q
        want = set(np.argpartition(-sims, K)[:K].tolist())
        recall.append(len(want & {int(k) for k in found.keys}) / K)
    return {"n": n, "build_s": build, "p50_ms": pct(ms, 50), "p99_ms": pct(ms, 99), "recall_at_25": statistics.fmean(recall)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--no-index", action="store_true")
    ap.add_argument("--ann-only", type=int, default=0)
    ap.add_argument("--modes", default=",".join(ALL_MODES), help="comma-separated subset of " + ", ".join(ALL_MODES))
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    load_before = os.getloadavg()
    r = asyncio.run(run(a.n, a.queries, a.seed, index=not a.no_index, only=a.modes.split(",")))
    if a.ann_only:
        r["ann_only"] = ann_only(a.ann_only, a.queries, a.seed)
    r["load"] = {"before": load_before, "after": os.getloadavg()}
    if a.json:
        print(json.dumps(r, indent=2))
        return 0
    base = r["numpy"]["p50_ms"]
    print(f"machine: {machine()}; load average {r['load']['before'][0]:.2f} before, {r['load']['after'][0]:.2f} after")
    print(f"decisions in the namespace: {r['n']:,} (synthetic 384-d vectors), queries: {r['queries']}, load {r['load_seconds']} s")
    print(f"numpy exact top-25      p50 {r['numpy']['p50_ms']:7.2f} ms  p99 {r['numpy']['p99_ms']:7.2f} ms  (baseline)")
    for mode in ("exact", "hnsw", "cache-exact", "cache-hnsw"):
        if mode not in r:
            continue
        m = r[mode]
        print(
            f"precedents, {mode:11} p50 {m['p50_ms']:7.2f} ms  p99 {m['p99_ms']:7.2f} ms  "
            f"{m['p50_ms'] / base:6.1f}x numpy p50  recall@25 {m['recall_at_25']:.3f}"
        )
    for mode in ("cache-exact", "cache-hnsw"):
        if mode not in r:
            continue
        c = r[mode]
        print(
            f"{mode}: built from the store in {c['build_s']:.1f} s; its search alone p50 {c['index_search_p50_ms']:.3f} ms, "
            f"p99 {c['index_search_p99_ms']:.3f} ms ({c['index_search_p50_ms'] / base:.2f}x numpy p50)"
        )
    e = r["query_embedding"]
    print(
        f"query embedding (local) p50 {e['p50_ms']:7.2f} ms  p99 {e['p99_ms']:7.2f} ms  (add to the op's total); "
        f"model load {r['model_load_s']:.2f} s, then first encode {e['first_ms']:.2f} ms, tenth {e['tenth_ms']:.2f} ms"
    )
    t = r["embed_throughput"]
    print(
        f"statement embeddings: {t['serial_per_s']:.0f}/s one call at a time, {t['concurrent_per_s']:.0f}/s from {t['writers']} concurrent "
        f"writers batched by the Embedder ({t['concurrent_per_s'] / t['serial_per_s']:.1f}x)"
    )
    if "ann_only" in r:
        x = r["ann_only"]
        print(
            f"usearch alone over {x['n']:,} vectors: built in {x['build_s']:.0f} s, search p50 {x['p50_ms']:.3f} ms, "
            f"p99 {x['p99_ms']:.3f} ms, recall@25 {x['recall_at_25']:.3f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

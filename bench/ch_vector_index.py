"""ClickHouse's vector index (chDB's `vector_similarity` HNSW) against exact cosine, on the
precedents bench's corpus (bench/decision_corpus.py: decision statements' MiniLM vectors), for a
few index settings: quantization of the graph's vectors, connectivity (M), the candidate list
while building and `hnsw_candidate_list_size_for_search` while searching.

    .venv/bin/python bench/ch_vector_index.py [-n 100000] [--queries 200] [--settings bf16:32:128,...] [--widths 64,256]

Each setting is one table (id, embedding) with the index, loaded in one insert from Parquet and
merged to one part (its build time is the insert plus the merge); a query is
`ORDER BY cosineDistance(embedding, q) LIMIT 25` with the vector bound as a parameter, as
memory.search asks the store. Recall@25 is against the exact NumPy top 25 of the same vectors.
The usearch cache's figures on the same corpus come from `bench/decisions.py --ann-only N`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import decision_corpus
from _machine import machine, percentile
from decisions import K, exact_top


def _param(vector: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.7g}" for x in vector.tolist()) + "]"


def run(n: int, queries: int, seed: int, settings: list[tuple[str, int, int]], widths: list[int]) -> list[dict[str, object]]:
    import chdb
    import pyarrow as pa
    import pyarrow.parquet as pq

    docs = decision_corpus.composed(n, seed)
    qs = decision_corpus.embed(decision_corpus.questions(queries, seed), f"questions-{queries}-{seed}")
    exact, np_ms = exact_top(np.asarray(docs), qs)
    out: list[dict[str, object]] = [
        {"setting": "numpy exact", "p50_ms": percentile(np_ms, 50), "p99_ms": percentile(np_ms, 99), "recall_at_25": 1.0}
    ]
    with tempfile.TemporaryDirectory(prefix="loom-bench-chvec-") as tmp:
        path = Path(tmp) / "vectors.parquet"
        embedding = pa.FixedSizeListArray.from_arrays(pa.array(np.asarray(docs).reshape(-1), pa.float32()), docs.shape[1])
        pq.write_table(pa.table({"id": pa.array(np.arange(n, dtype=np.uint32)), "embedding": embedding.cast(pa.list_(pa.float32()))}), path)
        conn = chdb.connect(f"file:{Path(tmp) / 'chdb'}")
        conn.query("CREATE DATABASE IF NOT EXISTS b")

        def timed(sql: str, extra: str, vecs: np.ndarray) -> tuple[list[float], list[float]]:
            ms: list[float] = []
            recall: list[float] = []
            for q, want in zip(vecs, exact, strict=True):
                t = time.perf_counter()
                got = conn.query(sql + extra, "CSV", params={"q": _param(q)}).bytes().decode().split()
                ms.append((time.perf_counter() - t) * 1000)
                recall.append(len({int(x) for x in got} & set(want.tolist())) / K)
            return ms, recall

        sql = f"SELECT id FROM b.{{t}} ORDER BY cosineDistance(embedding, {{q:Array(Float32)}}) LIMIT {K}"
        conn.query("CREATE TABLE b.plain (id UInt32, embedding Array(Float32)) ENGINE = MergeTree ORDER BY id")
        conn.query(f"INSERT INTO b.plain SELECT * FROM file('{path}', Parquet)")
        ms, recall = timed(sql.replace("{t}", "plain"), "", qs)
        out.append(
            {
                "setting": "chDB exact scan",
                "p50_ms": percentile(ms, 50),
                "p99_ms": percentile(ms, 99),
                "recall_at_25": statistics.fmean(recall),
            }
        )
        for quant, m, ef_add in settings:
            table = f"hnsw_{quant}_{m}_{ef_add}"
            conn.query(
                f"CREATE TABLE b.{table} (id UInt32, embedding Array(Float32), INDEX v embedding TYPE "
                f"vector_similarity('hnsw', 'cosineDistance', {docs.shape[1]}, '{quant}', {m}, {ef_add})) "
                "ENGINE = MergeTree ORDER BY id SETTINGS index_granularity = 8192"
            )
            t = time.perf_counter()
            conn.query(f"INSERT INTO b.{table} SELECT * FROM file('{path}', Parquet)")
            conn.query(f"OPTIMIZE TABLE b.{table} FINAL")
            build = time.perf_counter() - t
            parts = conn.query(f"SELECT count() FROM system.parts WHERE database = 'b' AND table = '{table}' AND active", "CSV").bytes()
            for width in widths:
                ms, recall = timed(sql.replace("{t}", table), f" SETTINGS hnsw_candidate_list_size_for_search = {width}", qs)
                out.append(
                    {
                        "setting": f"chDB hnsw {quant} M={m} ef_add={ef_add} ef_search={width}",
                        "build_s": build,
                        "parts": int(parts.decode().strip()),
                        "p50_ms": percentile(ms, 50),
                        "p99_ms": percentile(ms, 99),
                        "recall_at_25": statistics.fmean(recall),
                        "load": os.getloadavg()[0],
                    }
                )
                print(out[-1], file=sys.stderr, flush=True)
            conn.query(f"DROP TABLE b.{table}")
        conn.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    decision_corpus.add_corpus_arguments(ap)
    ap.add_argument("--settings", default="bf16:32:128,f32:32:128,i8:32:128,bf16:16:64", help="quantization:M:ef_add, comma-separated")
    ap.add_argument("--widths", default="64,128,256")
    a = ap.parse_args()
    settings = [(q, int(m), int(e)) for q, m, e in (s.split(":") for s in a.settings.split(","))]
    before = os.getloadavg()
    rows = run(a.n, a.queries, a.seed, settings, [int(w) for w in a.widths.split(",")])
    print(f"machine: {machine()}; load average {before[0]:.2f} before, {os.getloadavg()[0]:.2f} after")
    print(f"vectors: {a.n:,} composed MiniLM decision vectors (384-d), queries: {a.queries}, top {K}")
    base = float(rows[0]["p50_ms"])  # type: ignore[arg-type]
    for r in rows:
        built = f"  built {r['build_s']:6.1f} s in {r['parts']} part(s), load {r['load']:.0f}" if "build_s" in r else ""
        print(
            f"{r['setting']:52} p50 {r['p50_ms']:8.2f} ms  p99 {r['p99_ms']:8.2f} ms  "
            f"{float(r['p50_ms']) / base:6.1f}x numpy  recall@25 {r['recall_at_25']:.3f}{built}"  # type: ignore[arg-type]
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

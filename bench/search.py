"""Help search quality: BM25, dense, their fusion and bm25s on the same sections, in one run.

    .venv/bin/python bench/search.py [--evalset bench/data/help_eval.json] [--rest] [--reps 5] [--json]

The shipped docs (docs/) are split by Loom's splitter once; every ranker sees the same sections:

- bm25: `HelpIndex.rank` (Loom's BM25: folded words plus whole identifiers, headings counted more,
  operator pages at 0.75);
- dense: cosine of each section's all-MiniLM-L6-v2 embedding (`hybrid.passage`: breadcrumb, then
  the plain text) to the query's, the vectors computed once here as the index build does;
- fusion: what help.search serves (`hybrid.rank`: convex, alpha 0.5, exact identifiers first);
- fusion-rrf: the same lists fused by reciprocal rank (k = 60), for comparison;
- bm25s: `bm25s.BM25` over each section's text, English stopwords and Snowball stemmer.

Per query kind (bench/data/help_eval.json): MRR@10 (first section with any grade) and nDCG@10
(gain 2^grade - 1). The off-topic queries judge the weak flag: the best hit's cosine for on-topic
against off-topic queries, and how many of each the threshold calls weak. Latency: the ranking in
this process (query embedding included, uncached), and with --rest help.search over REST against
an embedded Loom started here (warm: every query asked once before timing). The load average is
printed beside the figures: this machine is shared.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _machine import add_model_arguments, announce_model, embedded_loom, machine, percentile  # bench/ is on sys.path when a script runs

ROOT = Path(__file__).resolve().parents[1]

EVALSET = ROOT / "bench" / "data" / "help_eval.json"
KINDS = ("identifier", "howto", "symptom", "paraphrase")
RANKERS = ("bm25", "dense", "fusion", "fusion-rrf", "bm25s")


def load() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def mrr10(got: list[str], rel: dict[str, int]) -> float:
    return next((1.0 / (i + 1) for i, key in enumerate(got[:10]) if rel.get(key, 0) > 0), 0.0)


def ndcg10(got: list[str], rel: dict[str, int]) -> float:
    dcg = sum((2 ** rel.get(key, 0) - 1) / math.log2(i + 2) for i, key in enumerate(got[:10]))
    ideal = sorted(rel.values(), reverse=True)[:10]
    idcg = sum((2**g - 1) / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def run(evalset: Path, reps: int) -> dict[str, Any]:
    import bm25s
    import Stemmer
    from loom_core.embedding import shared_local_model
    from loom_help.domain import hybrid
    from loom_help.service.help import build_index
    from loom_help.store.pages import read_pages, shipped_docs_dir

    queries = json.loads(evalset.read_text())["queries"]
    index = build_index(read_pages(shipped_docs_dir()))
    keys = [f"{s.page}#{s.anchor}" for s in index.sections]
    known = set(keys)
    for q in queries:
        missing = [r for r in q["rel"] if r not in known]
        if missing:
            print(f"warning: {q['q']!r} judges sections the docs lack: {missing}", file=sys.stderr)

    model = shared_local_model()
    model.load()
    t = time.perf_counter()
    vectors = model.encode([hybrid.passage(index, s) for s in index.sections])
    embed_s = time.perf_counter() - t
    qvecs = {q["q"]: model.encode([q["q"]])[0] for q in queries}

    stemmer = Stemmer.Stemmer("english")
    corpus = [index.pages[s.page].section_text(s) for s in index.sections]
    b25 = bm25s.BM25()
    b25.index(bm25s.tokenize(corpus, stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False)

    def by_bm25(q: str) -> list[int]:
        return [d for _, d in index.rank(q, 10)]

    def by_dense(q: str) -> list[int]:
        scores = hybrid.dense_scores(index, vectors, qvecs[q], "")
        return sorted(scores, key=lambda d: -scores[d])[:10]

    def by_fusion(q: str) -> list[int]:
        return [d for _, d in hybrid.rank(index, vectors, qvecs[q], q, 10).ranked]

    def by_rrf(q: str) -> list[int]:
        return [d for _, d in hybrid.rank(index, vectors, qvecs[q], q, 10, fusion="rrf").ranked]

    def by_bm25s(q: str) -> list[int]:
        tokens = bm25s.tokenize([q], stopwords="en", stemmer=stemmer, show_progress=False)
        if not tokens.vocab:
            return []
        docs, _ = b25.retrieve(tokens, k=10, show_progress=False)
        return [int(i) for i in docs[0]]

    rankers: dict[str, Callable[[str], list[int]]] = {
        "bm25": by_bm25,
        "dense": by_dense,
        "fusion": by_fusion,
        "fusion-rrf": by_rrf,
        "bm25s": by_bm25s,
    }
    judged = [q for q in queries if q["kind"] in KINDS]
    quality: dict[str, dict[str, dict[str, float]]] = {}
    for name, rank in rankers.items():
        per: dict[str, list[tuple[float, float]]] = {}
        for q in judged:
            got = [keys[d] for d in rank(q["q"])]
            per.setdefault(q["kind"], []).append((mrr10(got, q["rel"]), ndcg10(got, q["rel"])))
            per.setdefault("all", []).append(per[q["kind"]][-1])
        quality[name] = {
            k: {"mrr10": statistics.fmean(m for m, _ in v), "ndcg10": statistics.fmean(n for _, n in v), "n": len(v)}
            for k, v in per.items()
        }

    weak: dict[str, list[float]] = {"on-topic": [], "off-topic": []}
    weak_count = {"on-topic": 0, "off-topic": 0}
    for q in queries:
        r = hybrid.rank(index, vectors, qvecs[q["q"]], q["q"], 10)
        side = "off-topic" if q["kind"] == "offtopic" else "on-topic"
        weak[side].append(r.best_cosine if r.best_cosine is not None else -1.0)
        weak_count[side] += r.weak

    lat: dict[str, list[float]] = {"bm25": [], "fusion (query embedded)": [], "bm25s": []}
    for _ in range(reps):
        for q in judged:
            text = q["q"]
            t0 = time.perf_counter()
            index.rank(text, 10)
            t1 = time.perf_counter()
            qv = model.encode([text])[0]
            hybrid.rank(index, vectors, qv, text, 10)
            t2 = time.perf_counter()
            by_bm25s(text)
            t3 = time.perf_counter()
            lat["bm25"].append((t1 - t0) * 1e3)
            lat["fusion (query embedded)"].append((t2 - t1) * 1e3)
            lat["bm25s"].append((t3 - t2) * 1e3)
    return {
        "sections": len(index.sections),
        "queries": {k: sum(1 for q in queries if q["kind"] == k) for k in (*KINDS, "offtopic")},
        "embed_sections_s": embed_s,
        "quality": quality,
        "weak": {
            side: {
                "best_cosine_median": statistics.median(v),
                "best_cosine_min": min(v),
                "best_cosine_max": max(v),
                "weak": weak_count[side],
                "n": len(v),
            }
            for side, v in weak.items()
        },
        "latency_ms": {k: {"p50": percentile(v, 50), "p99": percentile(v, 99)} for k, v in lat.items()},
    }


async def rest(queries: list[str], reps: int) -> dict[str, float]:
    """help.search over REST against an embedded Loom (gateway and help plane) in this process."""
    import httpx

    async with embedded_loom("loom-bench-search-", {"identity", "help"}) as loom:
        help_plane = next(p for p in loom.instance.planes if p.name == "help")
        await help_plane.service.hybrid_ready()  # type: ignore[attr-defined]
        async with httpx.AsyncClient(base_url=loom.instance.base_url, headers=loom.headers) as c:
            for q in queries:  # warm: each query's vector cached, as a repeated question's is
                r = await c.post("/v1/help.search", json={"query": q})
                r.raise_for_status()
                assert r.json()["ranking"] == "hybrid", r.json()
            ms: list[float] = []
            for _ in range(reps):
                for q in queries:
                    t = time.perf_counter()
                    await c.post("/v1/help.search", json={"query": q})
                    ms.append((time.perf_counter() - t) * 1e3)
            fresh: list[float] = []
            for i, q in enumerate(queries):  # a query never asked: its embedding is computed
                t = time.perf_counter()
                await c.post("/v1/help.search", json={"query": f"{q} ({i})"})
                fresh.append((time.perf_counter() - t) * 1e3)
    return {
        "p50": percentile(ms, 50),
        "p99": percentile(ms, 99),
        "new_query_p50": percentile(fresh, 50),
        "new_query_p99": percentile(fresh, 99),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--evalset", type=Path, default=EVALSET)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--rest", action="store_true", help="also time help.search over REST against an embedded Loom")
    add_model_arguments(ap)
    a = ap.parse_args()
    announce_model(a)
    started_load = load()
    r = run(a.evalset, a.reps)
    if a.rest:
        queries = [q["q"] for q in json.loads(a.evalset.read_text())["queries"]]
        r["rest_ms"] = asyncio.run(rest(queries, a.reps))
    r["load_before"], r["load_after"] = started_load, load()
    if a.json:
        print(json.dumps(r, indent=2))
        return 0
    print(f"machine: {machine()}; {r['load_before']} at start, {r['load_after']} at end")
    print(f"{r['sections']} sections; queries {r['queries']}; section embeddings computed in {r['embed_sections_s']:.1f} s")
    print(f"\n{'':11}" + "".join(f"{k:>21}" for k in (*KINDS, "all")))
    print(f"{'':11}" + "".join(f"{'MRR@10  nDCG@10':>21}" for _ in (*KINDS, "all")))
    for name in RANKERS:
        q = r["quality"][name]
        print(f"{name:11}" + "".join(f"{q[k]['mrr10']:>13.3f}{q[k]['ndcg10']:>8.3f}" for k in (*KINDS, "all")))
    base = r["quality"]["bm25"]
    f = r["quality"]["fusion"]
    print(
        "\nfusion / bm25 MRR@10: " + ", ".join(f"{k} {f[k]['mrr10'] / base[k]['mrr10']:.2f}x" for k in (*KINDS, "all") if base[k]["mrr10"])
    )
    for side, w in r["weak"].items():
        print(
            f"best hit cosine, {side:9}: median {w['best_cosine_median']:.3f} (min {w['best_cosine_min']:.3f}, max {w['best_cosine_max']:.3f}); "
            f"weak {w['weak']}/{w['n']}"
        )
    lat = r["latency_ms"]
    b = lat["bm25"]["p50"]
    for k, v in lat.items():
        print(f"in process, {k:24} p50 {v['p50']:7.3f} ms  p99 {v['p99']:7.3f} ms  {v['p50'] / b:6.1f}x bm25")
    if "rest_ms" in r:
        x = r["rest_ms"]
        print(
            f"help.search over REST, warm: p50 {x['p50']:.2f} ms, p99 {x['p99']:.2f} ms; "
            f"a query never asked before: p50 {x['new_query_p50']:.2f} ms, p99 {x['new_query_p99']:.2f} ms"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

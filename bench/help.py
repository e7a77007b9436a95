"""Help search: Loom's index beside bm25s on the same sections, in one run.

    .venv/bin/python bench/help.py [--nats DIR] [--reps 20] [--json]

For each corpus (the NATS documentation, 204 pages, and Loom's own docs/), the pages are split
into sections by Loom's splitter once; then both rankers index the same sections:

- loom: `loom_help.domain.index.HelpIndex` (BM25 over folded words and whole identifiers,
  headings counted more, operator pages at 0.75, identifier prefix/typo expansion). Its build
  time includes the splitting; its search time includes the snippets of the hits.
- bm25s: `bm25s.BM25` over each section's text (heading line included), tokenized with English
  stopwords and the Snowball English stemmer (PyStemmer), the library's default BM25 variant.
  Its search time includes tokenizing the query.

Reported per ranker: build time (median of 3), memory held by the built index (tracemalloc,
a separate build), search latency p50/p99 over every query x reps, and MRR@10 and Recall@5 on
the judged query set (bench/help_queries.json: each query lists the sections that answer it).
A third row builds Loom's index over the NATS pages twice (under two prefixes) for the
"2,000 sections in under a second" goal.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _machine import machine, percentile  # bench/ is on sys.path when a script runs

ROOT = Path(__file__).resolve().parents[1]

QUERIES = ROOT / "bench" / "help_queries.json"


def default_nats() -> Path:
    """LOOM_HELP_DOCS_DIR when set (the issue's way to point help at a corpus), else the first
    `shared/bench-data/nats-docs` beside the checkout or one level up."""
    env = os.environ.get("LOOM_HELP_DOCS_DIR")
    if env:
        return Path(env)
    for base in ROOT.parents:
        candidate = base / "shared" / "bench-data" / "nats-docs"
        if candidate.is_dir():
            return candidate
    return ROOT.parent / "shared" / "bench-data" / "nats-docs"


def held_bytes(build: Callable[[], Any]) -> int:
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    built = build()
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del built
    return after - before


def timed_build(build: Callable[[], Any], rounds: int = 3) -> tuple[Any, float, float]:
    """The built index, and the median wall and CPU seconds of `rounds` builds (CPU time is
    what a build costs; wall time also counts the neighbours on a shared machine)."""
    walls, cpus, built = [], [], None
    for _ in range(rounds):
        gc.collect()
        t, c = time.perf_counter(), time.process_time()
        built = build()
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    return built, statistics.median(walls), statistics.median(cpus)


def quality(ranked: list[list[str]], queries: list[dict[str, Any]]) -> tuple[float, float]:
    mrr, recall = 0.0, 0.0
    for got, q in zip(ranked, queries, strict=True):
        rel = set(q["rel"])
        rr = next((1.0 / (i + 1) for i, key in enumerate(got[:10]) if key in rel), 0.0)
        mrr += rr
        recall += len(rel.intersection(got[:5])) / len(rel)
    return mrr / len(queries), recall / len(queries)


def bench_corpus(name: str, root: Path, queries: list[dict[str, Any]], reps: int) -> dict[str, Any]:
    import bm25s
    import Stemmer
    from loom_help.domain.index import HelpIndex
    from loom_help.domain.sections import split_page
    from loom_help.store.pages import read_pages

    texts = read_pages(root).pages
    pages = [split_page(path, text) for path, text in texts]
    sections = [s for p in pages for s in p.sections]
    keys = [f"{s.page}#{s.anchor}" for s in sections]
    by_page = {p.path: p for p in pages}
    corpus = [by_page[s.page].section_text(s) for s in sections]
    known = set(keys)
    for q in queries:
        missing = [r for r in q["rel"] if r not in known]
        if missing:
            print(f"  warning: {name}: {q['q']!r} judges sections this corpus lacks: {missing}", file=sys.stderr)

    def build_loom() -> HelpIndex:
        return HelpIndex([split_page(path, text) for path, text in texts])

    stemmer = Stemmer.Stemmer("english")

    def build_bm25s() -> Any:
        retriever = bm25s.BM25()
        retriever.index(bm25s.tokenize(corpus, stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False)
        return retriever

    loom, loom_build, loom_cpu = timed_build(build_loom)
    b25, b25_build, b25_cpu = timed_build(build_bm25s)
    loom_mem = held_bytes(build_loom)
    b25_mem = held_bytes(build_bm25s)

    def search_loom(q: str) -> list[str]:
        return [f"{h.section.page}#{h.section.anchor}" for h in loom.search(q, 10)]

    def search_bm25s(q: str) -> list[str]:
        tokens = bm25s.tokenize([q], stopwords="en", stemmer=stemmer, show_progress=False)
        if not tokens.vocab:
            return []
        k = min(10, len(corpus))
        docs, _scores = b25.retrieve(tokens, k=k, show_progress=False)
        return [keys[int(i)] for i in docs[0]]

    def rank_loom(q: str) -> list[int]:
        return [doc for _score, doc in loom.rank(q, 10)]

    out: dict[str, Any] = {"corpus": name, "pages": len(pages), "sections": len(sections), "queries": len(queries)}
    runs = (("loom", search_loom, loom_build, loom_cpu, loom_mem), ("bm25s", search_bm25s, b25_build, b25_cpu, b25_mem))
    for label, search, build_s, build_cpu, mem in runs:
        ranked = [search(q["q"]) for q in queries]
        lat: list[float] = []
        for _ in range(reps):
            for q in queries:
                t = time.perf_counter()
                search(q["q"])
                lat.append(time.perf_counter() - t)
        mrr, recall = quality(ranked, queries)
        rank_lat: list[float] = []
        if label == "loom":  # the ranking alone, without the snippets search adds to each hit
            for _ in range(reps):
                for q in queries:
                    t = time.perf_counter()
                    rank_loom(q["q"])
                    rank_lat.append(time.perf_counter() - t)
        out[label] = {
            "build_ms": build_s * 1e3,
            "build_cpu_ms": build_cpu * 1e3,
            "memory_mb": mem / 1e6,
            "search_p50_ms": percentile(lat, 50) * 1e3,
            "search_p99_ms": percentile(lat, 99) * 1e3,
            "rank_p50_ms": percentile(rank_lat, 50) * 1e3 if rank_lat else None,
            "mrr10": mrr,
            "recall5": recall,
        }
    return out


def double_build(root: Path) -> dict[str, Any]:
    from loom_help.domain.index import HelpIndex
    from loom_help.domain.sections import split_page
    from loom_help.store.pages import read_pages

    texts = read_pages(root).pages
    doubled = [(f"{prefix}/{path}", text) for prefix in ("a", "b") for path, text in texts]
    index, seconds, cpu = timed_build(lambda: HelpIndex([split_page(p, t) for p, t in doubled]))
    return {"sections": len(index.sections), "build_ms": seconds * 1e3, "build_cpu_ms": cpu * 1e3}


def main() -> int:
    parser = argparse.ArgumentParser(description="help search: Loom's index vs bm25s")
    parser.add_argument(
        "--nats", type=Path, default=None, help="the NATS docs folder (default: LOOM_HELP_DOCS_DIR, else shared/bench-data/nats-docs)"
    )
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    from loom_help.store.pages import shipped_docs_dir

    nats = args.nats or default_nats()
    if not nats.is_dir():
        parser.error(f"no NATS docs at {nats}")
    judged = json.loads(QUERIES.read_text())
    results = [
        bench_corpus("nats-docs", nats, judged["nats"], args.reps),
        bench_corpus("loom docs", shipped_docs_dir(), judged["loom"], args.reps),
    ]
    scale = double_build(nats)
    if args.json:
        print(json.dumps({"machine": machine(), "corpora": results, "scale": scale}, indent=2))
        return 0
    print(f"machine: {machine()}")
    for r in results:
        print(f"\n{r['corpus']}: {r['pages']} pages, {r['sections']} sections, {r['queries']} judged queries")
        print(f"  {'':6} {'build ms':>9} {'(cpu)':>6} {'MB':>6} {'p50 ms':>7} {'p99 ms':>7} {'MRR@10':>7} {'R@5':>6}")
        for label in ("loom", "bm25s"):
            m = r[label]
            print(
                f"  {label:6} {m['build_ms']:9.0f} {m['build_cpu_ms']:6.0f} {m['memory_mb']:6.1f} {m['search_p50_ms']:7.3f} {m['search_p99_ms']:7.3f}"
                f" {m['mrr10']:7.3f} {m['recall5']:6.3f}"
            )
        lo, b = r["loom"], r["bm25s"]
        print(f"  loom ranking alone (no snippets): p50 {lo['rank_p50_ms']:.3f} ms")
        print(
            f"  loom/bm25s: MRR@10 {lo['mrr10'] / b['mrr10']:.2f}x, Recall@5 {lo['recall5'] / b['recall5']:.2f}x,"
            f" search p50 {lo['search_p50_ms'] / b['search_p50_ms']:.2f}x, build {lo['build_ms'] / b['build_ms']:.2f}x"
        )
    print(
        f"\nloom index over the NATS pages twice: {scale['sections']} sections built in {scale['build_ms']:.0f} ms"
        f" ({scale['build_cpu_ms']:.0f} ms cpu)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

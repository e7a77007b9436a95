"""decision.precedents latency with 10^5 decisions in one namespace, beside an exact NumPy cosine
top-25 over the same vectors in the same run, and the recall of our results against it.

    .venv/bin/python bench/decisions.py [-n 100000] [--queries 200] [--modes ...] [--sweep] [--json]

The corpus (`--corpus`): `composed` (the default) is decision statements as `decision.record`
words them, with MiniLM vectors composed from the local model's embeddings of their sentence
pieces (bench/decision_corpus.py: the model cannot embed 10^5 statements in a bench's time on
this machine; how close the composition comes to the model's own vectors is printed), and the
queries are questions a person would ask, embedded by the model itself. `synthetic` is the
earlier sessions' data: unit vectors drawn around 2,000 random centres, queries perturbed from
stored ones (near-random 384-d vectors: the worst case for a graph search, unlike real text).
They are written straight into the plane's tables (memory_rows, which fills memory_vectors
through its view, and decision_records) through Parquet. Modes:

- exact: cosineDistance over the namespace's rows in ClickHouse, the path a namespace takes
  while its cache warms (memory_vectors has no vector index since session 23; bench/ch_vector_index.py
  measures ClickHouse's);
- cache-exact / cache-hnsw: the process-local cache of the namespace (service/vector_index.py),
  built from the store here (its build time and the process's RSS growth are printed), searched
  by a cosine scan of its in-memory matrix or by its usearch HNSW graph; precedents serves the
  hits' rows and records from the cache too (no store read). "its search alone" is the
  cache's own search. These run `DecisionOps.precedents` in process, handed the query vector;
- rest: the whole path over REST: an embedded Loom (identity and decisions planes, nats-server,
  chDB, the local model, the cache's default search), `POST /v1/decision.precedents` with the
  question's text, so the query's embedding by the local model, the gateway, the op, the
  exposure ledger and JSON are all in the time. Timed twice: by an httpx client in the bench's
  own event loop (the server's, as before), and by a client in a process of its own.

Baseline: NumPy `M @ q` + argpartition over the same float32 matrix, in this process.

`--sweep` times usearch graphs over the
corpus straight from NumPy (no store) across connectivity and search widths: build time,
search p50/p99 and recall@25. `--ann-only N` does the same at the cache's setting for N vectors (the
10^6 figure); `--dtypes`, `--ef-add` and `--widths` vary the graph, `--keep DIR` saves it and
loads it on the next run. The model's load, its first and tenth single-text encodes, and the throughput of
concurrent single-statement embeddings batched by the Embedder are printed too (`--no-model`
skips them).
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
from loom_core.process import exit_process

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _machine import add_model_arguments, announce_model, machine, percentile  # noqa: E402 - bench/ is on sys.path when a script runs, the root after the insert above

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


def corpus(kind: str, n: int, queries: int, seed: int) -> tuple[np.ndarray, np.ndarray, list[str], list[str]]:
    """(decision vectors, query vectors, statements, question texts)."""
    if kind == "synthetic":
        docs, qs = synthetic(n, queries, seed)
        return docs, qs, [f"scenario {i}. Decided option {i % 7} because reason {i}." for i in range(n)], []
    import decision_corpus

    asked = decision_corpus.questions(queries, seed)
    return (
        decision_corpus.composed(n, seed),
        decision_corpus.embed(asked, f"questions-{queries}-{seed}"),
        decision_corpus.statements(n, seed),
        asked,
    )


def rss_mb() -> float:
    """This process's resident set size in MiB (VmRSS)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def exact_top(docs: np.ndarray, qs: np.ndarray) -> tuple[list[np.ndarray], list[float]]:
    """The exact cosine top 25 of each query (the baseline), and its time per query in ms."""
    exact: list[np.ndarray] = []
    ms: list[float] = []
    for q in qs:
        t = time.perf_counter()
        sims = docs @ q
        top = np.argpartition(-sims, K)[:K]
        top = top[np.argsort(-sims[top])]
        ms.append((time.perf_counter() - t) * 1000)
        exact.append(top)
    return exact, ms


async def load(store: Any, docs: np.ndarray, texts: list[str], tmp: Path, org: str = ORG, ns: str = NS) -> float:
    import pyarrow as pa
    import pyarrow.parquet as pq
    from loom_core.store import ch_time

    n = len(docs)
    now = ch_time()
    keys = [f"decision/bench/scenario-{i}" for i in range(n)]
    tags = [["decision:category:bench"]] * n
    t0 = time.perf_counter()
    embedding = pa.FixedSizeListArray.from_arrays(pa.array(docs.reshape(-1), pa.float32()), DIMS).cast(pa.list_(pa.float32()))
    # memory_vectors is filled from memory_rows' insert (the view memory_vectors_of_rows).
    rows = pa.table(
        {
            "org": [org] * n,
            "namespace": [ns] * n,
            "key": keys,
            "agent": ["bench"] * n,
            "user": [""] * n,
            "session": [""] * n,
            "memory_id": [f"m{i}" for i in range(n)],
            "version": pa.array([1] * n, pa.uint64()),
            "value": texts,
            "value_hash": [""] * n,
            "memory_type": ["decision"] * n,
            "tags": tags,
            "status": ["active"] * n,
            "embedding": embedding,
        }
    )
    recs = pa.table(
        {
            "org": [org] * n,
            "namespace": [ns] * n,
            "key": keys,
            "version": pa.array([1] * n, pa.uint64()),
            "record_version": pa.array([1] * n, pa.uint64()),
            "status": ["active"] * n,
            "category": ["bench"] * n,
            "scenario": [t.split(". Decided ", 1)[0] for t in texts],
            "outcome": [t.split(". Decided ", 1)[-1].split(" because ", 1)[0] for t in texts],
            "reasoning": [t.split(" because ", 1)[-1] for t in texts],
            "agent": ["bench"] * n,
        }
    )
    for name, table in (("memory_rows", rows), ("decision_records", recs)):
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

    async def embed(self, texts: Any, *, workers: int = 1) -> np.ndarray:
        return self.next.reshape(1, DIMS)

    async def close(self) -> None:
        return None


ALL_MODES = ("exact", "cache-exact", "cache-hnsw", "rest")


async def run(kind: str, n: int, queries: int, seed: int, only: Sequence[str] = ALL_MODES, model: bool = True) -> dict[str, Any]:
    from loom_core.embedding import LocalModel
    from loom_core.store import run_migrations
    from loom_core.store.embedded import EmbeddedStore
    from loom_decisions.service.decisions import DecisionOps
    from loom_decisions.service.embedding import Embedder
    from loom_decisions.service.rows import Deps, Rows
    from loom_decisions.settings import DecisionsSettings
    from loom_decisions.store.schema import migrations

    docs, qs, texts, asked = corpus(kind, n, queries, seed)
    exact, np_ms = exact_top(docs, qs)
    out: dict[str, Any] = {
        "n": n,
        "queries": queries,
        "corpus": kind,
        "numpy": {"p50_ms": percentile(np_ms, 50), "p99_ms": percentile(np_ms, 99)},
    }
    if kind == "composed":
        import decision_corpus

        out["fidelity"] = decision_corpus.fidelity(min(n, 2000), seed)
    in_process = [m for m in ("exact", "cache-exact", "cache-hnsw") if m in only]
    if in_process:
        tmp = Path(tempfile.mkdtemp(prefix="loom-bench-decisions-"))
        store = EmbeddedStore.open(tmp / "chdb", "loom_bench")
        await run_migrations(store, migrations())
        out["load_seconds"] = round(await load(store, docs, texts, tmp), 1)
        ctx = SimpleNamespace(org=ORG, namespace=NS)
        for mode in in_process:
            cache_rows = 0 if mode == "exact" else 1
            # The floor off: recall is measured against the exact top 25, however far.
            settings = DecisionsSettings(
                memory_exposure_ledger_enabled=False,
                memory_vector_cache_min_rows=cache_rows,
                memory_vector_cache_search="hnsw" if mode == "cache-hnsw" else "exact",
                decision_precedents_min_similarity=-1.0,
            )
            vector = QueryVector()
            rows = Rows(Deps(settings=settings, store=store, leases=None, exposures=None, embedder=Embedder(vector)))  # type: ignore[arg-type]
            ops = DecisionOps(rows)
            extra: dict[str, Any] = {}
            if cache_rows:
                rss = rss_mb()
                t = time.perf_counter()
                await rows.vectors.wait_ready(ORG, NS)
                extra["build_s"] = time.perf_counter() - t
                extra["rss_growth_mb"] = rss_mb() - rss
            vector.next = qs[0]
            await ops.precedents(ctx, "warm-up", "", False, K)  # type: ignore[arg-type]
            ms: list[float] = []
            recall: list[float] = []
            for q, want in zip(qs, exact, strict=True):
                vector.next = q
                t = time.perf_counter()
                got, _ = await ops.precedents(ctx, "q", "", False, K)  # type: ignore[arg-type]
                ms.append((time.perf_counter() - t) * 1000)
                got_ids = {int(p.memory_key.rsplit("-", 1)[1]) for p in got}
                recall.append(len(got_ids & set(want.tolist())) / K)
            if cache_rows:
                space = rows.vectors._spaces[(ORG, NS)]
                own: list[float] = []
                for q in qs:
                    t = time.perf_counter()
                    space.search(q, K, "decision", [])
                    own.append((time.perf_counter() - t) * 1000)
                extra["index_search_p50_ms"] = percentile(own, 50)
                extra["index_search_p99_ms"] = percentile(own, 99)
                await rows.vectors.stop()
            out[mode] = {"p50_ms": percentile(ms, 50), "p99_ms": percentile(ms, 99), "recall_at_25": statistics.fmean(recall), **extra}
        await store.close()
    if "rest" in only:
        if not asked:
            raise SystemExit("--modes rest needs the composed corpus (its questions are text the model embeds)")
        out["rest"] = await over_rest(docs, texts, asked, exact)
    if model:
        local = LocalModel()
        t = time.perf_counter()
        local.load()
        out["model_load_s"] = time.perf_counter() - t
        emb_ms = []
        for i in range(30):
            t = time.perf_counter()
            local.encode([f"how long do we keep transcripts of case {i}?"])
            emb_ms.append((time.perf_counter() - t) * 1000)
        out["query_embedding"] = {
            "p50_ms": percentile(emb_ms, 50),
            "p99_ms": percentile(emb_ms, 99),
            "first_ms": emb_ms[0],
            "tenth_ms": emb_ms[9],
        }
        out["embed_throughput"] = await embed_throughput(local)
    return out


# A caller in a process of its own: the standard library's HTTP client on one kept-alive
# connection (argv: port, token, limit; stdin: the questions; stdout: each call's milliseconds).
OWN_PROCESS_CLIENT = """
import http.client, json, sys, time
port, token, limit = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
conn = http.client.HTTPConnection("127.0.0.1", port)
headers = {"Authorization": "Bearer " + token, "X-Loom-Agent": "bench", "Content-Type": "application/json"}
ms = []
for q in json.loads(sys.stdin.read()):
    t = time.perf_counter()
    conn.request("POST", "/v1/decision.precedents", body=json.dumps({"query": q, "limit": limit}), headers=headers)
    r = conn.getresponse()
    r.read()
    ms.append((time.perf_counter() - t) * 1000)
    if r.status != 200:
        raise SystemExit(f"HTTP {r.status}")
print(json.dumps({"ms": ms}))
"""


async def over_rest(docs: np.ndarray, texts: list[str], asked: list[str], exact: list[np.ndarray]) -> dict[str, Any]:
    """`POST /v1/decision.precedents` (top 25, the question's text) against an embedded Loom whose
    namespace holds the corpus: p50/p99 over REST, recall@25 against the exact top 25 of the
    question's embedding, the cache's build time and the process's RSS growth for it."""
    import httpx
    from loom_core.bus import NatsServer
    from loom_core.settings import Settings
    from loom_core.store.embedded import EmbeddedStore
    from loom_gateway.identity import bootstrap_org
    from loom_runner.embedded import start_instance

    # The floor off, as in the other modes; everything else as `loom up` has it.
    os.environ["LOOM_DECISION_PRECEDENTS_MIN_SIMILARITY"] = "-1"
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="loom-bench-precedents-") as tmp:
        data = Path(tmp)
        settings = Settings(
            data_dir=data,
            jwt_secret="bench-precedents-" + "x" * 40,
            http_port=0,
            clickhouse_database="loom_bench",
            log_level="WARNING",
            rate_write_per_minute=10**9,
            rate_read_per_minute=10**9,
        )
        async with NatsServer(data / "nats") as nats:
            store = EmbeddedStore.open(data / "chdb", settings.clickhouse_database, settings.chdb_thread_nice)
            inst = await start_instance(
                settings, store=store, nats_url=nats.url, name="bench", only_planes={"identity", "decisions"}, transport="inproc"
            )
            try:
                token, _ = await bootstrap_org(inst.runtime.identity, inst.runtime.codec, "bench", "main", 3600)
                await load(store, docs, texts, data, "bench", "main")
                plane = next(p for p in inst.planes if p.name == "decisions")
                vectors = plane.rows.vectors  # type: ignore[attr-defined]
                out["search"] = vectors.settings.memory_vector_cache_search
                rss = rss_mb()
                t = time.perf_counter()
                await vectors.wait_ready("bench", "main")
                out["build_s"] = time.perf_counter() - t
                out["rss_growth_mb"] = rss_mb() - rss
                out["rss_mb"] = rss_mb()
                headers = {"Authorization": f"Bearer {token}", "X-Loom-Agent": "bench"}
                async with httpx.AsyncClient(base_url=inst.base_url, headers=headers, timeout=300) as c:
                    for q in asked[:5]:
                        (await c.post("/v1/decision.precedents", json={"query": q, "limit": K})).raise_for_status()
                    ms: list[float] = []
                    recall: list[float] = []
                    for q, want in zip(asked, exact, strict=True):
                        t = time.perf_counter()
                        r = await c.post("/v1/decision.precedents", json={"query": q, "limit": K})
                        ms.append((time.perf_counter() - t) * 1000)
                        r.raise_for_status()
                        got = {int(p["memory_key"].rsplit("-", 1)[1]) for p in r.json()["precedents"]}
                        recall.append(len(got & set(want.tolist())) / K)
                out.update(p50_ms=percentile(ms, 50), p99_ms=percentile(ms, 99), recall_at_25=statistics.fmean(recall))
                # The same questions from a client in a process of its own (as a caller is): the
                # in-process httpx client above shares the server's event loop and CPU.
                port = inst.base_url.rsplit(":", 1)[1]
                child = await asyncio.create_subprocess_exec(
                    sys.executable, "-c", OWN_PROCESS_CLIENT, port, token, str(K),
                    stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                )  # fmt: skip
                answer, _ = await child.communicate(json.dumps(asked).encode())
                own = json.loads(answer)["ms"]
                out.update(own_process_p50_ms=percentile(own, 50), own_process_p99_ms=percentile(own, 99))
            finally:
                await inst.stop()
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


def graph_run(
    docs: np.ndarray,
    qs: np.ndarray,
    exact: list[np.ndarray],
    connectivity: int,
    widths: Sequence[int],
    dtype: str = "f32",
    expansion_add: int = 0,
    keep: Path | None = None,
) -> list[dict[str, Any]]:
    """A usearch graph over `docs` (inner product of unit vectors, as the cache builds it, its
    vectors held as `dtype`): its build time and memory, then search p50/p99 and recall@25 at each
    search width. With `keep`, the graph is saved there once built and loaded from there when it
    already is (a 10^6 graph takes long to build on a loaded machine; its queries are quick)."""
    from loom_decisions.service.vector_index import EXPANSION_ADD
    from usearch.index import Index

    ef_add = expansion_add or EXPANSION_ADD
    index = Index(ndim=DIMS, metric="ip", dtype=dtype, connectivity=connectivity, expansion_add=ef_add)
    path = keep / f"graph-{len(docs)}-M{connectivity}-ef{ef_add}-{dtype}.usearch" if keep else None
    t, cpu = time.perf_counter(), time.process_time()
    if path is not None and path.exists():
        index.load(str(path))
        built = "loaded"
    else:
        # One call with the whole matrix: usearch adds it on every core (threads=0).
        index.add(np.arange(len(docs), dtype=np.uint64), np.ascontiguousarray(docs, dtype=np.float32), threads=0)
        built = "built"
        if path is not None:
            index.save(str(path))
    build, build_cpu = time.perf_counter() - t, time.process_time() - cpu
    out = []
    for width in widths:
        index.expansion_search = width  # type: ignore[misc]  # usearch types it read-only; its setter changes the search width
        ms, recall = [], []
        for q, want in zip(qs, exact, strict=True):
            t = time.perf_counter()
            found = index.search(q, K, threads=1)
            ms.append((time.perf_counter() - t) * 1000)
            recall.append(len(set(want.tolist()) & {int(k) for k in found.keys}) / K)
        out.append(
            {
                "n": len(docs),
                "connectivity": connectivity,
                "expansion_add": ef_add,
                "expansion_search": width,
                "dtype": dtype,
                "built": built,
                "build_s": build,
                # CPU seconds on every thread: what the build costs whatever the machine's load.
                "build_cpu_s": build_cpu,
                "load": os.getloadavg()[0],
                "memory_mb": index.memory_usage / 2**20,
                "p50_ms": percentile(ms, 50),
                "p99_ms": percentile(ms, 99),
                "recall_at_25": statistics.fmean(recall),
            }
        )
    return out


def main() -> int:
    from decision_corpus import add_corpus_arguments

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_corpus_arguments(ap)
    ap.add_argument("--corpus", choices=("composed", "synthetic"), default="composed")
    ap.add_argument("--no-model", action="store_true")
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument("--ann-only", type=int, default=0)
    ap.add_argument("--dtypes", default="", help="the graph's vector types for --sweep/--ann-only (f32, f16, i8); default the cache's")
    ap.add_argument("--ef-add", type=int, default=0, help="the graph's candidates while adding (default the cache's)")
    ap.add_argument("--widths", default="", help="search widths for --ann-only (default the cache's)")
    ap.add_argument("--keep", type=Path, default=None, help="save the --ann-only graph here, or load it when saved")
    ap.add_argument("--modes", default=",".join(ALL_MODES), help="comma-separated subset of " + ", ".join(ALL_MODES) + "; none: ''")
    add_model_arguments(ap)
    a = ap.parse_args()
    announce_model(a)
    from loom_decisions.service.vector_index import CONNECTIVITY, EXPANSION_SEARCH, GRAPH_DTYPE

    load_before = os.getloadavg()
    modes = [m for m in a.modes.split(",") if m]
    dtypes = a.dtypes.split(",") if a.dtypes else [GRAPH_DTYPE]
    r = asyncio.run(run(a.corpus, a.n, a.queries, a.seed, only=modes, model=not a.no_model))
    graphs: list[dict[str, Any]] = []
    if a.sweep or a.ann_only:
        for size in [a.n] if a.sweep else []:
            docs, qs, _, _ = corpus(a.corpus, size, a.queries, a.seed)
            exact, _ = exact_top(docs, qs)
            for dtype in dtypes:
                for m in (8, 16, 32):
                    graphs += graph_run(docs, qs, exact, m, (32, 64, 128, 256), dtype, a.ef_add)
        if a.ann_only:
            docs, qs, _, _ = corpus(a.corpus, a.ann_only, a.queries, a.seed)
            exact, np_ms = exact_top(docs, qs)
            r["ann_only_numpy_p50_ms"] = percentile(np_ms, 50)
            widths = [int(w) for w in a.widths.split(",")] if a.widths else [EXPANSION_SEARCH]
            for dtype in dtypes:
                graphs += graph_run(docs, qs, exact, CONNECTIVITY, widths, dtype, a.ef_add, a.keep)
    r["graphs"] = graphs
    r["load"] = {"before": load_before, "after": os.getloadavg()}
    if a.json:
        print(json.dumps(r, indent=2))
        return 0
    base = r["numpy"]["p50_ms"]
    print(f"machine: {machine()}; load average {r['load']['before'][0]:.2f} before, {r['load']['after'][0]:.2f} after")
    print(f"decisions in the namespace: {r['n']:,} ({r['corpus']} 384-d vectors), queries: {r['queries']}")
    if "fidelity" in r:
        print(f"composed vectors against the model's own (first 2,000 statements): mean cosine {r['fidelity']:.3f}")
    print(f"numpy exact top-25      p50 {r['numpy']['p50_ms']:7.2f} ms  p99 {r['numpy']['p99_ms']:7.2f} ms  (baseline)")
    for mode in ALL_MODES:
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
            f"{mode}: built from the store in {c['build_s']:.1f} s (RSS +{c['rss_growth_mb']:.0f} MiB); its search alone p50 "
            f"{c['index_search_p50_ms']:.3f} ms, p99 {c['index_search_p99_ms']:.3f} ms ({c['index_search_p50_ms'] / base:.2f}x numpy p50)"
        )
    if "rest" in r:
        x = r["rest"]
        print(
            f"rest ({x['search']}): the query's embedding included; cache built in {x['build_s']:.1f} s, "
            f"RSS +{x['rss_growth_mb']:.0f} MiB (process {x['rss_mb']:.0f} MiB); from a client in its own process "
            f"p50 {x['own_process_p50_ms']:.2f} ms, p99 {x['own_process_p99_ms']:.2f} ms (the row's client is httpx in the server's loop)"
        )
    if "query_embedding" in r:
        e = r["query_embedding"]
        print(
            f"query embedding (local) p50 {e['p50_ms']:7.2f} ms  p99 {e['p99_ms']:7.2f} ms; "
            f"model load {r['model_load_s']:.2f} s, then first encode {e['first_ms']:.2f} ms, tenth {e['tenth_ms']:.2f} ms"
        )
        t = r["embed_throughput"]
        print(
            f"statement embeddings: {t['serial_per_s']:.0f}/s one call at a time, {t['concurrent_per_s']:.0f}/s from {t['writers']} "
            f"concurrent writers batched by the Embedder ({t['concurrent_per_s'] / t['serial_per_s']:.1f}x)"
        )
    if "ann_only_numpy_p50_ms" in r:
        print(f"numpy exact top-25 over {a.ann_only:,} vectors: p50 {r['ann_only_numpy_p50_ms']:.2f} ms")
    for g in graphs:
        print(
            f"usearch graph n={g['n']:,} {g['dtype']} M={g['connectivity']} ef_add={g['expansion_add']} ef_search={g['expansion_search']:4}: "
            f"{g['built']} {g['build_s']:6.1f} s ({g['build_cpu_s']:.0f} CPU s), {g['memory_mb']:6.0f} MiB, search p50 {g['p50_ms']:.3f} ms p99 {g['p99_ms']:.3f} ms, "
            f"recall@25 {g['recall_at_25']:.3f} (load {g['load']:.0f})"
        )
    return 0


if __name__ == "__main__":
    exit_process(main())

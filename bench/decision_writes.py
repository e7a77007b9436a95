"""decision.record and memory.set write throughput over REST, one writer against many.

    .venv/bin/python bench/decision_writes.py [-n 300] [--writers 16] [--bulk SIZE [--repeats K]] [--threads] [--json]

An embedded Loom (identity and decisions planes, a real nats-server child, chDB, the local
model, the in-process transport as `loom up` runs them) on a temp data dir. Each op is called
`n` times with distinct statements, first by one writer at a time (the baseline), then by
`--writers` concurrent writers (concurrent calls share model runs and store round trips:
loom_core.batching). Prints records/s for each and the ratio, with the load average before and
after; and, first of all, the latency of the first ten decision.record calls after start (the
model loads during start: the first call should cost about what the tenth does).

`--bulk SIZE` also writes `n` decisions through decision.record_many, SIZE records a call, by
`--writers` concurrent callers, after decision.record's figures in the same run (the baseline),
and prints both's records/s and CPU a record; memory.set is left out.

`--repeats K` (with `--bulk`) names each record K times in a row within its call, as an import
that repeats its keys does: the first writes, the rest are answered as restated.

`--cache-min-rows` sets LOOM_MEMORY_VECTOR_CACHE_MIN_ROWS: at 1 the conflict check reads the
vector cache from the first row, as it does in a namespace past the default's 2,000 rows.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import resource
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _machine import add_model_arguments, embedded_loom, machine, use_model  # noqa: E402 - bench/ is on sys.path when a script runs


def args_for(op: str, i: int, run: str) -> dict[str, Any]:
    if op == "decision.record":
        return {
            "category": "platform",
            "scenario": f"retention for raw transcripts in support namespace {run}-{i}",
            "outcome": f"keep transcripts {i % 60} days",
            "reasoning": "replay needs them; legal hold is handled by export, not by retention",
        }
    return {"memory_key": f"note/{run}/{i}", "value": f"the staging cluster {run}-{i} is drained on Fridays after {i % 24}:00 UTC"}


def cpu_seconds() -> float:
    """This process's CPU time so far, every thread (the model's and chDB's included)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def thread_cpu() -> dict[str, float]:
    """CPU seconds so far by kind of thread (Linux /proc): Python's threads by name (MainThread,
    the model's asyncio_N, the store's chdb_N), chDB's own by the name it gives them, a trailing
    number dropped, so a kind's threads add up."""
    names = {t.native_id: t.name for t in threading.enumerate()}
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for tid in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError):
            stat = Path(f"/proc/self/task/{tid}/stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            name = names.get(int(tid)) or stat[stat.index("(") + 1 : stat.rindex(")")]
            kind = re.sub(r"[_-]?\d+$", "", name)
            out[kind] = out.get(kind, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


Call = tuple[str, dict[str, Any]]  # (path, JSON body)


def singles(op: str, n: int, run: str) -> list[Call]:
    """`n` calls of `op`, one record each."""
    return [(f"/v1/{op}", args_for(op, i, run)) for i in range(n)]


def bulks(n: int, size: int, run: str, repeats: int = 1) -> list[Call]:
    """`n` records in decision.record_many calls of `size` records, each decision named `repeats`
    times in a row."""
    return [
        ("/v1/decision.record_many", {"records": [args_for("decision.record", i // repeats, run) for i in range(at, min(at + size, n))]})
        for at in range(0, n, size)
    ]


#: CPU ms a record by kind of thread in the last `rate` (--threads).
LAST_THREADS: dict[str, float] = {}


async def rate(client: Any, calls: list[Call], callers: int) -> tuple[float, float]:
    """(records/s, CPU ms per record) of `calls` made by `callers` concurrent callers, each on a
    connection of its own, as each agent keeps one: on one shared httpx pool of 64 connections the
    client spent more CPU choosing a connection than the server spent on the call (httpcore scans
    every pooled connection at each request), or, past its 20 kept, opened a connection a call."""
    import httpx

    n = sum(len(body.get("records", [body])) for _, body in calls)
    todo = calls[::-1]

    async def caller(own: httpx.AsyncClient) -> None:
        while todo:
            path, body = todo.pop()
            r = await own.post(path, json=body)
            if r.status_code != 200 or any("error" in x for x in r.json().get("results", ())):
                raise SystemExit(f"{path} answered {r.status_code}: {r.text[:500]}")

    async with contextlib.AsyncExitStack() as clients:
        # Opened before the clock starts (each client builds its TLS context at open).
        owns = [
            await clients.enter_async_context(httpx.AsyncClient(base_url=client.base_url, headers=client.headers, timeout=client.timeout))
            for _ in range(callers)
        ]
        t, cpu, threads = time.perf_counter(), cpu_seconds(), thread_cpu()
        await asyncio.gather(*(caller(own) for own in owns))
        took, used = time.perf_counter() - t, cpu_seconds() - cpu
        LAST_THREADS.clear()
        LAST_THREADS.update({k: (v - threads.get(k, 0.0)) * 1000 / n for k, v in thread_cpu().items() if v > threads.get(k, 0.0)})
        return n / took, used * 1000 / n


async def first_calls(client: Any, count: int = 10) -> list[float]:
    """Seconds each of the first `count` decision.record calls took, one at a time."""
    took = []
    for i in range(count):
        t = time.perf_counter()
        r = await client.post("/v1/decision.record", json=args_for("decision.record", i, "first"))
        r.raise_for_status()
        took.append(time.perf_counter() - t)
    return took


async def run(n: int, writers: int, cache_min_rows: int | None, bulk: int | None, repeats: int = 1) -> dict[str, Any]:
    import httpx

    out: dict[str, Any] = {}
    overrides = {} if cache_min_rows is None else {"plane_overrides": {"memory_vector_cache_min_rows": cache_min_rows}}
    async with (
        embedded_loom("loom-bench-writes-", {"identity", "decisions"}, settings_overrides=overrides) as loom,
        httpx.AsyncClient(base_url=loom.instance.base_url, headers=loom.headers, timeout=300) as c,
    ):
        out["first_calls_s"] = await first_calls(c)
        for op in ("decision.record",) if bulk else ("decision.record", "memory.set"):
            await rate(c, singles(op, 5, "warm"), 1)
            serial, serial_cpu = await rate(c, singles(op, max(n // 4, 20), "serial"), 1)
            concurrent, concurrent_cpu = await rate(c, singles(op, n, "concurrent"), writers)
            out[op] = {
                "serial_per_s": serial,
                "concurrent_per_s": concurrent,
                "serial_cpu_ms": serial_cpu,
                "concurrent_cpu_ms": concurrent_cpu,
                "concurrent_cpu_ms_by_thread": dict(LAST_THREADS),
            }
        if bulk:
            await rate(c, bulks(min(bulk, 20), bulk, "bulk-warm", repeats), 1)
            per_s, cpu_ms = await rate(c, bulks(n, bulk, "bulk", repeats), writers)
            out["decision.record_many"] = {"size": bulk, "repeats": repeats, "per_s": per_s, "cpu_ms": cpu_ms}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=300)
    ap.add_argument("--writers", type=int, default=16)
    ap.add_argument("--bulk", type=int, default=None, metavar="SIZE", help="also decision.record_many, SIZE records a call")
    ap.add_argument("--repeats", type=int, default=1, metavar="K", help="with --bulk: each record named K times in a row in its call")
    ap.add_argument("--threads", action="store_true", help="also print the concurrent phase's CPU a record by kind of thread")
    ap.add_argument("--cache-min-rows", type=int, default=None, help="LOOM_MEMORY_VECTOR_CACHE_MIN_ROWS (default: Loom's)")
    add_model_arguments(ap)
    a = ap.parse_args()
    model_id = use_model(a.model)
    before = os.getloadavg()
    r = asyncio.run(run(a.n, a.writers, a.cache_min_rows, a.bulk, a.repeats))
    r["load"] = {"before": before, "after": os.getloadavg()}
    r["model"] = model_id
    if a.json:
        print(json.dumps(r, indent=2))
        return 0
    print(f"machine: {machine()}; load average {before[0]:.2f} before, {r['load']['after'][0]:.2f} after; model {model_id}")
    first = r["first_calls_s"]
    print(
        f"decision.record after start: first {first[0] * 1000:.0f} ms, tenth {first[-1] * 1000:.0f} ms "
        f"({first[0] / first[-1]:.1f}x), median of ten {sorted(first)[len(first) // 2] * 1000:.0f} ms"
    )
    for op in ("decision.record",) if a.bulk else ("decision.record", "memory.set"):
        x = r[op]
        print(
            f"{op:16} one writer {x['serial_per_s']:6.1f}/s   {a.writers} writers {x['concurrent_per_s']:6.1f}/s   "
            f"({x['concurrent_per_s'] / x['serial_per_s']:.1f}x); CPU {x['serial_cpu_ms']:.0f} / {x['concurrent_cpu_ms']:.0f} ms a record"
        )
        if a.threads:
            top = sorted(x["concurrent_cpu_ms_by_thread"].items(), key=lambda kv: -kv[1])[:6]
            print("    concurrent CPU ms a record by thread: " + ", ".join(f"{k} {v:.1f}" for k, v in top))
    if a.bulk:
        b, single = r["decision.record_many"], r["decision.record"]
        print(
            f"decision.record_many {b['size']} a call{f' (each record {a.repeats} times)' if a.repeats > 1 else ''}, {a.writers} callers {b['per_s']:6.1f}/s "
            f"({b['per_s'] / single['concurrent_per_s']:.1f}x decision.record at {a.writers} writers); "
            f"CPU {b['cpu_ms']:.1f} ms a record (decision.record {single['concurrent_cpu_ms']:.1f})"
        )
    print("(CPU: this process's, every thread; nats-server's not counted. Two idle cores do at most 2000 / CPU ms records/s.)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

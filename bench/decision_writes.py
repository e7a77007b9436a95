"""decision.record and memory.set write throughput over REST, one writer against many.

    .venv/bin/python bench/decision_writes.py [-n 300] [--writers 16] [--json]

An embedded Loom (identity and decisions planes, a real nats-server child, chDB, the local
model, the in-process transport as `loom up` runs them) on a temp data dir. Each op is called
`n` times with distinct statements, first by one writer at a time (the baseline), then by
`--writers` concurrent writers (the Embedder batches the statements that arrive while a batch
runs). Prints records/s for each and the ratio, with the load average before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _machine import embedded_loom, machine  # noqa: E402 - bench/ is on sys.path when a script runs


def args_for(op: str, i: int, run: str) -> dict[str, Any]:
    if op == "decision.record":
        return {
            "category": "platform",
            "scenario": f"retention for raw transcripts in support namespace {run}-{i}",
            "outcome": f"keep transcripts {i % 60} days",
            "reasoning": "replay needs them; legal hold is handled by export, not by retention",
        }
    return {"memory_key": f"note/{run}/{i}", "value": f"the staging cluster {run}-{i} is drained on Fridays after {i % 24}:00 UTC"}


async def rate(client: Any, op: str, n: int, writers: int, run: str) -> float:
    todo = list(range(n))

    async def writer() -> None:
        while todo:
            i = todo.pop()
            r = await client.post(f"/v1/{op}", json=args_for(op, i, run))
            r.raise_for_status()

    t = time.perf_counter()
    await asyncio.gather(*(writer() for _ in range(writers)))
    return n / (time.perf_counter() - t)


async def run(n: int, writers: int) -> dict[str, Any]:
    import httpx

    out: dict[str, Any] = {}
    async with (
        embedded_loom("loom-bench-writes-", {"identity", "decisions"}) as loom,
        httpx.AsyncClient(base_url=loom.instance.base_url, headers=loom.headers, timeout=300) as c,
    ):
        for op in ("decision.record", "memory.set"):
            await rate(c, op, 5, 1, "warm")
            serial = await rate(c, op, max(n // 4, 20), 1, "serial")
            concurrent = await rate(c, op, n, writers, "concurrent")
            out[op] = {"serial_per_s": serial, "concurrent_per_s": concurrent}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=300)
    ap.add_argument("--writers", type=int, default=16)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    before = os.getloadavg()
    r = asyncio.run(run(a.n, a.writers))
    r["load"] = {"before": before, "after": os.getloadavg()}
    if a.json:
        print(json.dumps(r, indent=2))
        return 0
    print(f"machine: {machine()}; load average {before[0]:.2f} before, {r['load']['after'][0]:.2f} after")
    for op in ("decision.record", "memory.set"):
        x = r[op]
        print(
            f"{op:16} one writer {x['serial_per_s']:6.1f}/s   {a.writers} writers {x['concurrent_per_s']:6.1f}/s   "
            f"({x['concurrent_per_s'] / x['serial_per_s']:.1f}x)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

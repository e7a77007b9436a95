"""Gateway round trip versus a plain FastAPI handler, measured in the same run.

    .venv/bin/python bench/gateway.py [-n 2000] [-c 16] [--rounds 3] [--warmup 200] [--profile]

Starts an embedded Loom in a temp dir (a nats-server child, chDB, every plane's gRPC server and
the gateway, as `loom up` does), bootstraps a tenant, and drives `POST /v1/auth.whoami` through
REST -> gRPC -> interceptor chain (token, live grant, rate class, gate) -> handler -> ledger
row. In the same process a plain FastAPI app served by uvicorn answers the same route with the
same JSON (no auth, no gRPC, no ledger): the baseline. The load comes from a separate client
process (keep-alive HTTP/1.1 over raw asyncio streams, so the client is cheap and does not share
the servers' event loop). Prints throughput, p50/p99 latency for both and their ratio, and checks
that the ledger holds one row per Loom call.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import itertools
import json
import logging
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import uvloop
from _machine import machine  # bench/ is on sys.path when a script runs

ROOT = Path(__file__).resolve().parents[1]
OP_PATH = "/v1/auth.whoami"


# --- the load client (runs in its own process) ------------------------------------------------------


async def _worker(
    host: str, port: int, request: bytes, remaining: itertools.count[int], n: int, out: list[float], errors: list[int]
) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        while next(remaining) < n:
            started = time.perf_counter()
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            await reader.readexactly(length)
            out.append(time.perf_counter() - started)
            if head[9:12] != b"200":
                errors.append(int(head[9:12]))
    finally:
        writer.close()


async def _client(url: str, token: str, n: int, concurrency: int) -> dict[str, Any]:
    host, port = url.removeprefix("http://").split(":")
    body = b"{}"
    request = (
        f"POST {OP_PATH} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {token}\r\nX-Loom-Agent: bench\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    latencies: list[float] = []
    errors: list[int] = []
    counter = itertools.count()
    started = time.perf_counter()
    await asyncio.gather(*(_worker(host, int(port), request, counter, n, latencies, errors) for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    latencies.sort()
    return {
        "requests": len(latencies),
        "seconds": elapsed,
        "rps": len(latencies) / elapsed,
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000,
        "errors": len(errors),
        "error_statuses": sorted(set(errors))[:5],
    }


async def _grpc_client(address: str, token: str, n: int, concurrency: int) -> dict[str, Any]:
    """The same op called straight on the plane's gRPC port with the generated stub (no REST)."""
    import grpc
    from loom_api.identity.v1 import identity_pb2, identity_pb2_grpc

    latencies: list[float] = []
    counter = itertools.count()
    metadata = [("authorization", f"Bearer {token}"), ("x-loom-agent", "bench")]
    async with grpc.aio.insecure_channel(address) as channel:
        stub = identity_pb2_grpc.IdentityServiceStub(channel)

        async def worker() -> None:
            while next(counter) < n:
                started = time.perf_counter()
                await stub.WhoAmI(identity_pb2.WhoAmIRequest(), metadata=metadata)
                latencies.append(time.perf_counter() - started)

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
    latencies.sort()
    return {
        "requests": len(latencies),
        "seconds": elapsed,
        "rps": len(latencies) / elapsed,
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000,
        "errors": 0,
    }


async def run_client(url: str, token: str, n: int, concurrency: int, mode: str = "--client") -> dict[str, Any]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        mode,
        url,
        "--token",
        token,
        "-n",
        str(n),
        "-c",
        str(concurrency),
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError("the load client failed")
    return dict(json.loads(out))


# --- the servers ----------------------------------------------------------------------------------


def plain_app(payload: dict[str, Any]) -> Any:
    from fastapi import FastAPI
    from fastapi.responses import JSONResponse

    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)

    @app.post(OP_PATH)
    async def whoami() -> JSONResponse:
        return JSONResponse(payload)

    return app


async def ledger_count(store: Any, org: str, want: int, within: float) -> int:
    deadline = time.monotonic() + within
    while True:
        rows = await store.query("SELECT count() AS n FROM {db}.agent_events WHERE org = {org:String}", {"org": org})
        n = int(rows[0]["n"])
        if n >= want or time.monotonic() > deadline:
            return n
        await asyncio.sleep(0.1)


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    sys.path[:0] = [str(ROOT)]
    from loom_core.bus import NatsServer
    from loom_core.settings import Settings
    from loom_core.store.embedded import EmbeddedStore
    from loom_gateway.identity import bootstrap_org
    from loom_runner.embedded import start_instance
    from loom_runner.http import HttpServer

    with tempfile.TemporaryDirectory(prefix="loom-bench-") as tmp:
        data = Path(tmp)
        settings = Settings(
            data_dir=data,
            jwt_secret="bench-secret-0123456789abcdef0123456789abcdef",
            http_port=0,
            clickhouse_database="loom_bench",
            log_level="WARNING",
            # The bench drives one subject far past a production per-subject budget.
            rate_read_per_minute=10**9,
        )
        async with NatsServer(data / "nats") as nats:
            store = EmbeddedStore.open(data / "chdb", settings.clickhouse_database)
            # The op under test is the identity plane's; other planes would only idle beside it.
            inst = await start_instance(settings, store=store, nats_url=nats.url, name="bench", only_planes={"identity"})
            token, _ = await bootstrap_org(inst.runtime.identity, inst.runtime.codec, "bench", "main", 3600)
            import httpx

            async with httpx.AsyncClient(
                base_url=inst.base_url, headers={"Authorization": f"Bearer {token}", "X-Loom-Agent": "bench"}
            ) as c:
                payload = (await c.post(OP_PATH, json={})).json()
            base = HttpServer(plain_app(payload), port=0)
            await base.start()
            base_url = f"http://127.0.0.1:{base.port}"
            try:
                for url in (inst.base_url, base_url):
                    await run_client(url, token, args.warmup, args.concurrency)
                profiler = cProfile.Profile() if args.profile else None
                loom_runs, base_runs = [], []
                # Alternate the two servers so a neighbour's load on the machine hits both alike.
                for _ in range(args.rounds):
                    if profiler:
                        profiler.enable()
                    loom_runs.append(await run_client(inst.base_url, token, args.requests, args.concurrency))
                    if profiler:
                        profiler.disable()
                    base_runs.append(await run_client(base_url, token, args.requests, args.concurrency))
                loom, baseline = _median_run(loom_runs), _median_run(base_runs)
                # Where the gap sits: the gRPC leg alone (a caller on the plane's port, no REST).
                grpc_only = await run_client(inst.grpc_address("identity"), token, args.requests, args.concurrency, "--client-grpc")
                calls = 1 + args.warmup + args.requests * (args.rounds + 1)
                ledgered = await ledger_count(inst.runtime.store, "bench", calls, within=10)
            finally:
                await base.stop()
                await inst.stop()
                await store.close()
    result = {
        "machine": machine(),
        "requests": args.requests,
        "concurrency": args.concurrency,
        "rounds": args.rounds,
        "loom": loom,
        "baseline": baseline,
        "grpc_direct": grpc_only,
        "throughput_ratio": loom["rps"] / baseline["rps"],
        "p50_ratio": loom["p50_ms"] / baseline["p50_ms"],
        "ledger_rows": ledgered,
        "ledger_expected": calls,
    }
    if profiler:
        s = io.StringIO()
        pstats.Stats(profiler, stream=s).sort_stats(args.profile_sort).print_stats(args.profile_lines)
        result["profile"] = s.getvalue()
    return result


def _median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The round with the median throughput, with every round's req/s beside it."""
    ordered = sorted(runs, key=lambda r: r["rps"])
    mid = dict(ordered[len(ordered) // 2])
    mid["rounds_rps"] = [round(r["rps"]) for r in runs]
    mid["errors"] = sum(r["errors"] for r in runs)
    return mid


def report(r: dict[str, Any]) -> str:
    lo, ba, gr = r["loom"], r["baseline"], r["grpc_direct"]
    lines = [
        f"machine: {r['machine']}",
        f"{r['requests']} requests x {r['rounds']} rounds per server, {r['concurrency']} concurrent clients, POST {OP_PATH} (median round shown)",
        f"{'':<34}{'req/s':>10}{'p50 ms':>10}{'p99 ms':>10}{'errors':>8}",
        f"{'loom (REST>gRPC>chain>ledger)':<34}{lo['rps']:>10.0f}{lo['p50_ms']:>10.2f}{lo['p99_ms']:>10.2f}{lo['errors']:>8}",
        f"{'plain FastAPI (same JSON)':<34}{ba['rps']:>10.0f}{ba['p50_ms']:>10.2f}{ba['p99_ms']:>10.2f}{ba['errors']:>8}",
        f"{'  for reference: gRPC stub, no REST':<34}{gr['rps']:>10.0f}{gr['p50_ms']:>10.2f}{gr['p99_ms']:>10.2f}{gr['errors']:>8}",
        f"rounds req/s: loom {lo['rounds_rps']}, baseline {ba['rounds_rps']}",
        f"ratio loom/baseline: throughput {r['throughput_ratio']:.2f}x, p50 latency {r['p50_ratio']:.2f}x",
        f"ledger rows: {r['ledger_rows']} of {r['ledger_expected']} calls",
    ]
    if "profile" in r:
        lines += ["", r["profile"]]
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-n", "--requests", type=int, default=2000, help="measured requests per server (default 2000)")
    p.add_argument("-c", "--concurrency", type=int, default=16, help="concurrent keep-alive clients (default 16)")
    p.add_argument("--warmup", type=int, default=200, help="unmeasured requests per server first (default 200)")
    p.add_argument("--rounds", type=int, default=3, help="measured rounds per server, alternating; the median is reported (default 3)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--profile", action="store_true", help="cProfile the server process during the Loom run")
    p.add_argument("--profile-sort", default="tottime")
    p.add_argument("--profile-lines", type=int, default=35)
    p.add_argument("--client", metavar="URL", help=argparse.SUPPRESS)
    p.add_argument("--client-grpc", metavar="ADDRESS", help=argparse.SUPPRESS)
    p.add_argument("--token", default="", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.client:
        print(json.dumps(asyncio.run(_client(args.client, args.token, args.requests, args.concurrency))))
        return 0
    if args.client_grpc:
        print(json.dumps(asyncio.run(_grpc_client(args.client_grpc, args.token, args.requests, args.concurrency))))
        return 0
    logging.basicConfig(level=logging.WARNING)
    # The servers run on uvloop, as `loom up` runs them; the baseline shares the same loop.
    result = uvloop.run(bench(args))
    print(json.dumps(result, indent=2) if args.json else report(result))
    return 0 if result["loom"]["errors"] == 0 and result["baseline"]["errors"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

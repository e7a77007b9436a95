"""Gateway round trip versus a plain FastAPI handler, measured in the same run.

    .venv/bin/python bench/gateway.py [-n 4000] [-c 16] [--rounds 3] [--warmup 300] [--no-cluster] [--profile]

Embedded (as `loom up` runs): one process holds a nats-server child, chDB, the identity plane and
the gateway; `POST /v1/auth.whoami` goes REST (raw ASGI fast path) -> JSON checked against the
op's schema -> the in-process transport -> the interceptor chain (token, live grant, rate class,
gate) -> handler -> one ledger row (batched straight into chDB) -> JSON. In the same process a
plain FastAPI app served by uvicorn answers the same route with the same JSON (no auth, no
ledger): the baseline. For reference, the same gateway app relaying over loopback gRPC instead
(LOOM_GATEWAY_TRANSPORT=grpc) is measured too.

Cluster (unless --no-cluster): the identity plane in one process (its gRPC server, chDB, the
ledger) and the gateway in another (REST -> gRPC client), as `loom serve` splits them; each
side's CPU time per request is read from /proc.

The load comes from a separate client process: wrk when it is installed (`apt-get install -y
wrk`), else a keep-alive HTTP/1.1 client over raw asyncio streams (`--client python` forces
it). Servers are measured in alternating rounds and the median round of each is reported.
Checks that the ledger holds one row per Loom call.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import itertools
import json
import logging
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import uvloop
from _machine import (
    add_durability_argument,
    add_profile_arguments,
    bench_settings,
    durability,
    embedded_loom,
    load,
    machine,
    profile_text,
)  # bench/ is on sys.path when a script runs
from loom_core.process import exit_process

ROOT = Path(__file__).resolve().parents[1]
OP_PATH = "/v1/auth.whoami"
CLK_TCK = os.sysconf("SC_CLK_TCK")


# --- the load clients (each runs in its own process) --------------------------------------------------


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


async def _client(url: str, token: str, n: int, concurrency: int, path: str = OP_PATH, body: bytes = b"{}") -> dict[str, Any]:
    host, port = url.removeprefix("http://").split(":")
    request = (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
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
    }


WRK_SCRIPT = """
wrk.method = "POST"
wrk.body = "%s"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer %s"
wrk.headers["X-Loom-Agent"] = "bench"
done = function(summary, latency, requests)
  io.write(string.format("JSON {\\"requests\\":%%d,\\"seconds\\":%%f,\\"p50_us\\":%%d,\\"p99_us\\":%%d,\\"status_errors\\":%%d,\\"socket_errors\\":%%d}\\n",
    summary.requests, summary.duration / 1e6, latency:percentile(50), latency:percentile(99), summary.errors.status,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
"""


async def _wrk(url: str, token: str, seconds: float, concurrency: int, path: str = OP_PATH, body: bytes = b"{}") -> dict[str, Any]:
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(WRK_SCRIPT % (body.decode().replace("\\", "\\\\").replace('"', '\\"'), token))
        script = f.name
    try:
        proc = await asyncio.create_subprocess_exec(
            "wrk",
            "-t1",
            f"-c{concurrency}",
            f"-d{max(1, round(seconds))}s",
            "-s",
            script,
            url + path,
            stdout=asyncio.subprocess.PIPE,
        )
        out, _ = await proc.communicate()
    finally:
        os.unlink(script)
    found = re.search(rb"^JSON (.*)$", out, re.M)
    if proc.returncode != 0 or not found:
        raise RuntimeError("wrk failed: " + out.decode(errors="replace")[-500:])
    r = json.loads(found.group(1))
    return {
        "requests": r["requests"],
        "seconds": r["seconds"],
        "rps": r["requests"] / r["seconds"],
        "p50_ms": r["p50_us"] / 1000,
        "p99_ms": r["p99_us"] / 1000,
        "errors": r["status_errors"] + r["socket_errors"],
    }


async def run_client(args: argparse.Namespace, url: str, token: str, n: int, path: str = OP_PATH, body: bytes = b"{}") -> dict[str, Any]:
    """One round of load from a separate process: wrk for `args.seconds`, or the python client
    for `n` requests; `args.client` and `args.concurrency` say which and how many connections."""
    if args.client == "wrk":
        return await _wrk(url, token, args.seconds, args.concurrency, path, body)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "--client-url",
        url,
        "--token",
        token,
        "-n",
        str(n),
        "-c",
        str(args.concurrency),
        "--client-path",
        path,
        "--client-body",
        body.decode(),
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError("the load client failed")
    return dict(json.loads(out))


# --- CPU accounting -------------------------------------------------------------------------------


def cpu_seconds(pid: int | None = None) -> float:
    """User + system CPU of a process (all its threads), from /proc."""
    if pid is None:
        t = os.times()
        return t.user + t.system
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def thread_cpu() -> dict[str, float]:
    """This process's CPU seconds by thread name, from /proc: a Python thread by its Python name
    (the event loop's is MainThread, the store's pool threads chdb_N, where chDB runs a statement),
    chDB's own threads by the names ClickHouse gives them."""
    import threading

    python_names = {t.native_id: re.sub(r"_\d+$", "", t.name) for t in threading.enumerate()}
    out: dict[str, float] = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue  # the thread ended meanwhile
        name, rest = stat[stat.index("(") + 1 :].rsplit(")", 1)
        fields = rest.split()
        name = python_names.get(int(task.name), name)
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / CLK_TCK
    return out


async def measured(args: argparse.Namespace, url: str, token: str, pids: Mapping[str, int | None]) -> dict[str, Any]:
    before = {side: cpu_seconds(pid) for side, pid in pids.items()}
    r = await run_client(args, url, token, args.requests)
    for side, pid in pids.items():
        r[f"cpu_us_per_req_{side}"] = (cpu_seconds(pid) - before[side]) / max(1, r["requests"]) * 1e6
    return r


# --- the servers ----------------------------------------------------------------------------------


def plain_app(payload: dict[str, Any], path: str = OP_PATH) -> Any:
    from fastapi import FastAPI
    from fastapi.responses import JSONResponse

    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)

    @app.post(path)
    async def whoami() -> JSONResponse:
        return JSONResponse(payload)

    return app


def chain_calls(op: str = "auth.whoami") -> int:
    """Calls this process's interceptor chain counted for `op` (its Prometheus counter): the
    number of ledger rows there must be, whatever the load generator thinks it sent."""
    from loom_core.metrics import REQUESTS

    total = 0.0
    for metric in REQUESTS.collect():
        for sample in metric.samples:
            if sample.name.endswith("_total") and sample.labels.get("op") == op:
                total += sample.value
    return int(total)


async def ledger_count(store: Any, org: str, want: int, within: float) -> int:
    deadline = time.monotonic() + within
    while True:
        rows = await store.query("SELECT count() AS n FROM {db}.agent_events WHERE org = {org:String}", {"org": org})
        n = int(rows[0]["n"])
        if n >= want or time.monotonic() > deadline:
            return n
        await asyncio.sleep(0.1)


async def bench_embedded(args: argparse.Namespace) -> dict[str, Any]:
    import httpx
    from loom_gateway.app import create_app
    from loom_gateway.relay import Relay
    from loom_runner.http import HttpServer

    # The op under test is the identity plane's; other planes would only idle beside it.
    async with embedded_loom("loom-bench-", {"identity"}, sync_interval=args.sync_interval) as loom:
        inst, token = loom.instance, str(loom.token)
        async with httpx.AsyncClient(base_url=inst.base_url, headers=loom.headers) as c:
            payload = (await c.post(OP_PATH, json={})).json()
        base = HttpServer(plain_app(payload), port=0)
        await base.start()
        base_url = f"http://127.0.0.1:{base.port}"
        # The same gateway app over the other transport: loopback gRPC to the same plane.
        grpc_relay = Relay(inst.runtime.catalog, inst.addresses)
        via_grpc = HttpServer(create_app(grpc_relay, {}), port=0)
        await via_grpc.start()
        grpc_url = f"http://127.0.0.1:{via_grpc.port}"
        me = {"process": None}
        try:
            for url in (inst.base_url, base_url, grpc_url):
                await run_client(args, url, token, args.warmup)
            if args.without_ledger_rows:
                # How much of the gap to the baseline the ledger is: the chain builds each row, then drops it.
                inst.runtime.ledger.record = _drop_row  # type: ignore[method-assign]
            profiler = cProfile.Profile() if args.profile else None
            writes = count_ledger_writes(inst.runtime.ledger)
            gc_time = GcTime()
            loom_runs, base_runs, grpc_runs = [], [], []
            loom_threads: dict[str, float] = {}
            # Alternate the servers so a neighbour's load on the machine hits each alike.
            for _ in range(args.rounds):
                if profiler:
                    profiler.enable()
                threads_before = thread_cpu()
                gc_time.on = True
                loom_runs.append(await measured(args, inst.base_url, token, me))
                gc_time.on = False
                for name, seconds in thread_cpu().items():
                    loom_threads[name] = loom_threads.get(name, 0.0) + seconds - threads_before.get(name, 0.0)
                if profiler:
                    profiler.disable()
                base_runs.append(await measured(args, base_url, token, me))
                grpc_runs.append(await measured(args, grpc_url, token, me))
            gc_time.close()
            calls = chain_calls()
            ledger_writes = dict(writes)
            ledgered = None if args.without_ledger_rows else await ledger_count(inst.runtime.store, "bench", calls, within=15)
            ledger_per_call = None if args.without_ledger_rows else await ledger_cost(inst.runtime.ledger, inst.runtime.store)
        finally:
            await via_grpc.stop()
            await grpc_relay.close()
            await base.stop()
    out: dict[str, Any] = {
        "loom": median_run(loom_runs),
        "baseline": median_run(base_runs),
        "loom_grpc_transport": median_run(grpc_runs),
        "ledger_rows": ledgered,
        "ledger_expected": calls,
        "ledger_cost": ledger_per_call,
        "ledger_writes": ledger_writes,
        "loom_gc": {
            "us_per_request": round(sum(gc_time.seconds) / max(1, sum(run["requests"] for run in loom_runs)) * 1e6, 2),
            "collections": gc_time.collections,
        },
        "loom_thread_cpu_us": {
            k: round(v / max(1, sum(run["requests"] for run in loom_runs)) * 1e6, 1)
            for k, v in sorted(loom_threads.items(), key=lambda kv: -kv[1])
            if v > 0
        },
    }
    if profiler:
        out["profile"] = profile_text(profiler, args.profile_sort, args.profile_lines)
    return out


def _drop_row(row: Mapping[str, Any]) -> None:
    """`Ledger.record` under --without-ledger-rows."""


class GcTime:
    """The garbage collector's time on the event loop's thread while `on`, by generation: a
    container that outlives a young collection ends up in a full one, whose cost grows with the
    whole heap."""

    def __init__(self) -> None:
        self.on = False
        self.seconds = [0.0, 0.0, 0.0]
        self.collections = [0, 0, 0]
        self._started = 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if not self.on:
            return
        if phase == "start":
            self._started = time.thread_time()
        else:
            self.seconds[info["generation"]] += time.thread_time() - self._started
            self.collections[info["generation"]] += 1

    def close(self) -> None:
        gc.callbacks.remove(self._callback)


def count_ledger_writes(ledger: Any) -> dict[str, int]:
    """Counts the batches the ledger writes from now on, and their rows: how its pacing shared a
    chDB insert's fixed cost among the calls of the bench's rounds."""
    counts = {"batches": 0, "rows": 0}
    ship = ledger._ship

    async def counted(rows: list[dict[str, Any]]) -> None:
        counts["batches"] += 1
        counts["rows"] += len(rows)
        await ship(rows)

    ledger._ship = counted
    return counts


async def ledger_cost(ledger: Any, store: Any, rows: int = 20000) -> dict[str, float]:
    """The ledger's cost per call, with the real store: building and recording the row on the
    call's path, then encoding and inserting it in batches of the size a busy second makes."""
    from loom_api.tasks.v1 import tasks_pb2
    from loom_core.chain.ledger import ledger_args, ledger_row, out_hits_of

    request = tasks_pb2.CreateTaskRequest(inbox="bench", kind="chore", title="a title of some length", priority=2)
    started = time.process_time()
    for i in range(rows):
        ledger.record(
            ledger_row(
                org="bench-ledger",
                namespace="main",
                subject="user:admin",
                agent="bench",
                user="",
                session="",
                op="task.create",
                transport="rest",
                run_id="",
                consumer="",
                ok=True,
                error_code="",
                latency_ms=1.0,
                args=ledger_args(request),
                out_hits=out_hits_of(request),
                token_id="t",
                request_id=f"r{i}",
                write_shaped=True,
            )
        )
    record_us = (time.process_time() - started) / rows * 1e6
    batch, ledger._buf = ledger._buf, []
    started = time.process_time()
    per_insert = 1000  # a second (the default flush interval) of rows at 1,000 calls/s
    for i in range(0, len(batch), per_insert):
        await ledger._ship(batch[i : i + per_insert])  # the ledger's own write: straight in when embedded
    insert_us = (time.process_time() - started) / rows * 1e6
    return {"record_us": record_us, "insert_us": insert_us, "total_us": record_us + insert_us}


async def bench_ledger(rounds: int, sync_interval: str) -> dict[str, Any]:
    """The ledger's cost per call alone (`--ledger-only N`): N rounds of `ledger_cost` on an
    embedded instance's own ledger and store, with the load average beside each."""
    out: list[dict[str, Any]] = []
    async with embedded_loom("loom-bench-", {"identity"}, sync_interval=sync_interval, database="loom_bench_ledger", org=False) as loom:
        runtime = loom.instance.runtime
        await ledger_cost(runtime.ledger, runtime.store, rows=2000)  # warm-up
        for _ in range(rounds):
            cost = await ledger_cost(runtime.ledger, runtime.store)
            out.append({**{k: round(v, 1) for k, v in cost.items()}, "loadavg": os.getloadavg()[0]})
    return {"machine": machine(), "durability": durability(sync_interval), "ledger_per_call": out}


async def _spawn(*argv: str) -> tuple[asyncio.subprocess.Process, dict[str, Any]]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, __file__, *argv, stdout=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.PIPE
    )
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), 120)
    if not line:
        raise RuntimeError(f"{argv[0]} did not start")
    return proc, json.loads(line)


async def _stop(proc: asyncio.subprocess.Process) -> dict[str, Any]:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b"stop\n")
    await proc.stdin.drain()
    line = await asyncio.wait_for(proc.stdout.readline(), 60)
    await proc.wait()
    return json.loads(line) if line else {}


async def bench_cluster(args: argparse.Namespace) -> dict[str, Any]:
    """The identity plane and the gateway in two processes (plus the shared nats-server)."""
    sync_interval = args.sync_interval
    from loom_core.bus import NatsServer

    with tempfile.TemporaryDirectory(prefix="loom-bench-cluster-") as tmp:
        data = Path(tmp)
        async with NatsServer(data / "nats", sync_interval=sync_interval) as nats:
            plane, info = await _spawn("--serve-plane", str(data / "plane"), "--nats", nats.url)
            gateway, ginfo = await _spawn("--serve-gateway", str(data / "gateway"), "--nats", nats.url, "--plane-address", info["address"])
            pids = {"gateway": gateway.pid, "plane": plane.pid}
            try:
                await run_client(args, ginfo["url"], info["token"], args.warmup)
                runs = [await measured(args, ginfo["url"], info["token"], pids) for _ in range(args.rounds)]
            finally:
                await _stop(gateway)
                final = await _stop(plane)
    return {
        "loom_cluster": median_run(runs),
        "cluster_ledger_rows": final.get("ledger_rows"),
        "cluster_ledger_expected": final.get("calls"),
    }


async def serve_plane(data: Path, nats_url: str) -> None:
    """Cluster side 1: the identity plane's gRPC server, its store and ledger; no gateway."""
    from loom_core.store.embedded import EmbeddedStore
    from loom_gateway.identity import bootstrap_org
    from loom_runner.embedded import start_instance

    settings = bench_settings(data, "loom_bench")
    store = EmbeddedStore.open(data / "chdb", settings.clickhouse_database, settings.chdb_thread_nice)
    inst = await start_instance(settings, store=store, nats_url=nats_url, http=False, only_planes={"identity"}, name="bench-plane")
    token, _ = await bootstrap_org(inst.runtime.identity, inst.runtime.codec, "bench", "main", 3600)
    print(json.dumps({"address": inst.grpc_address("identity"), "token": token}), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    calls = chain_calls()
    rows = await ledger_count(store, "bench", calls, within=15)
    await inst.stop()
    print(json.dumps({"ledger_rows": rows, "calls": calls}), flush=True)


async def serve_gateway(data: Path, nats_url: str, plane_address: str) -> None:
    """Cluster side 2: the gateway alone, relaying to the plane over gRPC."""
    from loom_core.store.embedded import EmbeddedStore
    from loom_runner.embedded import start_instance

    settings = bench_settings(data, "loom_bench_gw")
    store = EmbeddedStore.open(data / "chdb", settings.clickhouse_database, settings.chdb_thread_nice)
    inst = await start_instance(
        settings, store=store, nats_url=nats_url, only_planes=set(), remote_planes={"identity": plane_address}, name="bench-gateway"
    )
    print(json.dumps({"url": inst.base_url}), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    await inst.stop()
    print("{}", flush=True)


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The round with the median throughput, with every round's req/s beside it."""
    ordered = sorted(runs, key=lambda r: r["rps"])
    mid = dict(ordered[len(ordered) // 2])
    mid["rounds_rps"] = [round(r["rps"]) for r in runs]
    mid["errors"] = sum(r["errors"] for r in runs)
    return mid


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    sys.path[:0] = [str(ROOT)]
    result: dict[str, Any] = {
        "machine": machine(),
        "durability": durability(args.sync_interval),
        "client": args.client,
        "concurrency": args.concurrency,
        "rounds": args.rounds,
        "load": f"{args.seconds:g} s per round (wrk)" if args.client == "wrk" else f"{args.requests} requests per round",
    }
    result.update(await bench_embedded(args))
    if not args.no_cluster:
        result.update(await bench_cluster(args))
    result["throughput_ratio"] = result["loom"]["rps"] / result["baseline"]["rps"]
    result["p50_ratio"] = result["loom"]["p50_ms"] / result["baseline"]["p50_ms"]
    result["loadavg"] = load()
    return result


def report(r: dict[str, Any]) -> str:
    lines = [
        f"machine: {r['machine']}; {r['loadavg']} at the end",
        r["durability"],
        f"client {r['client']}, {r['load']} x {r['rounds']} rounds per server, {r['concurrency']} connections, POST {OP_PATH} (median round)",
        f"{'':<44}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'errors':>7}   CPU µs/request",
    ]
    rows = [
        ("loom embedded (in-process transport)", "loom"),
        ("plain FastAPI, same JSON (baseline)", "baseline"),
        ("loom embedded, gateway->plane over gRPC", "loom_grpc_transport"),
        ("loom cluster (gateway | plane processes)", "loom_cluster"),
    ]
    for label, key in rows:
        if key not in r:
            continue
        x = r[key]
        cpu = ", ".join(f"{k.removeprefix('cpu_us_per_req_')} {v:.0f}" for k, v in x.items() if k.startswith("cpu_us_per_req_"))
        lines.append(f"{label:<44}{x['rps']:>9.0f}{x['p50_ms']:>9.2f}{x['p99_ms']:>9.2f}{x['errors']:>7}   {cpu}")
    lines.append("rounds req/s: " + "; ".join(f"{key} {r[key]['rounds_rps']}" for _, key in rows if key in r))
    cpu_ratio = r["loom"]["cpu_us_per_req_process"] / r["baseline"]["cpu_us_per_req_process"]
    lines.append(
        f"ratio loom embedded / baseline: throughput {r['throughput_ratio']:.2f}x, p50 latency {r['p50_ratio']:.2f}x,"
        f" CPU per request {cpu_ratio:.2f}x (target: within 1.10x)"
    )
    if r["ledger_rows"] is None:
        lines.append("ledger rows (embedded): none recorded (--without-ledger-rows: each row built, then dropped)")
    else:
        lines.append(f"ledger rows (embedded): {r['ledger_rows']} of {r['ledger_expected']} calls the chain counted")
    lines.append("loom rounds' CPU µs/request by thread: " + ", ".join(f"{k} {v}" for k, v in list(r["loom_thread_cpu_us"].items())[:8]))
    g = r["loom_gc"]
    lines.append(f"loom rounds' garbage collection: {g['us_per_request']} µs/request, collections by generation {g['collections']}")
    lw = r["ledger_writes"]
    lines.append(f"ledger writes during the rounds: {lw['batches']} batches, {lw['rows'] / max(1, lw['batches']):.0f} rows each on average")
    lc = r["ledger_cost"]
    if lc is not None:
        lines.append(
            f"ledger per call: {lc['total_us']:.1f} µs CPU (row built and recorded {lc['record_us']:.1f} µs on the call's path,"
            f" encoded and inserted into chDB in batches of 1000 {lc['insert_us']:.1f} µs)"
        )
    if "cluster_ledger_rows" in r:
        lines.append(f"ledger rows (cluster): {r['cluster_ledger_rows']} of {r['cluster_ledger_expected']} calls")
    if "profile" in r:
        lines += ["", r["profile"]]
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-n", "--requests", type=int, default=4000, help="requests per round with the python client (default 4000)")
    p.add_argument("-d", "--seconds", type=float, default=4.0, help="seconds per round with wrk (default 4)")
    p.add_argument("-c", "--concurrency", type=int, default=16, help="concurrent keep-alive connections (default 16)")
    p.add_argument("--warmup", type=int, default=300, help="unmeasured requests per server first (default 300)")
    p.add_argument("--rounds", type=int, default=3, help="measured rounds per server, alternating; the median is reported (default 3)")
    p.add_argument("--client", choices=["auto", "wrk", "python"], default="auto", help="load generator (auto: wrk when installed)")
    p.add_argument("--no-cluster", action="store_true", help="skip the two-process cluster measurement")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_durability_argument(p)
    p.add_argument("--ledger-only", type=int, default=0, metavar="ROUNDS", help="measure only the ledger's cost per call, ROUNDS times")
    p.add_argument(
        "--without-ledger-rows",
        action="store_true",
        help="the embedded Loom drops each ledger row instead of recording it (how much of the gap the ledger is; no row check)",
    )
    add_profile_arguments(p, "the embedded Loom rounds", lines=35)
    p.add_argument("--client-url", help=argparse.SUPPRESS)
    p.add_argument("--client-path", default=OP_PATH, help=argparse.SUPPRESS)
    p.add_argument("--client-body", default="{}", help=argparse.SUPPRESS)
    p.add_argument("--token", default="", help=argparse.SUPPRESS)
    p.add_argument("--serve-plane", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--serve-gateway", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--nats", help=argparse.SUPPRESS)
    p.add_argument("--plane-address", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.client_url:
        print(
            json.dumps(
                asyncio.run(
                    _client(args.client_url, args.token, args.requests, args.concurrency, args.client_path, args.client_body.encode())
                )
            )
        )
        return 0
    logging.basicConfig(level=logging.WARNING)
    from loom_core.process import tune_gc

    tune_gc()  # server processes are set up as `loom up`'s and `loom serve`'s (the baseline shares the process)
    if args.serve_plane:
        uvloop.run(serve_plane(args.serve_plane, args.nats))
        return 0
    if args.serve_gateway:
        uvloop.run(serve_gateway(args.serve_gateway, args.nats, args.plane_address))
        return 0
    if args.client == "auto":
        args.client = "wrk" if shutil.which("wrk") else "python"
    if args.ledger_only:
        print(json.dumps(uvloop.run(bench_ledger(args.ledger_only, args.sync_interval)), indent=2))
        return 0
    # The servers run on uvloop, as `loom up` runs them; the baseline shares the same loop.
    result = uvloop.run(bench(args))
    print(json.dumps(result, indent=2) if args.json else report(result))
    keys = ("loom", "baseline", "loom_grpc_transport", "loom_cluster")
    return 0 if all(result[k]["errors"] == 0 for k in keys if k in result) else 1


if __name__ == "__main__":
    exit_process(main())

"""Cluster mode against a plain FastAPI handler, and CPU per op of each process, measured in the
same run: the gateway process (relay only, no store) and the planes process (identity, tasks,
policy, embedded store), as `loom serve` runs them (docs/operations/sizing.md), on loopback with
a nats-server.

Loads, from a separate client process (wrk when installed, else bench/gateway.py's keep-alive
client), in alternating rounds, the median round of each reported:
- read ops through the gateway's REST door: `auth.whoami` (identity plane) and `task.get` of one
  task (tasks plane, a namespace-scoped read);
- the baseline: a plain FastAPI app in its own uvicorn process (uvloop, httptools) answering the
  same route with the same JSON (no auth, no ledger, no gRPC hop);
then, once each with this process as the client: `auth.whoami` straight to the identity plane's
gRPC port (the plane's share with no gateway in front), and task lifecycles (create, pull,
complete) through the gateway.
Each process's CPU (user + system, from /proc) is read around each load: CPU µs per request.
`--profile DIR` also samples the gateway and the planes process with py-spy during one more round
of each read op and prints their top frames (flame graphs and raw stacks left in DIR).

    .venv/bin/python bench/cluster.py [--seconds 4] [--rounds 3] [--concurrency 16] [--profile DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import grpc
import httpx
import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _machine import add_durability_argument, cpus, durability, load, machine  # bench/ is on sys.path when a script runs
from gateway import cpu_seconds, median_run, plain_app, run_client
from loom_api.identity.v1 import identity_pb2
from loom_core.bus.natsserver import free_port
from loom_runner import GRPC_EXPERIMENTS

from tests.deploy.processes import LoomProcess, NatsCluster, bootstrap, loom_env

PY_SPY = Path(sys.executable).parent / "py-spy"


def pid_of(p: LoomProcess) -> int:
    assert p.proc is not None
    return p.proc.pid


async def drive(n: int, concurrency: int, one: Callable[[], Awaitable[object]]) -> float:
    queue = list(range(n))
    started = time.perf_counter()

    async def worker() -> None:
        while queue:
            queue.pop()
            await one()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - started


async def round_of(args: argparse.Namespace, url: str, token: str, path: str, body: bytes, pids: Mapping[str, int]) -> dict[str, Any]:
    before = {side: cpu_seconds(pid) for side, pid in pids.items()}
    r = await run_client(args, url, token, args.requests, path, body)
    for side, pid in pids.items():
        r[f"cpu_us_{side}"] = (cpu_seconds(pid) - before[side]) / max(1, r["requests"]) * 1e6
    return r


def top_frames(raw: Path, n: int = 12) -> list[str]:
    """The py-spy raw stacks' hottest functions: self time (the leaf) and total (anywhere on
    the stack), as shares of the samples."""
    own: collections.Counter[str] = collections.Counter()
    total: collections.Counter[str] = collections.Counter()
    samples = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        k = int(count)
        samples += k
        frames = [f.split(" (")[0] + " (" + f.split(" (")[1].split(":")[0] + ")" if " (" in f else f for f in stack.split(";")]
        own[frames[-1]] += k
        for f in set(frames):
            total[f] += k
    if not samples:
        return ["(no samples)"]
    lines = [f"{samples} samples; self:"]
    lines += [f"  {100 * c / samples:5.1f}%  {f}" for f, c in own.most_common(n)]
    lines.append("total (on the stack):")
    lines += [f"  {100 * c / samples:5.1f}%  {f}" for f, c in total.most_common(3 * n) if c < samples][:n]
    return lines


async def profiled_round(
    args: argparse.Namespace, label: str, url: str, token: str, path: str, body: bytes, pids: Mapping[str, int]
) -> list[str]:
    out_dir = Path(args.profile)
    seconds = str(max(2, round(args.seconds)))
    spies = {}
    for side in ("gateway", "planes"):
        raw = out_dir / f"{label}-{side}.txt"
        spies[side] = (
            await asyncio.create_subprocess_exec(
                *[
                    str(PY_SPY),
                    "record",
                    "--pid",
                    str(pids[side]),
                    "-d",
                    seconds,
                    "-r",
                    "200",
                    "-f",
                    "raw",
                    "-o",
                    str(raw),
                    # Native frames need the process paused while sampled.
                    *(["--native"] if args.native else ["--nonblocking"]),
                ],
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
            ),
            raw,
        )
    await asyncio.sleep(0.5)
    await run_client(args, url, token, args.requests, path, body)
    lines = []
    for side, (spy, raw) in spies.items():
        await asyncio.wait_for(spy.wait(), 60)
        lines.append(f"profile {label}, {side} process ({raw}):")
        lines += top_frames(raw) if raw.exists() else ["(py-spy wrote nothing)"]
    return lines


async def serve_echo(*more: grpc.GenericRpcHandler) -> None:
    """The gRPC floor's server: a bare grpc.aio server (uvloop, the planes' options) whose method
    `bench.Echo/Echo` answers its request bytes as they came (beside what `more` serves), in its
    own process: it prints its port as JSON and serves until its parent closes stdin."""
    from loom_core.runtime import GRPC_LEAN_OPTIONS

    async def echo(request: bytes, _: object) -> bytes:
        return request

    server = grpc.aio.server(options=list(GRPC_LEAN_OPTIONS))
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("bench.Echo", {"Echo": grpc.unary_unary_rpc_method_handler(echo)}), *more)
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(json.dumps({"port": port}), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    await server.stop(0)


async def echo_client(port: int, n: int, concurrency: int, token: str) -> None:
    """The gRPC floor's client, in its own process: `n` calls with the metadata the gateway
    sends (a bearer token, the agent, the transport) and a request of whoami's size."""
    from loom_core.runtime import GRPC_LEAN_OPTIONS

    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=list(GRPC_LEAN_OPTIONS)) as ch:
        method: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = ch.unary_unary("/bench.Echo/Echo")
        md = (("authorization", f"Bearer {token}"), ("x-loom-agent", "bench"), ("x-loom-transport", "rest"))
        for _ in range(200):
            await method(b"", metadata=md, timeout=60)
        t0 = os.times()
        wall = await drive(n, concurrency, lambda: method(b"", metadata=md, timeout=60))
        t1 = os.times()
    print(json.dumps({"rps": n / wall, "client_us": 1e6 * (t1.user + t1.system - t0.user - t0.system) / n}), flush=True)


async def echo_pair(script: str, serve_flag: str, client_args: list[str], calls: int) -> dict[str, float]:
    """Start `script serve_flag` (it prints {"port"}), run `script` as a client with
    `client_args` and the port, and add the server's CPU a call (the client's 200 warm-up calls
    counted in) to the client's JSON answer. Both ends on the gRPC stack `loom` runs
    (loom_runner's GRPC_EXPERIMENTS, unless set here)."""
    env = {**os.environ, "GRPC_EXPERIMENTS": os.environ.get("GRPC_EXPERIMENTS", GRPC_EXPERIMENTS)}
    server = await asyncio.create_subprocess_exec(
        sys.executable, script, serve_flag, stdout=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.PIPE, env=env
    )
    assert server.stdout is not None and server.stdin is not None
    port = json.loads(await asyncio.wait_for(server.stdout.readline(), 60))["port"]
    try:
        s0 = cpu_seconds(server.pid)
        client = await asyncio.create_subprocess_exec(
            sys.executable, script, *client_args[:1], str(port), *client_args[1:], stdout=asyncio.subprocess.PIPE, env=env
        )
        out, _ = await client.communicate()
        r = dict(json.loads(out))
        r["server_us"] = 1e6 * (cpu_seconds(server.pid) - s0) / (calls + 200)
    finally:
        server.stdin.write(b"stop\n")
        await server.stdin.drain()
        await asyncio.wait_for(server.wait(), 30)
    return r


async def grpc_floor(args: argparse.Namespace, token: str) -> dict[str, float]:
    """An empty unary call between two processes over grpc.aio: what the gateway -> plane hop
    costs each side before any of Loom's work."""
    client_args = ["--echo-client", "--calls", str(args.calls), "-c", str(args.concurrency), "--echo-token", token]
    return await echo_pair(__file__, "--serve-echo", client_args, args.calls)


async def serve_baseline(payload: Any, path: str) -> None:
    """The baseline's own process: the plain FastAPI app on uvicorn, as the gateway is served."""
    from loom_runner.http import HttpServer

    server = HttpServer(plain_app(payload, path), port=0)
    await server.start()
    print(json.dumps({"url": f"http://127.0.0.1:{server.port}"}), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    await server.stop()


async def start_baseline(base: Path, path: str, payload: Any) -> tuple[asyncio.subprocess.Process, str]:
    f = base / f"payload-{path.rsplit('/', 1)[-1]}.json"
    f.write_text(json.dumps(payload))
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "--serve-baseline",
        str(f),
        "--baseline-path",
        path,
        stdout=asyncio.subprocess.PIPE,
        stdin=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), 60)
    return proc, str(json.loads(line)["url"])


async def stop_baseline(proc: asyncio.subprocess.Process) -> None:
    assert proc.stdin is not None
    proc.stdin.write(b"stop\n")
    await proc.stdin.drain()
    await asyncio.wait_for(proc.wait(), 30)


async def main(args: argparse.Namespace) -> None:
    base = Path(tempfile.mkdtemp(prefix="loom-bench-cluster-"))
    nats = NatsCluster(
        base / "nats",
        1,
        {
            "LOOM_NATS_INTERNAL_USER": "u",
            "LOOM_NATS_INTERNAL_PASSWORD": "p",
            "NATS_SYS_USER": "u-sys",
            "NATS_AUTH_CALLOUT_ISSUER": "ABQALO726KPHYPHEJFQ4B4HYJBZSZCILX3ZH4DOUO2EJU5SUC4HJPSWV",
        },
        sync_interval=args.sync_interval,
    )
    nats.start()
    await nats.wait_ready("u", "p")
    common = {"nats_url": nats.urls, "nats_internal_user": "u", "nats_internal_password": "p"}
    boot = await asyncio.to_thread(bootstrap, loom_env(base / "planes"), "bench", "private")
    rates = {"rate_read_per_minute": "1000000000", "rate_write_per_minute": "100000000", "rate_admin_per_minute": "1000000"}
    planes = LoomProcess(["serve", "--planes", "identity,tasks,policy"], loom_env(base / "planes", **common, **rates), base / "planes.log")
    planes.start()
    addr = {p: (await planes.wait_line(rf"^loom: plane {p} grpc (\S+)$")).group(1) for p in ("identity", "tasks", "policy")}
    port = free_port()
    gateway = LoomProcess(
        ["serve", "--gateway"],
        loom_env(base / "gateway", plane_addresses=",".join(f"{k}={v}" for k, v in addr.items()), http_port=str(port)),
        base / "gateway.log",
    )
    gateway.start()
    await gateway.wait_line(r"^loom: gateway http ")
    token = boot["token"]
    headers = {"Authorization": f"Bearer {token}", "X-Loom-Agent": "bench"}
    gw_url = f"http://127.0.0.1:{port}"
    results: dict[str, dict[str, Any]] = {}
    once: list[tuple[str, int, float, float, float]] = []

    async def measured_once(label: str, n: int, one: Callable[[], Awaitable[object]]) -> None:
        """`n` calls of `one` at the bench's concurrency: wall time and each process's CPU."""
        g0, p0 = cpu_seconds(pids["gateway"]), cpu_seconds(pids["planes"])
        wall = await drive(n, args.concurrency, one)
        once.append((label, n, wall, cpu_seconds(pids["gateway"]) - g0, cpu_seconds(pids["planes"]) - p0))

    floor: dict[str, float] = {}
    profile: list[str] = []
    baselines: list[asyncio.subprocess.Process] = []
    try:
        limits = httpx.Limits(max_connections=args.concurrency, max_keepalive_connections=args.concurrency)
        async with httpx.AsyncClient(base_url=gw_url, headers=headers, limits=limits, timeout=60) as c:
            (await c.post("/v1/inbox.register", json={"inbox": "bench", "owner_agent": "bench"})).raise_for_status()
            r = await c.post("/v1/task.create", json={"inbox": "bench", "kind": "chore", "title": "read me"})
            r.raise_for_status()
            reads = {
                "auth.whoami": b"{}",
                "task.get": json.dumps({"task_id": r.json()["task"]["task_id"]}).encode(),
            }
            pids = {"gateway": pid_of(gateway), "planes": pid_of(planes)}
            for op, body in reads.items():
                if op not in args.ops.split(","):
                    continue
                path = f"/v1/{op}"
                payload = (await c.post(path, content=body, headers={"Content-Type": "application/json"})).json()
                proc, base_url = await start_baseline(base, path, payload)
                baselines.append(proc)
                for url in (gw_url, base_url):
                    await run_client(args, url, token, args.warmup, path, body)
                loom_runs, base_runs = [], []
                # Alternate the servers so a neighbour's load on the machine hits each alike.
                for _ in range(args.rounds):
                    loom_runs.append(await round_of(args, gw_url, token, path, body, pids))
                    base_runs.append(await round_of(args, base_url, token, path, body, {"baseline": proc.pid}))
                results[op] = {"loom": median_run(loom_runs), "baseline": median_run(base_runs)}
                if args.profile:
                    profile += await profiled_round(args, op, gw_url, token, path, body, pids)

            if not args.no_once:
                floor = await grpc_floor(args, token)
                async with grpc.aio.insecure_channel(addr["identity"]) as ch:
                    method = ch.unary_unary(
                        "/loom.identity.v1.IdentityService/WhoAmI",
                        request_serializer=identity_pb2.WhoAmIRequest.SerializeToString,
                        response_deserializer=identity_pb2.WhoAmIResponse.FromString,
                    )
                    md = (("authorization", headers["Authorization"]),)

                    async def grpc_whoami() -> None:
                        await method(identity_pb2.WhoAmIRequest(), metadata=md)

                    await measured_once("auth.whoami on the plane's gRPC port", args.calls, grpc_whoami)

                async def lifecycle() -> None:
                    (await c.post("/v1/task.create", json={"inbox": "bench", "kind": "chore", "title": "t"})).raise_for_status()
                    r = await c.post("/v1/task.pull", json={"inbox": "bench", "wait_seconds": 5})
                    r.raise_for_status()
                    for t in r.json()["tasks"]:
                        (await c.post("/v1/task.complete", json={"task_id": t["task_id"], "fence": t["fence"]})).raise_for_status()

                await measured_once("task lifecycle via the gateway (3 ops)", args.lifecycles, lifecycle)
    finally:
        for proc in baselines:
            await stop_baseline(proc)
        gateway.stop()
        planes.stop()
        nats.stop()
        shutil.rmtree(base, ignore_errors=True)
    print(f"machine: {machine()}; {load()} at the end")
    print(durability(args.sync_interval))
    what = f"wrk {args.seconds:g} s" if args.client == "wrk" else f"{args.requests} requests"
    print(f"client {args.client}, {what} x {args.rounds} rounds per server, {args.concurrency} connections (median round)")
    print(f"{'':<46}{'req/s':>8}{'p50 ms':>8}{'p99 ms':>8}{'errors':>7}   CPU µs/request")
    for op, res in results.items():
        for label, key in ((f"{op} through the cluster's gateway", "loom"), (f"{op}: plain FastAPI, same JSON", "baseline")):
            x = res[key]
            cpu = ", ".join(f"{k.removeprefix('cpu_us_')} {v:.0f}" for k, v in x.items() if k.startswith("cpu_us_"))
            print(f"{label:<46}{x['rps']:>8.0f}{x['p50_ms']:>8.2f}{x['p99_ms']:>8.2f}{x['errors']:>7}   {cpu}")
    for op, res in results.items():
        lo, ba = res["loom"], res["baseline"]
        gw, pl = lo["cpu_us_gateway"], lo["cpu_us_planes"]
        # What the CPU per request allows on this machine's cores when nothing else runs: each
        # process uses at most one core (one event loop), the cluster's two at most all of them.
        # Read beside the measured throughput, which a busy machine's scheduler distorts (more
        # processes, more shares).
        cores = cpus()
        cluster_max = min(1e6 / gw, 1e6 / pl, cores * 1e6 / (gw + pl))
        base_max = 1e6 / ba["cpu_us_baseline"]
        print(
            f"ratio {op} cluster / plain FastAPI: throughput {lo['rps'] / ba['rps']:.2f}x"
            f" (rounds {lo['rounds_rps']} / {ba['rounds_rps']}), CPU per request {(gw + pl) / ba['cpu_us_baseline']:.2f}x,"
            f" CPU-bound throughput on {cores} idle cores {cluster_max / base_max:.2f}x ({cluster_max:.0f} / {base_max:.0f} req/s)"
        )
    print(f"{'once, this process as the client':<46}{'n':>6}{'per s':>8}{'gateway µs CPU/op':>19}{'planes µs CPU/op':>18}")
    for name, n, wall, g, p in once:
        print(f"{name:<46}{n:>6}{n / wall:>8.0f}{1e6 * g / n:>19.0f}{1e6 * p / n:>18.0f}")
    if floor:
        print(
            f"gRPC floor (an empty unary grpc.aio call, two processes, {args.calls} calls, {args.concurrency} at a time):"
            f" {floor['rps']:.0f}/s, client {floor['client_us']:.0f} µs, server {floor['server_us']:.0f} µs CPU per call"
        )
    if profile:
        print()
        print("\n".join(profile))


def cli() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-d", "--seconds", type=float, default=4.0, help="seconds per round with wrk (default 4)")
    ap.add_argument("-n", "--requests", type=int, default=3000, help="requests per round with the python client (default 3000)")
    ap.add_argument("--rounds", type=int, default=3, help="measured rounds per server, alternating (default 3)")
    ap.add_argument("--warmup", type=int, default=300, help="unmeasured requests per server first (default 300)")
    ap.add_argument("-c", "--concurrency", type=int, default=16)
    ap.add_argument("--client", choices=["auto", "wrk", "python"], default="auto", help="load generator (auto: wrk when installed)")
    ap.add_argument("--calls", type=int, default=2000, help="direct gRPC whoami calls (default 2000)")
    ap.add_argument("--lifecycles", type=int, default=300)
    ap.add_argument("--profile", metavar="DIR", help="py-spy the gateway and planes processes during one more round of each read op")
    ap.add_argument("--native", action="store_true", help="with --profile: native frames too (grpc's C core, uvloop)")
    ap.add_argument("--ops", default="auth.whoami,task.get", help="the read ops to measure (default auth.whoami,task.get)")
    ap.add_argument("--no-once", action="store_true", help="skip the direct gRPC calls and the lifecycles")
    add_durability_argument(ap)
    ap.add_argument("--serve-baseline", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--serve-echo", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--echo-client", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--echo-token", default="", help=argparse.SUPPRESS)
    ap.add_argument("--baseline-path", default="/v1/auth.whoami", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve_echo:
        uvloop.run(serve_echo())
        return 0
    if args.echo_client:
        uvloop.run(echo_client(args.echo_client, args.calls, args.concurrency, args.echo_token))
        return 0
    if args.serve_baseline:
        uvloop.run(serve_baseline(json.loads(args.serve_baseline.read_text()), args.baseline_path))
        return 0
    if args.client == "auto":
        args.client = "wrk" if shutil.which("wrk") else "python"
    if args.profile:
        Path(args.profile).mkdir(parents=True, exist_ok=True)
    uvloop.run(main(args))
    return 0


if __name__ == "__main__":
    sys.exit(cli())

"""CPU per op of each process in cluster mode: the gateway process (relay only, no store) and
the planes process (identity, tasks, policy, embedded store), as `loom serve` runs them
(docs/operations/sizing.md).

Loads, from a client in this process, over loopback:
- `auth.whoami` through the gateway's REST door, then the same op straight to the identity
  plane's gRPC port (the baseline: the plane's share with no gateway in front);
- task lifecycles (create, pull, complete) through the gateway.
Each process's CPU (user + system, from /proc) is read before and after each load; the figures
are CPU milliseconds per op per process, and the gateway's share as a ratio of the plane's.

    .venv/bin/python bench/cluster.py [--calls 2000] [--lifecycles 300] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

import grpc
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _machine import add_durability_argument, durability, load, machine  # bench/ is on sys.path when a script runs
from loom_api.identity.v1 import identity_pb2
from loom_core.bus.natsserver import free_port

from tests.deploy.processes import LoomProcess, NatsCluster, bootstrap, loom_env

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(p: LoomProcess) -> float:
    assert p.proc is not None
    fields = Path(f"/proc/{p.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


async def drive(n: int, concurrency: int, one: object) -> float:
    queue = list(range(n))
    started = time.perf_counter()

    async def worker() -> None:
        while queue:
            queue.pop()
            await one()  # type: ignore[operator]

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - started


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--lifecycles", type=int, default=300)
    ap.add_argument("--concurrency", type=int, default=16)
    add_durability_argument(ap)
    args = ap.parse_args()
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
    rates = {"rate_read_per_minute": "100000000", "rate_write_per_minute": "100000000", "rate_admin_per_minute": "1000000"}
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
    headers = {"Authorization": f"Bearer {boot['token']}", "X-Loom-Agent": "bench"}
    rows: list[tuple[str, int, float, float, float]] = []
    try:
        limits = httpx.Limits(max_connections=args.concurrency, max_keepalive_connections=args.concurrency)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=headers, limits=limits, timeout=60) as c:
            for _ in range(200):
                await c.post("/v1/auth.whoami", json={})

            async def rest_whoami() -> None:
                r = await c.post("/v1/auth.whoami", json={})
                r.raise_for_status()

            # Background CPU at rest (timers, NATS pings, the sweep, empty ledger flushes), to net out.
            g0, p0, t0 = cpu_seconds(gateway), cpu_seconds(planes), time.perf_counter()
            await asyncio.sleep(5)
            idle_s = time.perf_counter() - t0
            idle = ((cpu_seconds(gateway) - g0) / idle_s, (cpu_seconds(planes) - p0) / idle_s)

            g0, p0 = cpu_seconds(gateway), cpu_seconds(planes)
            wall = await drive(args.calls, args.concurrency, rest_whoami)
            rows.append(("auth.whoami via the gateway (REST)", args.calls, wall, cpu_seconds(gateway) - g0, cpu_seconds(planes) - p0))

            async with grpc.aio.insecure_channel(addr["identity"]) as ch:
                method = ch.unary_unary(
                    "/loom.identity.v1.IdentityService/WhoAmI",
                    request_serializer=identity_pb2.WhoAmIRequest.SerializeToString,
                    response_deserializer=identity_pb2.WhoAmIResponse.FromString,
                )
                md = (("authorization", headers["Authorization"]),)

                async def grpc_whoami() -> None:
                    await method(identity_pb2.WhoAmIRequest(), metadata=md)

                g0, p0 = cpu_seconds(gateway), cpu_seconds(planes)
                wall = await drive(args.calls, args.concurrency, grpc_whoami)
                rows.append(
                    (
                        "auth.whoami on the plane's gRPC port (baseline)",
                        args.calls,
                        wall,
                        cpu_seconds(gateway) - g0,
                        cpu_seconds(planes) - p0,
                    )
                )

            (await c.post("/v1/inbox.register", json={"inbox": "bench", "owner_agent": "bench"})).raise_for_status()

            async def lifecycle() -> None:
                (await c.post("/v1/task.create", json={"inbox": "bench", "kind": "chore", "title": "t"})).raise_for_status()
                r = await c.post("/v1/task.pull", json={"inbox": "bench", "wait_seconds": 5})
                r.raise_for_status()
                for t in r.json()["tasks"]:
                    (await c.post("/v1/task.complete", json={"task_id": t["task_id"], "fence": t["fence"]})).raise_for_status()

            g0, p0 = cpu_seconds(gateway), cpu_seconds(planes)
            wall = await drive(args.lifecycles, args.concurrency, lifecycle)
            rows.append(
                ("task lifecycle via the gateway (REST, 3 ops)", args.lifecycles, wall, cpu_seconds(gateway) - g0, cpu_seconds(planes) - p0)
            )
    finally:
        gateway.stop()
        planes.stop()
        nats.stop()
    print(f"machine: {machine()}; {load()}")
    print(durability(args.sync_interval))
    print(f"CPU at rest: gateway {1000 * idle[0]:.1f} ms/s, planes {1000 * idle[1]:.1f} ms/s (netted out of the 'net' columns)")
    print(f"{'load':<50} {'n':>5} {'per s':>7} {'gateway ms CPU/op':>18} {'planes ms CPU/op':>17} {'net gw':>7} {'net planes':>10}")
    for name, n, wall, g, p in rows:
        net_g, net_p = max(0.0, g - idle[0] * wall), max(0.0, p - idle[1] * wall)
        print(
            f"{name:<50} {n:>5} {n / wall:>7.0f} {1000 * g / n:>18.2f} {1000 * p / n:>17.2f} {1000 * net_g / n:>7.2f} {1000 * net_p / n:>10.2f}"
        )
    rest, base_row = rows[0], rows[1]
    print(f"ratio, planes process CPU per whoami: via the gateway / direct gRPC = {rest[4] / max(base_row[4], 1e-9):.2f}")
    print(f"gateway CPU per relayed whoami / plane CPU per direct gRPC whoami = {rest[3] / max(base_row[4], 1e-9):.2f}")


if __name__ == "__main__":
    asyncio.run(main())

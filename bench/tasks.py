"""Task inbox throughput and wake latency, beside raw NATS JetStream work-queue throughput
measured in the same run.

    .venv/bin/python bench/tasks.py [-n 2000] [-w 16] [-p 8] [--door grpc|rest|both] [--replicas 1|2]
                                    [--wake 200] [--batch 100] [--only-batch] [--profile] [--json]

Starts an embedded Loom in a temp dir (a nats-server child, chDB, the planes' gRPC servers and
the gateway, on uvloop as `loom up` runs them), bootstraps an org, registers an inbox, and
drives it from a separate client process (so the client does not share the servers' loop):

- lifecycles/s, unbatched: `-p` producers create `-n` tasks while `-w` workers each loop
  task.pull (long poll) -> task.complete (fenced); from the first create until the derived work
  (the projector, the webhook deliverer) has caught up with the last complete (the client's own
  view, to the last complete, is `client_per_second`).
  Batched (`--batch B`): task.create_many of B tasks, task.pull with max_tasks B,
  task.complete_many of what each pull returned. Over gRPC and over REST (`--door both`).
  Every lifecycle is checked: each task completed once, no fence seen twice.
- wake latency: one worker waits in task.pull; the client creates a task on the same replica
  (and, with --replicas 2, on the other one) and measures create-sent -> pull-returned; p50 /
  p99 over `--wake` rounds. The target (issue #35: across replicas, p50 <= 5 ms) is measured
  with the second replica in a process of its own (`--replicas 2`'s default), as production runs
  replicas (two `loom serve` processes, usually on two machines): with both on the bench's one
  event loop (`--replicas-in-process`, the bench before session 21) the reading replica's loop
  waited while the create's answer was built on it, a wait no deployment has. Beside it, the
  wake's floor (bench/_wake_floor.py): the parts a wake is made of (a gRPC round trip, two
  JetStream writes, a NATS hop) timed without Loom after the same pause, and their sum.
- the baseline, against the same nats-server: a file-backed work-queue stream, `-p` producers
  publishing `-n` messages (each publish acked by the server), `-w` workers each looping
  fetch(1) -> ack_sync (acked by the server): publish -> pull -> ack, Loom's lifecycle without
  Loom, measured right before and right after each Loom run. A run's `ratio` is Loom's
  lifecycles/s over the mean of those two baselines' messages/s; its `ratio_cpu` the same in CPU
  (this client + the Loom server + the nats-server per lifecycle, against client + nats-server
  per message), which a shared machine's load moves much less.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import cProfile
import ctypes
import gc
import json
import logging
import os
import statistics
import sys
import tempfile
import time
import tracemalloc
import urllib.request
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import _wake_floor
from _machine import (  # bench/ is on sys.path when a script runs
    add_durability_argument,
    add_profile_arguments,
    durability,
    load,
    machine,
    profile_text,
)
from _wake_trace import WakeTrace
from loom_core.process import exit_process

ROOT = Path(__file__).resolve().parents[1]
INBOX = "bench-bot"
WAKE_INBOX = "wake-bot"
SERIAL_INBOX = "serial-bot"
#: The baseline's publish and ack answers: nats-py's defaults (1-2 s) time out at load averages of 40.
BASELINE_TIMEOUT = 30.0
T = TypeVar("T")


# --- the load client (runs in its own process) ------------------------------------------------------


class GrpcDoor:
    def __init__(self, addresses: list[str], token: str, namespace: str) -> None:
        import grpc
        from loom_api.tasks.v1 import tasks_pb2, tasks_pb2_grpc

        self.pb = tasks_pb2
        self.channels = [grpc.aio.insecure_channel(a) for a in addresses]
        self.stubs = [tasks_pb2_grpc.TaskServiceStub(c) for c in self.channels]
        self.md = [("authorization", f"Bearer {token}"), ("x-loom-namespace", namespace), ("x-loom-agent", "bench")]

    async def create(self, replica: int, inbox: str, title: str) -> str:
        r = await self.stubs[replica % len(self.stubs)].CreateTask(
            self.pb.CreateTaskRequest(inbox=inbox, kind="chore", title=title), metadata=self.md
        )
        return str(r.task.task_id)

    async def pull(self, replica: int, inbox: str, wait: int, batch: int) -> list[tuple[str, int]]:
        r = await self.stubs[replica % len(self.stubs)].PullTasks(
            self.pb.PullTasksRequest(inbox=inbox, wait_seconds=wait, max_tasks=batch), metadata=self.md
        )
        return [(t.task_id, t.fence) for t in r.tasks]

    async def complete(self, replica: int, task_id: str, fence: int) -> None:
        await self.stubs[replica % len(self.stubs)].CompleteTask(
            self.pb.CompleteTaskRequest(task_id=task_id, fence=fence), metadata=self.md
        )

    async def create_many(self, replica: int, inbox: str, titles: list[str]) -> list[str]:
        r = await self.stubs[replica % len(self.stubs)].CreateTasks(
            self.pb.CreateTasksRequest(tasks=[self.pb.CreateTaskRequest(inbox=inbox, kind="chore", title=t) for t in titles]),
            metadata=self.md,
        )
        return [x.task.task_id for x in r.results if not x.error.code]

    async def complete_many(self, replica: int, done: list[tuple[str, int]]) -> int:
        r = await self.stubs[replica % len(self.stubs)].CompleteTasks(
            self.pb.CompleteTasksRequest(tasks=[self.pb.CompleteTaskRequest(task_id=t, fence=f) for t, f in done]), metadata=self.md
        )
        return sum(1 for x in r.results if not x.error.code)

    async def close(self) -> None:
        for c in self.channels:
            await c.close()


class RestDoor:
    def __init__(self, urls: list[str], token: str, namespace: str) -> None:
        import httpx

        headers = {"Authorization": f"Bearer {token}", "X-Loom-Namespace": namespace, "X-Loom-Agent": "bench"}
        limits = httpx.Limits(max_connections=256, max_keepalive_connections=256)
        self.clients = [httpx.AsyncClient(base_url=u, headers=headers, timeout=60, limits=limits) for u in urls]

    async def _call(self, replica: int, op: str, args: dict[str, Any]) -> dict[str, Any]:
        r = await self.clients[replica % len(self.clients)].post(f"/v1/{op}", json=args)
        if r.status_code != 200:
            raise RuntimeError(f"{op}: {r.status_code} {r.text[:200]}")
        return dict(r.json())

    async def create(self, replica: int, inbox: str, title: str) -> str:
        return str((await self._call(replica, "task.create", {"inbox": inbox, "kind": "chore", "title": title}))["task"]["task_id"])

    async def pull(self, replica: int, inbox: str, wait: int, batch: int) -> list[tuple[str, int]]:
        out = await self._call(replica, "task.pull", {"inbox": inbox, "wait_seconds": wait, "max_tasks": batch})
        return [(t["task_id"], int(t["fence"])) for t in out["tasks"]]

    async def complete(self, replica: int, task_id: str, fence: int) -> None:
        await self._call(replica, "task.complete", {"task_id": task_id, "fence": fence})

    async def create_many(self, replica: int, inbox: str, titles: list[str]) -> list[str]:
        out = await self._call(replica, "task.create_many", {"tasks": [{"inbox": inbox, "kind": "chore", "title": t} for t in titles]})
        return [x["task"]["task_id"] for x in out["results"] if "task" in x]

    async def complete_many(self, replica: int, done: list[tuple[str, int]]) -> int:
        out = await self._call(replica, "task.complete_many", {"tasks": [{"task_id": t, "fence": f} for t, f in done]})
        return sum(1 for x in out["results"] if "task" in x)

    async def close(self) -> None:
        for c in self.clients:
            await c.aclose()


async def loom_lifecycles(door: Any, replicas: int, n: int, workers: int, producers: int, batch: int) -> dict[str, Any]:
    """`batch` 1: task.create / task.pull / task.complete one task each; more: task.create_many of
    `batch` tasks, task.pull with max_tasks `batch`, task.complete_many of what the pull returned."""
    created: list[str] = []
    completed: list[str] = []
    fences: list[int] = []
    last_done = 0.0

    async def produce(p: int) -> None:
        mine = list(range(p, n, producers))
        if batch <= 1:
            for i in mine:
                created.append(await door.create(i, INBOX, f"t{i}"))
            return
        for k in range(0, len(mine), batch):
            chunk = mine[k : k + batch]
            created.extend(await door.create_many(chunk[0], INBOX, [f"t{i}" for i in chunk]))

    async def work(w: int) -> None:
        nonlocal last_done
        while len(completed) < n:
            got = await door.pull(w, INBOX, 2, batch)
            if not got:
                continue
            fences.extend(f for _, f in got)
            if batch <= 1:
                for task_id, fence in got:
                    await door.complete(w, task_id, fence)
            else:
                assert await door.complete_many(w, got) == len(got)
            completed.extend(t for t, _ in got)
            last_done = time.perf_counter()

    started = time.perf_counter()
    await asyncio.gather(*(produce(p) for p in range(producers)), *(work(w) for w in range(workers)))
    elapsed = last_done - started
    ok = sorted(created) == sorted(completed) and len(set(fences)) == len(fences) == n
    return {
        "lifecycles": len(completed),
        "seconds": elapsed,
        "per_second": len(completed) / elapsed,
        # time.perf_counter is CLOCK_MONOTONIC on Linux: the server compares it with its own clock.
        "last_done_clock": last_done,
        "checked": ok,
        "replicas": replicas,
        "batch": batch,
    }


#: The pause before each wake round's create (its pull parks meanwhile): every process of the round
#: starts it idle, as a worker waiting for work does; the wake floor waits the same.
WAKE_PAUSE = 0.03


async def loom_wake(door: Any, replicas: int, rounds: int) -> dict[str, Any]:
    """Each round: a pull waits on replica 0, a create goes to replica `replicas - 1`; the latency
    is from the create's send until both answers are in (the pull's alone: `pull_p50_ms`). Each
    round's stamps (CLOCK_MONOTONIC) go back for `--trace-wake`."""
    latencies: list[float] = []
    pulled: list[float] = []
    stamps: list[dict[str, Any]] = []

    async def pull() -> tuple[list[tuple[str, int]], float]:
        got = await door.pull(0, WAKE_INBOX, 10, 1)
        return got, time.perf_counter()

    for i in range(rounds):
        waiting = asyncio.create_task(pull())
        await asyncio.sleep(WAKE_PAUSE)  # the pull is parked on the server
        sent = time.perf_counter()
        await door.create(replicas - 1, WAKE_INBOX, f"w{i}")
        created = time.perf_counter()
        got, answered = await waiting
        latencies.append(time.perf_counter() - sent)
        pulled.append(answered - sent)
        stamps.append({"title": f"w{i}", "sent": sent, "create_answered": created, "pull_answered": answered})
        assert len(got) == 1, got
        await door.complete(0, got[0][0], got[0][1])
    latencies.sort()
    return {
        "rounds": rounds,
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000,
        "pull_p50_ms": statistics.median(pulled) * 1000,
        "across_replicas": replicas > 1,
        "stamps": stamps,
    }


async def jetstream_work_queue(url: str, n: int, workers: int, producers: int) -> dict[str, Any]:
    import nats
    from nats.js.api import AckPolicy, ConsumerConfig, RetentionPolicy, StorageType, StreamConfig

    nc = await nats.connect(url)
    js = nc.jetstream()
    stream = f"BENCH_WQ_{int(time.time() * 1000)}"
    subject = f"bench.wq.{stream.lower()}"
    await js.add_stream(StreamConfig(name=stream, subjects=[subject], retention=RetentionPolicy.WORK_QUEUE, storage=StorageType.FILE))
    await js.add_consumer(stream, ConsumerConfig(durable_name="workers", ack_policy=AckPolicy.EXPLICIT, max_ack_pending=-1))
    subs = [await js.pull_subscribe_bind("workers", stream=stream) for _ in range(workers)]
    done = 0
    last_done = 0.0

    async def produce(p: int) -> None:
        for i in range(p, n, producers):
            await js.publish(subject, f"task {i}".encode(), timeout=BASELINE_TIMEOUT)

    async def work(w: int) -> None:
        nonlocal done, last_done
        while done < n and time.perf_counter() - started < 300:
            try:
                msgs = await subs[w].fetch(1, timeout=2)
            except Exception:  # noqa: BLE001 - a timeout near the end
                continue
            for m in msgs:
                try:
                    await m.ack_sync(timeout=BASELINE_TIMEOUT)
                except Exception:  # noqa: BLE001 - an ack timeout: the message comes back
                    continue
                done += 1
                last_done = time.perf_counter()

    started = time.perf_counter()
    await asyncio.gather(*(produce(p) for p in range(producers)), *(work(w) for w in range(workers)))
    elapsed = last_done - started
    await js.delete_stream(stream)
    await nc.close()
    return {"messages": done, "seconds": elapsed, "per_second": done / elapsed}


async def sdk_serial(cfg: dict[str, Any], n: int) -> dict[str, Any]:
    """One worker, one call at a time, through the Python SDK over REST: task.create, then
    task.pull of one task, then task.complete with its fence; `n` times."""
    from loom import Agent

    agent = Agent(org=cfg["org"], namespace=cfg["namespace"], agent="bench", api_key=cfg["token"], base_url=cfg["http"][0])
    steps: dict[str, list[float]] = {"create": [], "pull": [], "complete": []}
    try:
        started = time.perf_counter()
        for i in range(n):
            t0 = time.perf_counter()
            created = (await agent.tasks.create(SERIAL_INBOX, kind="chore", title=f"s{i}"))["task"]["task_id"]
            t1 = time.perf_counter()
            got = (await agent.tasks.pull(SERIAL_INBOX, wait_seconds=2, max_tasks=1))["tasks"]
            t2 = time.perf_counter()
            assert len(got) == 1 and got[0]["task_id"] == created, got
            await agent.tasks.complete(created, fence=int(got[0]["fence"]))
            t3 = time.perf_counter()
            for name, d in (("create", t1 - t0), ("pull", t2 - t1), ("complete", t3 - t2)):
                steps[name].append(d)
        elapsed = time.perf_counter() - started
    finally:
        await agent.aclose()
    p50 = {name: statistics.median(v) * 1000 for name, v in steps.items()}
    return {"lifecycles": n, "seconds": elapsed, "per_second": n / elapsed, "step_p50_ms": p50}


async def jetstream_serial(url: str, n: int) -> dict[str, Any]:
    """The same three steps on raw JetStream with nats-py, one at a time: publish (acked by the
    server), fetch one, ack_sync (acked by the server); `n` times."""
    import nats
    from nats.js.api import AckPolicy, ConsumerConfig, RetentionPolicy, StorageType, StreamConfig

    nc = await nats.connect(url)
    js = nc.jetstream()
    stream = f"BENCH_SERIAL_{int(time.time() * 1000)}"
    subject = f"bench.serial.{stream.lower()}"
    await js.add_stream(StreamConfig(name=stream, subjects=[subject], retention=RetentionPolicy.WORK_QUEUE, storage=StorageType.FILE))
    await js.add_consumer(stream, ConsumerConfig(durable_name="worker", ack_policy=AckPolicy.EXPLICIT))
    sub = await js.pull_subscribe_bind("worker", stream=stream)
    started = time.perf_counter()
    for i in range(n):
        await js.publish(subject, f"task {i}".encode(), timeout=BASELINE_TIMEOUT)
        msgs = await sub.fetch(1, timeout=2)
        assert len(msgs) == 1
        await msgs[0].ack_sync(timeout=BASELINE_TIMEOUT)
    elapsed = time.perf_counter() - started
    await js.delete_stream(stream)
    await nc.close()
    return {"messages": n, "seconds": elapsed, "per_second": n / elapsed}


async def serial_rounds(cfg: dict[str, Any]) -> dict[str, Any]:
    """Interleaved rounds in this one client process: JetStream, Loom, JetStream, Loom, ...
    (which goes first alternates); each round's ratio is Loom over the mean of the JetStream
    rounds beside it, and the median ratio is reported."""
    await sdk_serial(cfg, min(cfg["warmup"], 100))
    await jetstream_serial(cfg["nats"], min(cfg["warmup"], 100))
    loom_rounds: list[dict[str, Any]] = []
    js_rounds: list[dict[str, Any]] = []
    for r in range(cfg["rounds"]):
        pair = [("js", jetstream_serial(cfg["nats"], cfg["serial"])), ("loom", sdk_serial(cfg, cfg["serial"]))]
        for name, run in pair if r % 2 == 0 else reversed(pair):
            meter = CpuMeter(cfg)
            out = await run
            cpu = meter.split()
            count = out.get("lifecycles") or out["messages"]
            out["cpu_ms"] = (cpu["total"] if name == "loom" else cpu["client"] + cpu["nats"]) * 1000 / count
            out["cpu_split_ms"] = {k: v * 1000 / count for k, v in cpu.items() if k != "total"}
            out["loadavg"] = os.getloadavg()[0]
            (loom_rounds if name == "loom" else js_rounds).append(out)
    ratios = [lr["per_second"] / jr["per_second"] for lr, jr in zip(loom_rounds, js_rounds, strict=True)]
    return {"loom": loom_rounds, "jetstream": js_rounds, "ratios": ratios, "ratio": statistics.median(ratios)}


def nats_messages(monitor_port: int) -> int:
    """Messages the nats-server has taken in and sent out so far (its `/varz`): per lifecycle,
    a firm count beside the noisy rates (each one a parse, a route and a write on both ends)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{monitor_port}/varz", timeout=5) as r:
        varz = json.loads(r.read())
    return int(varz["in_msgs"]) + int(varz["out_msgs"])


def task_state_counts(monitor_port: int) -> tuple[int, int]:
    """LOOM_TASK_STATE's messages and subjects (`/jsz`): a task not retired yet holds its writes
    there, a retired one only its tombstone, so messages past the subjects are tasks in NATS."""
    with urllib.request.urlopen(f"http://127.0.0.1:{monitor_port}/jsz?streams=true", timeout=5) as r:
        jsz = json.loads(r.read())
    for account in jsz.get("account_details", []):
        for stream in account.get("stream_detail", []):
            if stream["name"] == "LOOM_TASK_STATE":
                return int(stream["state"]["messages"]), int(stream["state"].get("num_subjects") or 0)
    return 0, 0


class SubjectCount:
    """Every message through the nats-server during a run, by kind (a subscriber on `>`, which
    the server hands a copy of everything, JetStream's deliveries and API replies included): what
    the messages a lifecycle are. Deliveries are named by the consumer their ack subject names;
    inbox replies without one (publish acks, API answers) as `reply`; the rest by subject with
    the last (per-task) token cut."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.counts: collections.Counter[str] = collections.Counter()

    @staticmethod
    def kind(subject: str, reply: str) -> str:
        if reply.startswith("$JS.ACK."):
            return "deliver " + ".".join(reply.split(".")[2:4])
        if subject.startswith("_INBOX."):
            return "reply"
        if subject.startswith("$JS.ACK."):
            return "ack " + ".".join(subject.split(".")[2:4])
        parts = subject.split(".")
        return ".".join(parts[:4] if subject.startswith("$") else parts[:3])

    async def __aenter__(self) -> SubjectCount:
        import nats

        self.nc = await nats.connect(self.url)

        async def seen(msg: Any) -> None:
            self.counts[self.kind(msg.subject, msg.reply)] += 1

        await self.nc.subscribe(">", cb=seen, pending_msgs_limit=10**7, pending_bytes_limit=10**10)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.nc.drain()


def proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) a process has used so far, from /proc."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    """Resident set size of a process in MiB (VmRSS in /proc), 0 when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def children(pid: int) -> list[int]:
    """A process's children, whichever of its threads started them."""
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return out


# How often an idle `loom up`'s RSS is read (`--idle-rss`).
IDLE_SAMPLE_SECONDS = 10.0


async def idle_loom_up_rss(settle: float) -> dict[str, Any]:
    """Start a plain `loom up` (temp data dir, a random port) and leave it idle for `settle`
    seconds, reading its RSS and its nats-server child's every `IDLE_SAMPLE_SECONDS`; then stop it.
    The leak check is the soak's: the last third's median against the middle third's."""
    import random
    import signal

    from loom_core.data_dir import URL_FILE

    with tempfile.TemporaryDirectory(prefix="loom-bench-up-") as tmp:
        env = {**os.environ, "LOOM_DATA_DIR": tmp, "LOOM_HTTP_PORT": str(random.randint(20000, 60000)), "LOOM_LOG_LEVEL": "WARNING"}
        proc = await asyncio.create_subprocess_exec(
            str(Path(sys.executable).parent / "loom"), "up", env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
        )
        try:
            deadline = time.monotonic() + 180
            while not (Path(tmp) / URL_FILE).exists():
                if proc.returncode is not None or time.monotonic() > deadline:
                    raise RuntimeError("loom up did not start")
                await asyncio.sleep(0.2)
            started = time.monotonic()
            samples: list[tuple[float, float]] = []
            while True:
                await asyncio.sleep(min(IDLE_SAMPLE_SECONDS, max(0.0, started + settle - time.monotonic())))
                samples.append((rss_mb(proc.pid), sum(rss_mb(c) for c in children(proc.pid))))
                if time.monotonic() - started >= settle:
                    break
            _, middle, last = by_thirds([s[0] for s in samples])
            return {
                "loom_up_mb": samples[-1][0],
                "nats_server_mb": samples[-1][1],
                "settled_seconds": settle,
                "samples_mb": [s[0] for s in samples],
                "late_growth_pct": (last - middle) * 100 / middle,
            }
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 60)
            except TimeoutError:
                proc.kill()
                await proc.wait()


class CpuMeter:
    """CPU seconds of this process, the Loom server processes (the bench's and a replica's own)
    and the nats-server, over a stretch."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        self.pids = [cfg["nats_pid"], cfg["server_pid"], *cfg["replica_pids"]]
        self.start = [time.process_time(), *(proc_cpu(p) for p in self.pids)]

    def split(self) -> dict[str, float]:
        now = [time.process_time(), *(proc_cpu(p) for p in self.pids)]
        client, nats, *servers = (b - a for a, b in zip(self.start, now, strict=True))
        server = sum(servers)
        return {"client": client, "server": server, "nats": nats, "total": client + server + nats}


async def _client(cfg: dict[str, Any]) -> dict[str, Any]:
    door: Any = (
        GrpcDoor(cfg["grpc"], cfg["token"], cfg["namespace"])
        if cfg["door"] == "grpc"
        else RestDoor(cfg["http"], cfg["token"], cfg["namespace"])
    )
    out: dict[str, Any] = {}
    try:
        if cfg["phase"] == "lifecycles":
            await loom_lifecycles(door, cfg["replicas"], cfg["warmup"], cfg["workers"], cfg["producers"], cfg["batch"])
            meter = CpuMeter(cfg)
            out["loom"] = await loom_lifecycles(door, cfg["replicas"], cfg["n"], cfg["workers"], cfg["producers"], cfg["batch"])
            out["loom"]["cpu"] = meter.split()
        if cfg["phase"] == "wake":
            out["wake"] = await loom_wake(door, cfg["wake_replicas"], cfg["wake"])
        if cfg["phase"] == "wake_floor":
            out["floor"] = await _wake_floor.measure(cfg["nats"], cfg["floor_grpc"], cfg["wake"], WAKE_PAUSE)
        if cfg["phase"] == "serial":
            out["serial"] = await serial_rounds(cfg)
    finally:
        await door.close()
    if cfg["phase"] == "baseline":
        await jetstream_work_queue(cfg["nats"], min(cfg["warmup"], 500), cfg["workers"], cfg["producers"])
        # Three measured rounds, the median reported: one round of a few hundred messages lasts
        # a fraction of a second, so one neighbour's burst on the machine would decide it.
        # At least 3,000 messages a round (about a second): a shorter round measures start-up and bursts.
        n = max(cfg["n"], 3000)
        rounds = []
        for _ in range(3):
            meter = CpuMeter(cfg)
            msgs0 = nats_messages(cfg["nats_monitor"])
            rounds.append(await jetstream_work_queue(cfg["nats"], n, cfg["workers"], cfg["producers"]))
            rounds[-1]["nats_messages_per_message"] = (nats_messages(cfg["nats_monitor"]) - msgs0) / n
            # The baseline's own cost: the client and the nats-server (not the idle Loom server beside them).
            cpu = meter.split()
            rounds[-1]["cpu"] = {**cpu, "total": cpu["client"] + cpu["nats"]}
        out["jetstream"] = sorted(rounds, key=lambda r: r["per_second"])[1]
    return out


async def run_client(cfg: dict[str, Any]) -> dict[str, Any]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--client", json.dumps(cfg), stdout=asyncio.subprocess.PIPE, cwd=str(ROOT)
    )
    out, _ = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError("the load client failed")
    return dict(json.loads(out))


# --- the servers ----------------------------------------------------------------------------------

#: The planes each replica serves.
PLANES = {"identity", "tasks"}


async def register_inboxes(base_url: str, token: str) -> None:
    """The bench's inboxes, registered through one replica's REST door (in its store)."""
    import httpx

    async with httpx.AsyncClient(base_url=base_url, headers={"Authorization": f"Bearer {token}", "X-Loom-Namespace": "main"}) as c:
        for inbox in (INBOX, WAKE_INBOX, SERIAL_INBOX):
            r = await c.post("/v1/inbox.register", json={"inbox": inbox, "default_lease_seconds": 600})
            r.raise_for_status()


def plane_counts(planes: list[Any]) -> dict[str, float]:
    """The tasks planes' counters a lifecycle run reports the growth of, summed."""
    return {
        "applied": sum(p.projector.applied for p in planes),
        "batches": sum(p.projector.batches for p in planes),
        "waits": sum(p.admission.waits for p in planes),
        **{k: sum(getattr(p.engine, k, 0) for p in planes) for k in ("batches_written", "batches_refused")},
    }


async def replica_process(args: argparse.Namespace) -> None:
    """`--replica-of NATS_URL` (the bench starts it): one replica in this process, as `loom serve`
    runs one: its own chDB store in a temp dir, with the org bootstrapped and the bench's inboxes
    registered in it; the tasks' truth is the NATS KV both replicas share. Prints its addresses as
    a JSON line, then answers each line on its stdin with its counters, its CPU and (with
    --trace-wake) the wake stamps taken since the last answer; stops at the end of its stdin."""
    sys.path[:0] = [str(ROOT)]
    from loom_core.process import freeze_startup_heap
    from loom_core.store.embedded import EmbeddedStore
    from loom_gateway.identity import bootstrap_org
    from loom_runner.embedded import start_instance
    from loom_tasks.plane import TasksPlane

    with tempfile.TemporaryDirectory(prefix="loom-bench-replica-") as tmp:
        settings = bench_settings(args, Path(tmp))
        store = EmbeddedStore.open(Path(tmp) / "chdb", settings.clickhouse_database, settings.chdb_thread_nice)
        instance = await start_instance(settings, store=store, nats_url=args.replica_of, name="bench-1", only_planes=PLANES)
        try:
            freeze_startup_heap()
            plane = next(p for p in instance.planes if isinstance(p, TasksPlane))
            trace = WakeTrace() if args.trace_wake else None
            if trace is not None:
                trace.install(plane, instance.servers["tasks"].chain)
            token, _ = await bootstrap_org(instance.runtime.identity, instance.runtime.codec, "bench", "main", 3600)
            await register_inboxes(instance.base_url, token)
            print(json.dumps({"grpc": instance.grpc_address("tasks"), "http": instance.base_url, "pid": os.getpid()}), flush=True)
            while await asyncio.to_thread(sys.stdin.readline):
                stamps = dict(trace.stamps) if trace is not None else {}
                if trace is not None:
                    trace.stamps.clear()
                # This is the loop's thread: thread_time is the loop's CPU.
                print(
                    json.dumps({**plane_counts([plane]), "cpu": time.process_time(), "loop_cpu": time.thread_time(), "stamps": stamps}),
                    flush=True,
                )
        finally:
            try:
                await asyncio.wait_for(instance.stop(), 15)
            finally:
                await store.close()


class ReplicaProcess:
    """The bench's side of `replica_process` (or, with `flag="--floor-of"`, of the wake floor's
    far side, `_wake_floor.serve`): starts it, asks for its counters, stops it."""

    def __init__(self, flag: str = "--replica-of") -> None:
        self.flag = flag
        self.proc: asyncio.subprocess.Process | None = None
        self.pid = 0

    async def start(self, nats_url: str) -> dict[str, Any]:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            *sys.argv[1:],
            self.flag,
            nats_url,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            cwd=str(ROOT),
            limit=1 << 26,  # its answer is one JSON line: the --trace-wake stamps of every round run past 64 KiB
        )
        started = await self._answer()
        self.pid = int(started["pid"])
        return started

    async def _answer(self) -> dict[str, Any]:
        assert self.proc is not None and self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            if line.startswith(b"{"):
                return dict(json.loads(line))
        raise RuntimeError("the replica's process exited")

    async def report(self) -> dict[str, Any]:
        """Its counters, CPU seconds (`cpu`, `loop_cpu`) and the wake stamps since the last report."""
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(b"report\n")
        await self.proc.stdin.drain()
        return await self._answer()

    async def stop(self) -> None:
        if self.proc is None or self.proc.returncode is not None:
            return
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), 30)
        except TimeoutError:
            logging.warning("the replica's process did not stop in time")
            self.proc.kill()
            await self.proc.wait()


class DerivedBacklogWatch:
    """Watches the derived consumers while the client runs: when they last had work pending
    (or delivered and not yet acknowledged). After the last complete, the projector may still
    be applying a backlog the client never waited for; a rate that ends at the last complete
    would borrow that time."""

    def __init__(self, js: Any, webhooks: bool, every: float = 0.05) -> None:
        from loom_tasks.events import PROJECTOR_DURABLE
        from loom_tasks.events import STREAM as EVENTS
        from loom_tasks.store.truth import STREAM as STATE
        from loom_tasks.webhooks._deliverer import DURABLE as WEBHOOKS

        self.js, self.every = js, every
        self.consumers = [(STATE, PROJECTOR_DURABLE), *([(EVENTS, WEBHOOKS)] if webhooks else [])]
        self.busy = True
        self.first_idle_after_busy = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _idle(self) -> bool:
        for stream, durable in self.consumers:
            info = await self.js.consumer_info(stream, durable)
            if info.num_pending or info.num_ack_pending:
                return False
        return True

    async def _watch(self) -> None:
        while True:
            idle = await self._idle()
            if idle and self.busy:
                self.first_idle_after_busy = time.perf_counter()
            self.busy = not idle
            await asyncio.sleep(self.every)

    def __enter__(self) -> DerivedBacklogWatch:
        self._task = asyncio.get_running_loop().create_task(self._watch())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()

    async def done_after(self, last_done: float) -> float:
        """Seconds from the client's last complete until the derived consumers were idle."""
        assert self._task is not None
        self._task.cancel()
        waited = False
        while not await self._idle():
            waited = True
            await asyncio.sleep(0.005)
        if waited or self.busy:
            self.first_idle_after_busy = time.perf_counter()
        return max(0.0, self.first_idle_after_busy - last_done)


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (n, ctypes.c_size_t)
        for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")
    ]


def malloc_mb() -> tuple[float, float]:
    """glibc malloc's bytes in use and held free across its arenas, in MiB (0, 0 off glibc)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = _MallInfo2
        mi = libc.mallinfo2()
    except (OSError, AttributeError):
        return 0.0, 0.0
    return (mi.uordblks + mi.hblkhd) / 2**20, mi.fordblks / 2**20


async def memory_sample(store: Any, nats_pid: int, nats_monitor: int) -> dict[str, float]:
    """Where the server process's memory is: RSS, glibc malloc in use and free (fragmentation it
    keeps), Python's allocated blocks and GC-tracked objects (after a collection), chDB's own
    tracked memory; and nats-server's RSS, with the task state stream's messages and subjects
    (tasks not retired yet, and tombstones: `task_state_counts`)."""
    gc.collect()
    state_msgs, state_subjects = task_state_counts(nats_monitor)
    in_use, free = malloc_mb()
    rows = await store.query("SELECT value FROM system.metrics WHERE metric = 'MemoryTracking'")
    return {
        "server_mb": rss_mb(os.getpid()),
        "malloc_in_use_mb": in_use,
        "malloc_free_mb": free,
        "python_blocks_k": sys.getallocatedblocks() / 1000,
        "python_objects_k": len(gc.get_objects()) / 1000,
        "chdb_tracked_mb": int(rows[0]["value"]) / 2**20 if rows else 0.0,
        "nats_mb": rss_mb(nats_pid),
        "task_state_msgs_k": state_msgs / 1000,
        "task_subjects_k": state_subjects / 1000,
    }


def _traced_snapshot() -> tracemalloc.Snapshot:
    gc.collect()
    # The bench's own modules and tracemalloc's bookkeeping are not the server's memory.
    return tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, __file__)])


async def _settled_snapshot(settle: float) -> tracemalloc.Snapshot:
    """A snapshot once the runs' work has drained: the finished tasks retired (the retention
    window and a sweep), nothing in flight. Growth between two such snapshots is kept memory."""
    await asyncio.sleep(settle)
    return _traced_snapshot()


def _growth_sites(before: tracemalloc.Snapshot, after: tracemalloc.Snapshot, top: int) -> list[dict[str, Any]]:
    """The allocation sites (by traceback) whose live memory grew most between the snapshots."""
    sites = []
    for stat in after.compare_to(before, "traceback")[:top]:
        sites.append(
            {
                "kib": round(stat.size_diff / 1024, 1),
                "blocks": stat.count_diff,
                "traceback": [f"{f.filename}:{f.lineno}" for f in stat.traceback],
            }
        )
    return sites


async def soak(
    cfg: dict[str, Any], door: str, args: argparse.Namespace, sample: Callable[[], Awaitable[dict[str, float]]]
) -> dict[str, Any]:
    """Batched lifecycle runs back to back for `--soak-seconds`, the server's memory after each
    (`memory_sample`). The leak check: the last third's median RSS against the middle third's (a
    heap that settles grows early and then holds; a leak keeps growing), with the first third
    beside it; each part of the memory is printed first and last so growth has an address."""
    samples: list[dict[str, float]] = []
    failed = 0
    started = time.monotonic()
    traced: tracemalloc.Snapshot | None = None
    if args.trace_growth:
        tracemalloc.start(args.trace_frames)
    while time.monotonic() - started < args.soak_seconds:
        if args.trace_growth and traced is None and time.monotonic() - started >= args.soak_seconds / 3:
            # The reference is taken after the first third: what a heap allocates while it
            # settles (caches filling, the retention window's first turn) is not the growth sought.
            traced = await _settled_snapshot(args.trace_settle)
        try:
            await run_client({**cfg, "door": door, "batch": args.batch, "phase": "lifecycles", "warmup": 0})
        except RuntimeError:
            # A run that met a retryable 503 (NATS not answering in time at load averages of 60)
            # is counted and the soak goes on: its RSS is what is watched, and the tasks it
            # left are taken by the next run's workers.
            failed += 1
        samples.append({"seconds": round(time.monotonic() - started, 1), **await sample()})
    first, middle, last = by_thirds([x["server_mb"] for x in samples])
    growth = _growth_sites(traced, await _settled_snapshot(args.trace_settle), args.trace_growth) if traced is not None else []
    if args.trace_growth:
        tracemalloc.stop()
    return {
        "growth_sites": growth,
        "seconds": round(time.monotonic() - started, 1),
        "runs": len(samples),
        "failed_runs": failed,
        "samples": samples,
        "server_first_third_mb": first,
        "server_middle_third_mb": middle,
        "server_last_third_mb": last,
        "growth_pct": (last - first) * 100 / first,
        "late_growth_pct": (last - middle) * 100 / middle,
    }


def bench_settings(args: argparse.Namespace, data: Path) -> Any:
    """The replicas' settings (each replica's process builds the same)."""
    from loom_core.settings import Settings

    return Settings(
        data_dir=data,
        jwt_secret="bench-secret-0123456789abcdef0123456789abcdef",
        http_port=0,
        clickhouse_database="loom_bench",
        log_level="WARNING",
        # The bench drives one subject far past a production per-subject budget.
        rate_read_per_minute=10**9,
        rate_write_per_minute=10**9,
        rate_admin_per_minute=10**9,
        plane_overrides={
            "task_webhook_deliver_enabled": not args.no_webhooks,
            **({"task_projection_max_behind": args.max_behind} if args.max_behind is not None else {}),
            **({"task_projection_linger_seconds": args.linger} if args.linger is not None else {}),
            **({"task_terminal_retention_seconds": args.retention} if args.retention is not None else {}),
        },
    )


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    sys.path[:0] = [str(ROOT)]
    from loom_core.bus import NatsServer
    from loom_core.process import freeze_startup_heap
    from loom_core.store.embedded import EmbeddedStore
    from loom_gateway.identity import bootstrap_org
    from loom_runner.embedded import Instance, start_instance
    from loom_tasks.plane import TasksPlane

    with tempfile.TemporaryDirectory(prefix="loom-bench-") as tmp:
        data = Path(tmp)
        settings = bench_settings(args, data)
        async with NatsServer(data / "nats", sync_interval=args.sync_interval, monitor=True) as nats:
            store = EmbeddedStore.open(data / "chdb", settings.clickhouse_database, settings.chdb_thread_nice)
            statements = _count_statements(store) if args.store_stats else None
            instances: list[Instance] = []
            in_process = 1 if args.replicas == 1 or args.replicas_in_process else args.replicas - 1
            for i in range(in_process):
                instances.append(await start_instance(settings, store=store, nats_url=nats.url, name=f"bench-{i}", only_planes=PLANES))
            freeze_startup_heap()
            a = instances[0]
            token, _ = await bootstrap_org(a.runtime.identity, a.runtime.codec, "bench", "main", 3600)
            await register_inboxes(a.base_url, token)
            replica = ReplicaProcess() if in_process < args.replicas else None
            own = await replica.start(nats.url) if replica is not None else None
            doors = ["grpc", "rest"] if args.door == "both" else [args.door]
            batches = sorted({1, args.batch}) if not args.only_batch else [args.batch]
            cfg = {
                "door": args.door,
                "grpc": [i.grpc_address("tasks") for i in instances] + ([own["grpc"]] if own else []),
                "http": [i.base_url for i in instances] + ([own["http"]] if own else []),
                "nats": nats.url,
                "nats_pid": nats.proc.pid if nats.proc is not None else 0,
                "nats_monitor": nats.monitor_port,
                "server_pid": os.getpid(),
                "replica_pids": [replica.pid] if replica is not None else [],
                "token": token,
                "org": "bench",
                "namespace": "main",
                "serial": args.serial,
                "rounds": args.serial_rounds,
                "replicas": args.replicas,
                "n": args.tasks,
                "workers": args.workers,
                "producers": args.producers,
                "batch": args.batch,
                "warmup": args.warmup,
                "wake": args.wake,
            }
            tasks_planes = [next(p for p in i.planes if isinstance(p, TasksPlane)) for i in instances]

            async def counts() -> dict[str, float]:
                """The planes' counters and the servers' CPU (process, loop thread), this process's
                and the replica's (whose wake stamps since the last call go to the trace)."""
                here = {**plane_counts(tasks_planes), "cpu": time.process_time(), "loop_cpu": time.thread_time()}
                there = await replica.report() if replica is not None else {}
                if trace is not None and there:
                    trace.merge(there["stamps"])
                return {k: v + there.get(k, 0) for k, v in here.items()}

            memory: dict[str, Any] = {"server_idle_mb": rss_mb(os.getpid()), "nats_idle_mb": rss_mb(cfg["nats_pid"]), "after_runs_mb": []}
            # CPU time of the event loop's thread (not wall time, which the shared machine inflates).
            profiler = cProfile.Profile(time.thread_time) if args.profile else None
            runs: list[dict[str, Any]] = []
            base: dict[str, Any] | None = None
            seen_statements: dict[str, list[float]] | None = None
            serial: dict[str, Any] | None = None
            wakes: list[dict[str, Any]] = []
            wake_floor: dict[str, float] | None = None
            trace = WakeTrace() if args.trace_wake else None
            if trace is not None:
                for instance, plane in zip(instances, tasks_planes, strict=True):
                    trace.install(plane, instance.servers["tasks"].chain)
            try:
                if args.serial:
                    serial = (await run_client({**cfg, "phase": "serial"}))["serial"]
                    if statements is not None:
                        seen_statements = dict(statements)
                for door in doors if not (args.only_serial or args.only_wake) else []:
                    for batch in batches:
                        if statements is not None:
                            statements.clear()
                        # The baseline right before and right after each Loom run: the run's ratio is
                        # against their mean, so the machine's load (shared, changing by the minute)
                        # hits both sides alike.
                        if base is None:
                            base = (await run_client({**cfg, "phase": "baseline"}))["jetstream"]
                        if profiler:
                            profiler.enable()
                        msgs0 = nats_messages(nats.monitor_port)
                        before, wall0 = await counts(), time.perf_counter()
                        async with SubjectCount(nats.url) if args.subjects else contextlib.nullcontext() as subjects:
                            with DerivedBacklogWatch(instances[0].runtime.bus.js, not args.no_webhooks) as backlog:
                                loom = (await run_client({**cfg, "door": door, "batch": batch, "phase": "lifecycles"}))["loom"]
                                derived_lag = await backlog.done_after(loom["last_done_clock"])
                            if subjects is not None:
                                await asyncio.sleep(0.5)
                        wall = time.perf_counter() - wall0
                        grew = {k: v - before[k] for k, v in (await counts()).items()}
                        cpu, loop_cpu, applied, flushes = grew["cpu"], grew["loop_cpu"], grew["applied"], grew["batches"]
                        nats_msgs = nats_messages(nats.monitor_port) - msgs0
                        if profiler:
                            profiler.disable()
                        if statements is not None:
                            seen_statements = dict(statements)
                        runs.append(
                            {
                                **loom,
                                **(
                                    {"messages_by_kind": {k: v / (args.tasks + args.warmup) for k, v in subjects.counts.most_common()}}
                                    if subjects is not None
                                    else {}
                                ),
                                # The rate counts until the derived work (the projection, the
                                # events, the webhooks) caught up with the last complete: a
                                # backlog left behind is work the run did not pay for.
                                "per_second": loom["lifecycles"] / (loom["seconds"] + derived_lag),
                                "client_per_second": loom["per_second"],
                                "door": door,
                                "jetstream_before": base["per_second"],
                                "loadavg": os.getloadavg()[0],
                                "state_writes_per_projection_batch": applied / max(flushes, 1),
                                # Writes that waited for the projector (LOOM_TASK_PROJECTION_MAX_BEHIND).
                                "writes_held_back": grew["waits"],
                                # Atomic batches of state writes stored, and refused (then written one by one).
                                "atomic_batches": [grew["batches_written"], grew["batches_refused"]],
                                # After the last complete, how long until the projector and the
                                # webhook deliverer had nothing left (their CPU until then is in the server's).
                                "derived_lag_ms": derived_lag * 1000,
                                # CPU of the server processes (every thread) while the client ran.
                                # Messages in and out of the nats-server (the backlog watch's own included).
                                "nats_messages_per_lifecycle": nats_msgs / (args.tasks + args.warmup),
                                "server_cpu_ms_per_lifecycle": cpu * 1000 / (args.tasks + args.warmup),
                                "server_cpu_busy": cpu / wall,
                                # Of which the event loops' own threads (Python); the rest is chDB's and NATS client threads'.
                                "server_loop_cpu_ms_per_lifecycle": loop_cpu * 1000 / (args.tasks + args.warmup),
                            }
                        )
                        memory["after_runs_mb"].append(rss_mb(os.getpid()))
                        base = (await run_client({**cfg, "phase": "baseline"}))["jetstream"]
                        runs[-1]["jetstream_after"] = base["per_second"]
                        runs[-1]["jetstream_per_second"] = (runs[-1]["jetstream_before"] + base["per_second"]) / 2
                        # The same comparison in CPU (this client, the Loom server, the nats-server):
                        # lifecycles per CPU second over messages per CPU second. On a machine this
                        # shared, throughput follows the CPU share a process gets; this does not.
                        lc, bc = runs[-1]["cpu"], base["cpu"]
                        runs[-1]["cpu_ms_per_lifecycle"] = lc["total"] * 1000 / runs[-1]["lifecycles"]
                        runs[-1]["jetstream_cpu_ms_per_message"] = bc["total"] * 1000 / base["messages"]
                        runs[-1]["jetstream_nats_messages_per_message"] = base["nats_messages_per_message"]
                        runs[-1]["ratio_cpu"] = runs[-1]["jetstream_cpu_ms_per_message"] / runs[-1]["cpu_ms_per_lifecycle"]
                # --wake 0: no wake rounds, no wake figures (statistics.median of nothing raises).
                for wake_replicas in range(1, args.replicas + 1) if args.wake > 0 and not args.only_serial else ():
                    before = await counts()
                    if trace is not None:
                        trace.stamps.clear()
                    wake = (await run_client({**cfg, "door": doors[0], "phase": "wake", "wake_replicas": wake_replicas}))["wake"]
                    stamps = wake.pop("stamps")
                    grew = {k: v - before[k] for k, v in (await counts()).items()}  # the replica's stamps merged
                    # The servers' CPU (both replicas, every thread; and their loops' threads) a round.
                    wake["server_cpu_ms_per_round"] = grew["cpu"] * 1000 / args.wake
                    wake["server_loop_cpu_ms_per_round"] = grew["loop_cpu"] * 1000 / args.wake
                    if trace is not None:
                        wake["spans"] = trace.spans(stamps)
                    wakes.append(wake)
                if wakes:
                    far = ReplicaProcess("--floor-of")
                    try:
                        started = await far.start(nats.url)
                        wake_floor = (await run_client({**cfg, "phase": "wake_floor", "floor_grpc": started["grpc"]}))["floor"]
                    finally:
                        await far.stop()
                if args.soak_seconds:
                    memory["soak"] = await soak(cfg, doors[0], args, lambda: memory_sample(store, cfg["nats_pid"], nats.monitor_port))
            finally:
                if replica is not None:
                    await replica.stop()
                for inst in reversed(instances):
                    try:
                        await asyncio.wait_for(inst.stop(), 15)
                    except Exception:  # noqa: BLE001 - a stuck shutdown does not spoil the figures
                        logging.warning("an instance did not stop in time")
                await store.close()
    for run in runs:
        run["ratio"] = run["per_second"] / run["jetstream_per_second"]
    batched = [r for r in runs if r["batch"] > 1] or runs
    result: dict[str, Any] = {
        "machine": machine(),
        "durability": durability(args.sync_interval),
        "sync_interval": args.sync_interval,
        "projection_linger": args.linger,
        "terminal_retention": args.retention,
        "load": load(),
        "replicas": args.replicas,
        "replicas_in_process": args.replicas_in_process,
        "tasks": args.tasks,
        "workers": args.workers,
        "producers": args.producers,
        "runs": runs,
        "wake": wakes,
        "wake_floor": wake_floor,
        "jetstream": base,  # the last run's baseline; each run carries its own
        # The headline: the best batched run over the baseline; unbatched beside it.
        "ratio": max((r["ratio"] for r in batched), default=0.0),
        "ratio_unbatched": max((r["ratio"] for r in runs if r["batch"] == 1), default=0.0),
        "ratio_cpu": max((r["ratio_cpu"] for r in batched), default=0.0),
        "ratio_cpu_unbatched": max((r["ratio_cpu"] for r in runs if r["batch"] == 1), default=0.0),
        "checked": all(r["checked"] for r in runs),
        "serial": serial,
        "memory": memory,
    }
    if args.idle_rss:
        result["memory"]["loom_up_idle"] = await idle_loom_up_rss(args.idle_rss)
    if seen_statements is not None:
        result["store_statements"] = {
            k: {"count": len(v), "seconds": round(sum(v), 3)} for k, v in sorted(seen_statements.items(), key=lambda kv: -sum(kv[1]))
        }
    if profiler:
        result["profile"] = profile_text(profiler, args.profile_sort, args.profile_lines)
        if args.profile_out:
            profiler.dump_stats(args.profile_out)
    return result


def _count_statements(store: Any) -> dict[str, list[float]]:
    """Wrap the store so the run can say which statements it spent the store's time on."""
    seen: dict[str, list[float]] = {}

    def wrap(name: str) -> None:
        original = getattr(store, name)

        async def timed(sql: str, *a: Any, **k: Any) -> Any:
            started = time.perf_counter()
            try:
                return await original(sql, *a, **k)
            finally:
                key = f"{name} {sql.split(' WHERE')[0][:70]}" if name != "insert" else f"insert {sql}"
                seen.setdefault(key, []).append(time.perf_counter() - started)

        setattr(store, name, timed)

    for name in ("insert", "query", "execute"):
        wrap(name)
    return seen


def report(r: dict[str, Any]) -> str:
    lines = [
        f"machine: {r['machine']}; {r['load']} at the end",
        r["durability"],
        f"{r['tasks']} tasks, {r['producers']} producers, {r['workers']} workers, {r['replicas']} replica(s)"
        f"{' (one process)' if r['replicas'] > 1 and r['replicas_in_process'] else ' (a process each)' if r['replicas'] > 1 else ''}; projection linger "
        f"{'the setting' if r['projection_linger'] is None else r['projection_linger']}; finished tasks kept in NATS "
        f"{'the setting' if r['terminal_retention'] is None else r['terminal_retention']} s",
        "each run's ratio is against the jetstream work queue (publish -> fetch -> ack) measured right before and after it",
    ]
    for x in r["runs"]:
        mode = "unbatched" if x["batch"] == 1 else f"batch {x['batch']}"
        lines.append(
            f"loom {x['door']:4s} {mode:9s}: {x['per_second']:7.0f} lifecycles/s  jetstream {x['jetstream_before']:5.0f}|{x['jetstream_after']:5.0f} msg/s  "
            f"ratio {x['ratio']:.3f}  load {x['loadavg']:.1f}  CPU/lifecycle {x['cpu_ms_per_lifecycle']:.2f} ms "
            f"(client {x['cpu']['client'] * 1000 / x['lifecycles']:.2f}, server {x['cpu']['server'] * 1000 / x['lifecycles']:.2f}, "
            f"nats {x['cpu']['nats'] * 1000 / x['lifecycles']:.2f}) vs {x['jetstream_cpu_ms_per_message']:.3f} ms/msg: "
            f"ratio_cpu {x['ratio_cpu']:.3f}  "
            f"nats-server messages in+out {x['nats_messages_per_lifecycle']:.1f} a lifecycle vs {x['jetstream_nats_messages_per_message']:.1f} a message  "
            f"({x['seconds']:.2f} s to the last complete, {x['client_per_second']:.0f}/s as the client saw it; each completed once: {x['checked']}; server {x['server_cpu_ms_per_lifecycle']:.2f} ms CPU/lifecycle, "
            f"{x['state_writes_per_projection_batch']:.0f} writes per projection batch, {x['atomic_batches'][0]} atomic write batches stored and {x['atomic_batches'][1]} refused, {x['writes_held_back']} writes held back for it, "
            f"derived work done {x['derived_lag_ms']:.0f} ms after it)"
        )
        for kind, per in x.get("messages_by_kind", {}).items():
            lines.append(f"    {per:6.2f} a lifecycle  {kind}")
    for wk in r["wake"]:
        where = "across replicas" if wk["across_replicas"] else "same replica"
        lines.append(
            f"wake latency ({where}): p50 {wk['p50_ms']:.1f} ms, p99 {wk['p99_ms']:.1f} ms over {wk['rounds']} rounds "
            f"(the pull's answer alone: p50 {wk['pull_p50_ms']:.1f} ms); server CPU {wk['server_cpu_ms_per_round']:.2f} ms a round "
            f"(of it the loops' threads {wk['server_loop_cpu_ms_per_round']:.2f})"
        )
        for step, p50, n in wk.get("spans", []):
            lines.append(f"    {p50:6.2f} ms p50  {step} ({n} rounds)")
    if r["wake_floor"]:
        lines += _wake_floor.report(r["wake_floor"], r["wake"])
    runs_present = bool(r["runs"])
    if r["serial"]:
        sr = r["serial"]
        lines.append(
            "one call at a time, one worker (Python SDK over REST: task.create, task.pull, task.complete) against raw JetStream "
            "(nats-py: publish, fetch 1, ack_sync), interleaved rounds in one client process:"
        )
        for lr, jr, ratio in zip(sr["loom"], sr["jetstream"], sr["ratios"], strict=True):
            lines.append(
                f"  loom {lr['per_second']:6.0f} lifecycles/s ({lr['cpu_ms']:.2f} ms CPU each: client {lr['cpu_split_ms']['client']:.2f} + "
                f"server {lr['cpu_split_ms']['server']:.2f} + nats {lr['cpu_split_ms']['nats']:.2f})  "
                f"jetstream {jr['per_second']:6.0f}/s ({jr['cpu_ms']:.3f} ms CPU)  ratio {ratio:.3f}  load {lr['loadavg']:.1f}  "
                f"(p50 ms: {', '.join(f'{k} {v:.2f}' for k, v in lr['step_p50_ms'].items())})"
            )
        lines.append(f"ratio one call at a time (median of {len(sr['ratios'])} rounds) {sr['ratio']:.3f}")
    if runs_present:
        lines.append(f"ratio (best batched) {r['ratio']:.3f}; unbatched {r['ratio_unbatched']:.3f}")
    if runs_present:
        lines.append(f"ratio_cpu (best batched) {r['ratio_cpu']:.3f}; unbatched {r['ratio_cpu_unbatched']:.3f}")
    m = r["memory"]
    lines.append(
        f"RSS: bench server (identity + tasks planes, chDB, gateway) idle {m['server_idle_mb']:.0f} MiB, after each run "
        f"{', '.join(f'{x:.0f}' for x in m['after_runs_mb']) or '-'} MiB; nats-server idle {m['nats_idle_mb']:.0f} MiB"
    )
    if "loom_up_idle" in m:
        u = m["loom_up_idle"]
        lines.append(
            f"RSS of an idle `loom up` ({u['settled_seconds']:g} s after it started): {u['loom_up_mb']:.0f} MiB, its nats-server {u['nats_server_mb']:.0f} MiB; "
            + late_growth(u["late_growth_pct"])
        )
        lines.append("  idle RSS every " + f"{IDLE_SAMPLE_SECONDS:g} s: " + " ".join(f"{x:.0f}" for x in u["samples_mb"]) + " MiB")
    if "soak" in m:
        k = m["soak"]
        lines.append(
            f"soak: {k['runs']} batched runs ({k['failed_runs']} ended by a retryable error) over {k['seconds']:.0f} s; server RSS median by thirds "
            f"{k['server_first_third_mb']:.0f} / {k['server_middle_third_mb']:.0f} / {k['server_last_third_mb']:.0f} MiB "
            f"({k['growth_pct']:+.1f}% overall, {late_growth(k['late_growth_pct'])})"
        )
        for site in k.get("growth_sites", []):
            lines.append(f"  grew {site['kib']:+.0f} KiB in {site['blocks']:+d} blocks at " + " <- ".join(reversed(site["traceback"][-4:])))
        lines.append("  server RSS after each run: " + " ".join(f"{x['server_mb']:.0f}" for x in k["samples"]) + " MiB")
        a, b = k["samples"][0], k["samples"][-1]
        lines += [f"  {key:>17}: {a[key]:8.1f} -> {b[key]:8.1f}" for key in a if key != "seconds"]
    if "store_statements" in r:
        lines += ["store statements during the last lifecycle run (count, seconds):"]
        lines += [f"  {v['count']:6d} {v['seconds']:8.2f}  {k}" for k, v in r["store_statements"].items()]
    if "profile" in r:
        lines += ["", r["profile"]]
    return "\n".join(lines)


def run(main: Coroutine[Any, Any, T]) -> T:
    """On uvloop, as `loom up` runs the servers."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop ships with the servers' dependencies
        return asyncio.run(main)
    return uvloop.run(main)


def by_thirds(values: list[float]) -> tuple[float, float, float]:
    """The medians of the first, middle and last thirds of `values` (the middle one is the first
    when there are too few samples for three)."""
    third = max(1, len(values) // 3)
    first, middle, last = (statistics.median(part) for part in (values[:third], values[third:-third] or values[:third], values[-third:]))
    return first, middle, last


def late_growth(late_growth_pct: float) -> str:
    """A leak keeps growing after the heap settled: the last third's RSS against the middle one's."""
    verdict = "grows (look for a leak)" if late_growth_pct > 5 else "holds"
    return f"{late_growth_pct:+.1f}% from the middle third to the last: {verdict}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-n", "--tasks", type=int, default=2000, help="tasks per measured run (default 2000)")
    p.add_argument("-w", "--workers", type=int, default=16, help="concurrent workers (default 16)")
    p.add_argument("-p", "--producers", type=int, default=8, help="concurrent producers (default 8)")
    p.add_argument("--batch", type=int, default=100, help="items per batch call in the batched run (default 100; 1: unbatched only)")
    p.add_argument("--only-batch", action="store_true", help="run only the batched lifecycles (not the unbatched run beside them)")
    p.add_argument("--serial", type=int, default=300, help="lifecycles per round one call at a time through the SDK (default 300; 0: none)")
    p.add_argument("--serial-rounds", type=int, default=5, help="interleaved rounds of the one-call-at-a-time comparison (default 5)")
    p.add_argument("--only-serial", action="store_true", help="run only the one-call-at-a-time comparison")
    p.add_argument("--soak-seconds", type=float, default=0, help="then batched runs back to back this long, RSS after each (leak check)")
    p.add_argument(
        "--trace-growth",
        type=int,
        default=0,
        metavar="N",
        help="with --soak-seconds: trace allocations (tracemalloc) and print the N sites whose live memory grew most "
        "from the soak's first third to its end (slows the server)",
    )
    p.add_argument(
        "--trace-settle",
        type=float,
        default=75.0,
        help="seconds of quiet before each traced snapshot, so finished tasks are retired and nothing is in flight "
        "(default 75: --retention 60 plus a sweep)",
    )
    p.add_argument("--trace-frames", type=int, default=12, help="frames kept per traced allocation (default 12)")
    p.add_argument(
        "--idle-rss", type=float, default=0, metavar="SECONDS", help="also start a plain `loom up`, read its RSS this long after it started"
    )
    p.add_argument("--door", choices=("grpc", "rest", "both"), default="both", help="how the client calls Loom (default both)")
    p.add_argument(
        "--replicas",
        type=int,
        default=1,
        choices=(1, 2),
        help="Loom replicas (default 1); the second runs in a process of its own, as `loom serve` runs one",
    )
    p.add_argument(
        "--replicas-in-process",
        action="store_true",
        help="with --replicas 2: both replicas in the bench's server process, on its one event loop (the bench before session 21)",
    )
    p.add_argument("--wake", type=int, default=200, help="wake-latency rounds (default 200)")
    p.add_argument("--only-wake", action="store_true", help="run only the wake rounds (and --serial's, unless 0)")
    p.add_argument(
        "--trace-wake", action="store_true", help="stamp each wake round's steps in the server (bench/_wake_trace.py) and print their p50s"
    )
    p.add_argument("--warmup", type=int, default=200, help="unmeasured lifecycles first (default 200)")
    p.add_argument("--no-webhooks", action="store_true", help="turn the webhook deliverer off (it reads every event)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_durability_argument(p)
    p.add_argument(
        "--linger",
        type=float,
        default=None,
        help="LOOM_TASK_PROJECTION_LINGER_SECONDS for the run (default: the setting's; 0: one projection insert per fetch)",
    )
    p.add_argument(
        "--retention",
        type=float,
        default=None,
        help="LOOM_TASK_TERMINAL_RETENTION_SECONDS for the run (default: the setting's, 900 s): a finished task stays in "
        "NATS and in the sweep's index this long, so a soak shorter than it sees memory grow by design",
    )
    p.add_argument(
        "--max-behind",
        type=int,
        default=None,
        help="LOOM_TASK_PROJECTION_MAX_BEHIND for the run (default: the setting's; 0: writes never wait for the projector)",
    )
    p.add_argument(
        "--subjects",
        action="store_true",
        help="count the lifecycle run's NATS messages by kind (a subscriber on '>' in the server process: its copies add to in+out)",
    )
    p.add_argument("--store-stats", action="store_true", help="count the store statements of the lifecycle run")
    add_profile_arguments(p, "the lifecycle run", lines=40)
    p.add_argument("--profile-out", metavar="FILE", help="also write the cProfile stats to FILE (for pstats / snakeviz)")
    p.add_argument("--client", metavar="CONFIG", help=argparse.SUPPRESS)
    p.add_argument("--replica-of", metavar="NATS_URL", help=argparse.SUPPRESS)
    p.add_argument("--floor-of", metavar="NATS_URL", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.client:
        sys.path[:0] = [str(ROOT)]
        print(json.dumps(asyncio.run(_client(json.loads(args.client)))))
        return 0
    logging.basicConfig(level=logging.WARNING)
    from loom_core.process import tune_gc

    tune_gc()  # the servers' processes are set up as `loom up`'s (loom_core/process.py); the client's is not
    if args.replica_of:
        run(replica_process(args))
        return 0
    if args.floor_of:
        run(_wake_floor.serve(args.floor_of))
        return 0
    result = run(bench(args))
    print(json.dumps(result, indent=2) if args.json else report(result))
    return 0 if result["checked"] else 1


if __name__ == "__main__":
    exit_process(main())

"""The pull wake-up reader alone: the FastStream subscriber (`bus.consume(WAKE, ...)`, how the
wake hub read `loom.task_wake.>` from issue 7 to session 20) against the nats-py callback it
reads through now (`bus.listen(WAKE, hub.apply)`, consumers/pushes.py), both feeding the same
`WakeHub.apply`, on one nats-server, measured in the same run, interleaved.

    .venv/bin/python bench/wake_reader.py [--rounds 300] [--burst 5000] [--repeat 3]

- latency: publish one wake-up from another connection, wait until the hub applied it (its
  queue is notified): p50 / p99 over `--rounds`.
- CPU: process CPU per message while a burst of `--burst` wake-ups is applied (publisher
  and reader in this process, so both paths pay the same publishing cost).
Prints each path's figures and new/old ratios (< 1: the new path is cheaper).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import nats
from _machine import add_durability_argument, durability, load, machine  # bench/ is on sys.path when a script runs
from loom_core import fastjson
from loom_core.bus import NatsServer, connect_bus
from loom_tasks.consumers.layout import WAKE
from loom_tasks.domain.model import TaskRow
from loom_tasks.service.wake import WakeHub
from nats.aio.client import Client as NATS

SUBJECT = "loom.task_wake.acme.bot"


async def _nothing(org: str, inbox: str, kinds: Sequence[str], limit: int) -> list[TaskRow]:
    return []


def _payload(i: int) -> bytes:
    row = {"org": "acme", "task_id": f"t{i}", "inbox": "bot", "namespace": "ns", "kind": "chore", "version": 1}
    return fastjson.dumps({"src": "elsewhere", "ops": [{"op": "ready", "row": row, "rev": i}]})


async def measure(
    start_reader: Callable[[WakeHub], Awaitable[Callable[[], Awaitable[None]]]], pub: NATS, rounds: int, burst: int
) -> tuple[float, float, float]:
    hub = WakeHub(None, _nothing, 60.0)
    q = hub.queue("acme", "bot")
    stop = await start_reader(hub)
    lat: list[float] = []
    for i in range(rounds):
        woken = asyncio.ensure_future(q.wait(5.0))
        await asyncio.sleep(0)
        t0 = time.perf_counter()
        await pub.publish(SUBJECT, _payload(i))
        await pub.flush()
        assert await woken
        lat.append((time.perf_counter() - t0) * 1000)
        q.rows.clear()
    q.rows.clear()
    c0 = time.process_time()
    for i in range(burst):
        await pub.publish(SUBJECT, _payload(i))
    await pub.flush()
    while len(q.rows) < burst:
        await q.wait(5.0)
    cpu_us = (time.process_time() - c0) / burst * 1e6
    await stop()
    lat.sort()
    return statistics.median(lat), lat[int(len(lat) * 0.99) - 1], cpu_us


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--burst", type=int, default=5000)
    ap.add_argument("--repeat", type=int, default=3)
    add_durability_argument(ap)
    a = ap.parse_args()
    print(f"machine: {machine()}")
    # Wake-ups are core NATS messages (no JetStream write): the setting is stated, it does not enter the figures.
    print(durability(a.sync_interval))
    with tempfile.TemporaryDirectory() as tmp:
        async with NatsServer(Path(tmp) / "nats", sync_interval=a.sync_interval) as srv:
            bus = await connect_bus(srv.url)
            pub = await nats.connect(srv.url)

            async def old(hub: WakeHub) -> Callable[[], Awaitable[None]]:
                async def on_wake(msg: object) -> None:
                    hub.apply(msg.raw_message.subject, msg.body)  # type: ignore[attr-defined]

                c = await bus.consume(WAKE, on_wake)
                await bus.nc.flush()
                return c.stop

            async def new(hub: WakeHub) -> Callable[[], Awaitable[None]]:
                c = await bus.listen(WAKE, hub.apply)
                await bus.nc.flush()
                return c.stop

            got: dict[str, list[tuple[float, float, float]]] = {"old": [], "new": []}
            for _ in range(a.repeat):
                for name, reader in (("old", old), ("new", new)):
                    got[name].append(await measure(reader, pub, a.rounds, a.burst))
            await pub.close()
            await bus.close()
    med = {k: tuple(statistics.median(r[i] for r in v) for i in range(3)) for k, v in got.items()}
    for k in ("old", "new"):
        p50, p99, cpu = med[k]
        label = "FastStream subscriber (before)" if k == "old" else "Bus.listen (now)"
        print(f"{label:28} wake applied p50 {p50:.3f} ms  p99 {p99:.3f} ms  CPU {cpu:.1f} us/message")
    o, n = med["old"], med["new"]
    print(
        f"ratio new/old: p50 {n[0] / o[0]:.2f}  p99 {n[1] / o[1]:.2f}  CPU {n[2] / o[2]:.2f}  (median of {a.repeat} interleaved runs; {load()})"
    )


if __name__ == "__main__":
    asyncio.run(main())

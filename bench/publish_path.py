"""What a JetStream publish costs sent through FastStream's public API instead of nats-py's.

    .venv/bin/python bench/publish_path.py [-n 5000] [--rounds 5]

`core/loom_core/bus/jspublish.py` sends each publish with nats-py's `Client.publish(subject,
data, reply=<inbox>.<token>, headers)` and matches the stream's answer by token. FastStream's
public `broker.publish(data, subject, headers=..., reply_to=<inbox>.<token>)` (no `stream`: its
JetStream path is nats-py's one-request-per-message `js.publish`) sends the same request through
its publish command, middlewares and codec. Both are measured here against one nats-server, on
one `Replies` inbox, alternating in the same minutes: one publish at a time and 64 at once,
publishes per second and this process's CPU per publish (the figure a shared machine's load
moves least), and the headers FastStream adds to every stored message.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import resource
import statistics
import time
from collections.abc import Awaitable, Callable

from _machine import stream_bus  # bench/ is on sys.path when a script runs
from faststream.nats import NatsBroker
from loom_core.bus import jspublish
from nats.aio.client import Client
from nats.aio.msg import Msg

STREAM = "BENCH_PUBLISH"
BODY = b'{"task_id":"t-0123456789","state":"claimed","fence":12}'
Send = Callable[[Client, NatsBroker, str, bytes, str, dict[str, str]], Awaitable[None]]
_tokens = itertools.count()


async def through_nats_py(nc: Client, broker: NatsBroker, subject: str, data: bytes, reply: str, headers: dict[str, str]) -> None:
    await nc.publish(subject, data, reply, headers)


async def through_faststream(nc: Client, broker: NatsBroker, subject: str, data: bytes, reply: str, headers: dict[str, str]) -> None:
    await broker.publish(data, subject, headers=headers, reply_to=reply)


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def one_round(
    send: Send, nc: Client, broker: NatsBroker, replies: jspublish.Replies, n: int, concurrency: int
) -> tuple[float, float]:
    """n publishes, each answered by the stream: (publishes per second, CPU microseconds per publish)."""
    loop = asyncio.get_running_loop()
    gate = asyncio.Semaphore(concurrency)

    async def publish(i: int) -> None:
        async with gate:
            token = f"b{next(_tokens)}"
            answer: asyncio.Future[Msg] = loop.create_future()
            replies.waiting[token] = answer
            await send(nc, broker, f"bench.publish.{i % 16}", BODY, replies.prefix + token, {"Nats-Msg-Id": f"{token}-{time.time_ns()}"})
            await asyncio.wait_for(answer, 30)

    started, cpu = time.perf_counter(), cpu_seconds()
    await asyncio.gather(*(publish(i) for i in range(n)))
    return n / (time.perf_counter() - started), (cpu_seconds() - cpu) / n * 1e6


async def bench(args: argparse.Namespace) -> None:
    async with stream_bus(STREAM, ["bench.publish.>"]) as bus:
        replies = await jspublish.replies(bus.nc)
        sends: dict[str, Send] = {"nats-py Client.publish": through_nats_py, "FastStream broker.publish": through_faststream}
        for concurrency in (1, 64):
            got: dict[str, list[tuple[float, float]]] = {name: [] for name in sends}
            for _ in range(args.rounds):
                for name, send in sends.items():  # alternating, so both see the same minutes' load
                    got[name].append(await one_round(send, bus.nc, bus.broker, replies, args.n, concurrency))
            for name, rounds in got.items():
                rate = statistics.median(r for r, _ in rounds)
                cpu = statistics.median(c for _, c in rounds)
                print(f"{concurrency:>2} at once, {name:<26} {rate:7.0f} publishes/s  {cpu:6.1f} us CPU/publish (median of {args.rounds})")
        stored = await bus.js.get_last_msg(STREAM, "bench.publish.1")
        added = sorted(set(stored.headers or {}) - {"Nats-Msg-Id"})
        print(f"headers FastStream adds to each stored message: {', '.join(added) or 'none'}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-n", type=int, default=5000, help="publishes per round (default 5000)")
    p.add_argument("--rounds", type=int, default=5, help="rounds per way and concurrency (default 5)")
    asyncio.run(bench(p.parse_args()))


if __name__ == "__main__":
    main()

"""How soon a batch consumer's handler sees a lone message: Loom's prompt fetch loop against
FastStream's own batch pull subscriber.

    .venv/bin/python bench/prompt_batch.py [--rounds 15] [--timeouts 0.05,0.5]

A batch consumer (one handler call per fetch) declared through `Bus.consume` runs
`core/loom_core/bus/batched.py`'s loop (`PromptBatchSubscriber`: what is ready now, else one
lingering pull request for one message). FastStream's public option for the same is
`PullSub(batch_size, timeout, batch=True)`, which fetches until the batch is full or `timeout`
passes. Each round publishes one message to an idle consumer (after a random 0.15-0.35 s pause)
and times publish -> handler; p50, p90 and the worst round per way, against one nats-server.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time

from _machine import stream_bus  # bench/ is on sys.path when a script runs
from faststream.nats import PullSub
from faststream.nats.message import NatsBatchMessage
from loom_core.bus import AckPolicy, Bus, Consumer

STREAM = "BENCH_PROMPT"
BATCH = 100
#: Longest a round waits for its message (a message can wait out a 30 s ack wait).
ROUND_LIMIT_SECONDS = 120.0


async def lone_messages(bus: Bus, subject: str, arrived: asyncio.Event, rounds: int) -> list[float]:
    """Milliseconds from publish to handler, one lone message per round, sorted."""
    took: list[float] = []
    for i in range(rounds):
        await asyncio.sleep(random.uniform(0.15, 0.35))
        arrived.clear()
        started = time.perf_counter()
        await bus.js.publish(subject, str(i).encode())
        await asyncio.wait_for(arrived.wait(), ROUND_LIMIT_SECONDS)
        took.append((time.perf_counter() - started) * 1000)
    return sorted(took)


async def bench(args: argparse.Namespace) -> None:
    async with stream_bus(STREAM, ["bench.prompt.>"]) as bus:
        arrived = asyncio.Event()

        async def handler(batch: NatsBatchMessage) -> None:
            arrived.set()

        ways: list[tuple[str, str]] = []
        for n, timeout in enumerate(float(t) for t in args.timeouts.split(",")):
            subject = f"bench.prompt.stock{n}"
            subscriber = bus.broker.subscriber(
                subject,
                stream=STREAM,
                durable=f"stock{n}",
                pull_sub=PullSub(batch_size=BATCH, timeout=timeout, batch=True),
                ack_policy=AckPolicy.NACK_ON_ERROR,
                no_reply=True,
                persistent=False,
            )
            subscriber(handler)
            await subscriber.start()
            ways.append((f"FastStream PullSub(batch=True, timeout={timeout})", subject))
        prompt = Consumer(
            "prompt",
            "bench.prompt.loom",
            stream=STREAM,
            durable="prompt",
            ack=AckPolicy.NACK_ON_ERROR,
            pull_batch=BATCH,
            batch=True,
        )
        consuming = await bus.consume(prompt, handler)
        ways.append(("Loom PromptBatchSubscriber (Bus.consume)", prompt.subject))
        for name, subject in ways:
            took = await lone_messages(bus, subject, arrived, args.rounds)
            p90 = took[min(len(took) - 1, int(len(took) * 0.9))]
            print(f"{name:<46} publish -> handler p50 {statistics.median(took):8.1f} ms  p90 {p90:8.1f} ms  worst {took[-1]:8.1f} ms")
        await consuming.stop()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=15, help="lone messages per way (default 15)")
    p.add_argument("--timeouts", default="0.05,0.5", help="FastStream PullSub timeouts to measure, comma-separated (default 0.05,0.5)")
    asyncio.run(bench(p.parse_args()))


if __name__ == "__main__":
    main()

"""`bench/tasks.py`'s wake floor: what the parts a wake cannot do without cost on this machine,
measured in the same run, after the same pause as each wake round.

A wake across replicas is, at the least: the create's request in and the pull's answer out (one
gRPC round trip between two processes), the create's state write and the claim's (two JetStream
writes, the second right after the first's activity, with the run's durability), and the
wake-up from one replica to the other (one core NATS hop; on one replica there is none). Each part is timed here without Loom:

- a gRPC round trip: a unary call with a 100-byte message to an echo server in a process of its
  own (grpc.aio on uvloop, as Loom's planes serve), from this client (asyncio, as the wake's);
- a JetStream write: a publish to a file-backed stream on the bench's own nats-server (its
  sync_interval is the run's), acked; then a second one right after it;
- a NATS hop: a core NATS message from this client to the echo process, stamped on arrival with
  CLOCK_MONOTONIC (the same clock in every process of the machine).

Each round waits the wake round's pause first, as every process in a wake round wakes from
idle: on a VM, a thread woken from idle costs about 0.1 ms, and a gRPC call crosses several
threads on each side (measured in session 27: an echo's round trip is 0.5 ms back to back and
1.5 ms after a 30 ms pause; a raw TCP echo's 0.06 and 0.27 ms).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import time
from typing import Any

ECHO_METHOD = "/bench.Floor/Echo"
HOP_SUBJECT = "bench.floor.hop"
WRITE_STREAM = "BENCH_FLOOR"
WRITE_SUBJECT = "bench.floor.write"


async def serve(nats_url: str) -> None:
    """The far side (`bench/tasks.py --floor-of NATS_URL`): the echo server and the hop's
    receiver; prints its gRPC address and pid as a JSON line, runs until its stdin ends."""
    import grpc
    import nats

    async def echo(request: bytes, _context: Any) -> bytes:
        return request

    server = grpc.aio.server()
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("bench.Floor", {"Echo": grpc.unary_unary_rpc_method_handler(echo)}),)
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    nc = await nats.connect(nats_url)

    async def arrived(msg: Any) -> None:
        at = time.perf_counter()
        await msg.respond(json.dumps(at).encode())

    await nc.subscribe(HOP_SUBJECT, cb=arrived)
    await nc.flush()
    print(json.dumps({"grpc": f"127.0.0.1:{port}", "pid": os.getpid()}), flush=True)
    await asyncio.to_thread(sys.stdin.readline)
    await nc.close()
    await server.stop(0)


async def measure(nats_url: str, grpc_address: str, rounds: int, pause: float) -> dict[str, float]:
    """The parts' p50s (ms) over `rounds` rounds, each after `pause` seconds of idle, and their
    sum as a wake needs them: one round trip, two writes, one hop."""
    import grpc
    import nats
    from nats.js.api import StorageType, StreamConfig

    trips: list[float] = []
    first: list[float] = []
    second: list[float] = []
    hops: list[float] = []
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    await js.add_stream(StreamConfig(name=WRITE_STREAM, subjects=[WRITE_SUBJECT], storage=StorageType.FILE, max_msgs=1000))
    try:
        async with grpc.aio.insecure_channel(grpc_address) as channel:
            echo: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(ECHO_METHOD)
            body = b"x" * 100
            for _ in range(10):  # connections up, code paths warm
                await echo(body)
                await js.publish(WRITE_SUBJECT, body)
                await nc.request(HOP_SUBJECT, b"", timeout=5)
            for _ in range(rounds):
                await asyncio.sleep(pause)
                t = time.perf_counter()
                await echo(body)
                trips.append(time.perf_counter() - t)
                await asyncio.sleep(pause)
                t = time.perf_counter()
                await js.publish(WRITE_SUBJECT, body)
                t2 = time.perf_counter()
                await js.publish(WRITE_SUBJECT, body)
                first.append(t2 - t)
                second.append(time.perf_counter() - t2)
                await asyncio.sleep(pause)
                t = time.perf_counter()
                answer = await nc.request(HOP_SUBJECT, b"", timeout=5)
                hops.append(float(json.loads(answer.data)) - t)
    finally:
        await js.delete_stream(WRITE_STREAM)
        await nc.close()
    p50 = {
        name: statistics.median(values) * 1000
        for name, values in (("grpc_round_trip_ms", trips), ("write_after_pause_ms", first), ("write_next_ms", second), ("hop_ms", hops))
    }
    return {**p50, "sum_ms": sum(p50.values()), "rounds": rounds, "pause_ms": pause * 1000}


def report(floor: dict[str, float], wakes: list[dict[str, Any]]) -> list[str]:
    lines = [
        f"the wake's floor on this machine (each part without Loom, after the same {floor['pause_ms']:.0f} ms pause, p50 over "
        f"{floor['rounds']:.0f} rounds): a gRPC round trip {floor['grpc_round_trip_ms']:.2f} ms + a JetStream write "
        f"{floor['write_after_pause_ms']:.2f} ms + the next write {floor['write_next_ms']:.2f} ms + a NATS hop {floor['hop_ms']:.2f} ms "
        f"= {floor['sum_ms']:.2f} ms"
    ]
    for wk in wakes:
        # On one replica the wake-up is handed over in its own process: no hop.
        where, least = (
            ("across replicas", floor["sum_ms"]) if wk["across_replicas"] else ("same replica", floor["sum_ms"] - floor["hop_ms"])
        )
        lines.append(f"  wake ({where}) p50 {wk['p50_ms']:.2f} ms: {wk['p50_ms'] / least:.2f}x its floor of {least:.2f} ms")
    return lines

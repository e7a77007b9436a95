"""The gateway -> plane hop's CPU per call, grpc.aio between two processes (uvloop, the planes'
channel options, the gateway's metadata, `--concurrency` calls in flight), three ways:
- `unary`: an empty unary call per op call (the cluster's hop before session 19, the floor
  bench/cluster.py prints);
- `stream`: one long-lived bidirectional stream (loom.relay.v1.RelayService/Relay) carrying one
  call per message each way (the call's id, op name, metadata and request bytes; the reply's id
  and response bytes), the server running each call in a task of its own;
- `batched`: the same stream, each message carrying every call (or reply) waiting to be sent.
Modes alternate, `--runs` of each, each in a fresh pair of processes; CPU (user + system) of each
process per call, and the medians.

    .venv/bin/python bench/relay_stream.py [--calls 3000] [--concurrency 16] [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _machine import load, machine  # bench/ is on sys.path when a script runs
from cluster import drive, echo_pair, serve_echo
from loom_api.relay.v1 import relay_pb2
from loom_core.runtime import GRPC_LEAN_OPTIONS

MODES = ("unary", "stream", "batched")
RELAY_PATH = "/loom.relay.v1.RelayService/Relay"
# The gateway's metadata for a REST call (a token of a real token's size).
METADATA = {"authorization": "Bearer " + "x" * 900, "x-loom-agent": "bench", "x-loom-transport": "rest"}


async def serve() -> None:
    """The echo server of `cluster.serve_echo`, which also serves a relay stream that answers each
    call's request bytes as they came."""

    async def relay(calls: AsyncIterator[relay_pb2.RelayCalls], context: grpc.aio.ServicerContext[object, object]) -> None:
        replies: asyncio.Queue[relay_pb2.RelayReply] = asyncio.Queue()
        batched = dict(context.invocation_metadata() or ()).get("x-bench-batched") == "1"
        tasks: set[asyncio.Task[None]] = set()

        async def answer(call: relay_pb2.RelayCall) -> None:
            replies.put_nowait(relay_pb2.RelayReply(id=call.id, response=call.request))

        async def read() -> None:
            async for message in calls:
                for call in message.calls:
                    task = asyncio.create_task(answer(call))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)

        reader = asyncio.create_task(read())
        try:
            while True:
                out = [await replies.get()]
                while batched and not replies.empty():
                    out.append(replies.get_nowait())
                await context.write(relay_pb2.RelayReplies(replies=out))
        finally:
            reader.cancel()

    await serve_echo(
        grpc.method_handlers_generic_handler(
            "loom.relay.v1.RelayService",
            {
                "Relay": grpc.stream_stream_rpc_method_handler(
                    relay,
                    request_deserializer=relay_pb2.RelayCalls.FromString,
                    response_serializer=relay_pb2.RelayReplies.SerializeToString,
                )
            },
        )
    )


async def client(port: int, mode: str, n: int, concurrency: int) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=list(GRPC_LEAN_OPTIONS)) as ch:
        if mode == "unary":
            method: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = ch.unary_unary("/bench.Echo/Echo")
            md = tuple(METADATA.items())

            async def one() -> object:
                return await method(b"", metadata=md, timeout=60)

        else:
            stream = ch.stream_stream(
                RELAY_PATH,
                request_serializer=relay_pb2.RelayCalls.SerializeToString,
                response_deserializer=relay_pb2.RelayReplies.FromString,
            )(metadata=(("x-bench-batched", "1" if mode == "batched" else "0"),))
            pending: dict[int, asyncio.Future[bytes]] = {}
            outbox: asyncio.Queue[relay_pb2.RelayCall] = asyncio.Queue()
            ids = iter(range(1, 1 << 62))

            async def write() -> None:
                while True:
                    out = [await outbox.get()]
                    while mode == "batched" and not outbox.empty():
                        out.append(outbox.get_nowait())
                    await stream.write(relay_pb2.RelayCalls(calls=out))

            async def read() -> None:
                while True:
                    message = await stream.read()
                    if message is grpc.aio.EOF:
                        return
                    assert isinstance(message, relay_pb2.RelayReplies)
                    for reply in message.replies:
                        pending.pop(reply.id).set_result(reply.response)

            tasks = [asyncio.create_task(write()), asyncio.create_task(read())]

            async def one() -> object:
                call_id = next(ids)
                future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
                pending[call_id] = future
                outbox.put_nowait(relay_pb2.RelayCall(id=call_id, op="auth.whoami", metadata=METADATA, request=b""))
                return await future

        for _ in range(200):
            await one()
        t0 = os.times()
        wall = await drive(n, concurrency, one)
        t1 = os.times()
        if mode != "unary":
            for task in tasks:
                task.cancel()
            stream.cancel()
    print(json.dumps({"rps": n / wall, "client_us": 1e6 * (t1.user + t1.system - t0.user - t0.system) / n}), flush=True)


async def one_run(mode: str, calls: int, concurrency: int) -> dict[str, float]:
    client_args = ["--client", "--mode", mode, "--calls", str(calls), "-c", str(concurrency)]
    return await echo_pair(__file__, "--serve", client_args, calls)


async def main(args: argparse.Namespace) -> None:
    print(machine())
    results: dict[str, list[dict[str, float]]] = {m: [] for m in MODES}
    for run in range(args.runs):
        for mode in MODES:
            r = await one_run(mode, args.calls, args.concurrency)
            results[mode].append(r)
            print(
                f"run {run + 1} {mode:8} {load()}: {r['rps']:6.0f} calls/s,"
                f" client {r['client_us']:4.0f} µs, server {r['server_us']:4.0f} µs CPU per call",
                flush=True,
            )
    print(f"medians ({args.calls} calls a run, {args.concurrency} in flight):")
    for mode in MODES:
        rs = results[mode]
        print(
            f"  {mode:8} client {statistics.median(r['client_us'] for r in rs):4.0f} µs,"
            f" server {statistics.median(r['server_us'] for r in rs):4.0f} µs,"
            f" {statistics.median(r['rps'] for r in rs):6.0f} calls/s"
        )


def cli() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("-c", "--concurrency", type=int, default=16)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--client", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--mode", choices=MODES, default="unary", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        uvloop.run(serve())
    elif args.client is not None:
        uvloop.run(client(args.client, args.mode, args.calls, args.concurrency))
    else:
        uvloop.run(main(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(cli())

"""The floor of a wake round's two gRPC legs: a bare grpc.aio unary call between two processes
on this machine (uvloop on both ends, as `loom` and bench/tasks.py run), one leg at a time.

The client stamps CLOCK_MONOTONIC (`time.perf_counter`, the same clock in every process of the
machine) before each call and when its answer is in; the server stamps its handler's entry and
its return and answers them. So "in" is client sent -> the handler runs (bench/tasks.py
--trace-wake's "in: client sent -> the plane's chain") and "out" is the handler returns -> the
client has the answer ("out: pull answered -> client has it"). The client calls as bench/tasks.py's
does (a default channel, the bench's metadata, a request of a create's size); the server is
served as a plane is (`PlaneServer.start`'s options, `loom_runner`'s GRPC_EXPERIMENTS), with a
pass-through interceptor (`--interceptor`) or without. `--raw` sends the same bytes over a bare
asyncio TCP stream between the same two processes instead: the machine's own floor for one
message each way after the same idle wait, which gRPC's legs stand on.

    .venv/bin/python bench/grpc_legs.py [--calls 2000] [--interceptor | --raw] [--gap-ms 0]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import statistics
import struct
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import uvloop

METHOD = "/bench.Legs/Call"


class PassThrough(grpc.aio.ServerInterceptor):
    """An interceptor that wraps nothing: what grpc.aio's interceptor machinery costs a call."""

    async def intercept_service(
        self, continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Any]], details: grpc.HandlerCallDetails
    ) -> Any:
        return await continuation(details)


def stamped(request: bytes, entered: float) -> bytes:
    """The answer both servers give: the handler's entry and return, then the request's bytes."""
    return struct.pack("dd", entered, time.perf_counter()) + request[: max(0, len(request) - 16)]


async def serve(interceptor: bool) -> None:
    from loom_core.runtime import GRPC_LEAN_OPTIONS, MAX_MESSAGE_BYTES

    async def call(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        entered = time.perf_counter()
        context.invocation_metadata()
        return stamped(request, entered)

    server = grpc.aio.server(
        interceptors=[PassThrough()] if interceptor else None,
        options=[("grpc.so_reuseport", 0), ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES), *GRPC_LEAN_OPTIONS],
    )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("bench.Legs", {"Call": grpc.unary_unary_rpc_method_handler(call)}),)
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(json.dumps({"port": port}), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    await server.stop(0)


async def serve_raw() -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                (size,) = struct.unpack("I", await reader.readexactly(4))
                request = await reader.readexactly(size)
                body = stamped(request, time.perf_counter())
                writer.write(struct.pack("I", len(body)) + body)

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    print(json.dumps({"port": server.sockets[0].getsockname()[1]}), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    server.close()


async def raw_caller(port: int) -> Callable[[bytes], Awaitable[bytes]]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)

    async def call(body: bytes) -> bytes:
        writer.write(struct.pack("I", len(body)) + body)
        (size,) = struct.unpack("I", await reader.readexactly(4))
        return await reader.readexactly(size)

    return call


async def client(port: int, calls: int, gap: float, raw: bool) -> None:
    md = (("authorization", "Bearer " + "t" * 400), ("x-loom-namespace", "bench"), ("x-loom-agent", "bench"))
    body = b"x" * 160  # a CreateTaskRequest's size, about
    ins: list[float] = []
    outs: list[float] = []
    trips: list[float] = []
    async with contextlib.AsyncExitStack() as resources:
        # The raw client opens no gRPC channel: grpc.aio's threads would run beside it.
        if raw:
            method = await raw_caller(port)
        else:
            channel = await resources.enter_async_context(grpc.aio.insecure_channel(f"127.0.0.1:{port}"))
            unary: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(METHOD)
            method = functools.partial(unary, metadata=md)
        for _ in range(200):
            await method(body)
        t0 = os.times()
        for _ in range(calls):
            if gap:
                await asyncio.sleep(gap)  # the wake round's idle wait before its create
            sent = time.perf_counter()
            answer = await method(body)
            got = time.perf_counter()
            entered, returned = struct.unpack("dd", answer[:16])
            ins.append(entered - sent)
            outs.append(got - returned)
            trips.append(got - sent)
        t1 = os.times()
    print(
        json.dumps(
            {
                "in_ms": statistics.median(ins) * 1000,
                "out_ms": statistics.median(outs) * 1000,
                "trip_ms": statistics.median(trips) * 1000,
                "client_us": 1e6 * (t1.user + t1.system - t0.user - t0.system) / calls,
            }
        ),
        flush=True,
    )


async def main(args: argparse.Namespace) -> None:
    serve_args = ["--serve"] + (["--interceptor"] if args.interceptor else []) + (["--raw"] if args.raw else [])
    # The server on the gRPC stack `loom` runs (loom_runner's GRPC_EXPERIMENTS, which grpc reads
    # when first imported); the client on grpcio's defaults, as bench/tasks.py's client is.
    from loom_runner import GRPC_EXPERIMENTS

    env = {**os.environ, "GRPC_EXPERIMENTS": os.environ.get("GRPC_EXPERIMENTS", GRPC_EXPERIMENTS)}
    server = await asyncio.create_subprocess_exec(
        sys.executable, __file__, *serve_args, stdout=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.PIPE, env=env
    )
    assert server.stdout is not None and server.stdin is not None
    port = json.loads(await asyncio.wait_for(server.stdout.readline(), 60))["port"]
    try:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            "--client",
            str(port),
            "--calls",
            str(args.calls),
            "--gap-ms",
            str(args.gap_ms),
            *(["--raw"] if args.raw else []),
            stdout=asyncio.subprocess.PIPE,
        )
        out, _ = await proc.communicate()
        r = json.loads(out)
    finally:
        server.stdin.write(b"\n")
        await server.stdin.drain()
        await server.wait()
    load = os.getloadavg()[0]
    print(
        ("bare TCP stream" if args.raw else f"grpc.aio unary, interceptor={'pass-through' if args.interceptor else 'none'}")
        + f", two processes, uvloop, gap {args.gap_ms} ms: "
        f"in p50 {r['in_ms']:.3f} ms, out p50 {r['out_ms']:.3f} ms, round trip p50 {r['trip_ms']:.3f} ms, "
        f"client CPU {r['client_us']:.0f} us a call ({args.calls} calls; load {load:.1f})"
    )


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--interceptor", action="store_true", help="serve behind a pass-through server interceptor")
    p.add_argument("--gap-ms", type=float, default=0.0, help="idle wait before each call (a wake round waits 30 ms)")
    p.add_argument("--raw", action="store_true", help="the same bytes over a bare asyncio TCP stream: the machine's floor")
    p.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--client", type=int, default=0, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.serve:
        uvloop.run(serve_raw() if a.raw else serve(a.interceptor))
    elif a.client:
        uvloop.run(client(a.client, a.calls, a.gap_ms / 1000, a.raw))
    else:
        uvloop.run(main(a))

"""A cluster's gateway -> plane hop as one long-lived gRPC stream carrying many calls
(loom.relay.v1.RelayService/Relay): a stream message costs grpc a small fraction of a unary
call's CPU on each side (no HTTP/2 stream, headers, trailers or call object per op), and each
message carries every call (or reply) waiting to be sent (bench/relay_stream.py).

This is the plane's end and what both ends share; the gateway's is loom_gateway.streams. Each
call runs in a task of its own through the plane's interceptor chain, as a unary call does
(`OpChainInterceptor.call`: same metadata, checks, ledger row), and a refusal travels as the
same google.rpc.Status a unary call's trailer carries."""

from __future__ import annotations

import asyncio
import functools
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import grpc
from google.protobuf.message import DecodeError, Message
from loom_api.relay.v1 import relay_pb2

from .catalog import OpSpec
from .chain import OpChainInterceptor
from .errors import ErrorCode, LoomError, NotFound, Unavailable
from .grpc_errors import rich_status

RELAY_SERVICE = "loom.relay.v1.RelayService"
RELAY_METHOD = f"/{RELAY_SERVICE}/Relay"
# The bytes a repeated field adds to each item beyond the item itself (tag and length).
ITEM_OVERHEAD = 6
# A reply batch's limit: a reply whose response is within the message limit always fits alone
# (its envelope is a few bytes); the gateway's stream channel receives up to it.
REPLY_BATCH_BYTES_SLACK = 64 * 1024

M = TypeVar("M", bound=Message)


class Outbox(Generic[M]):
    """Envelopes waiting for one stream's writer, taken as one message's worth at a time."""

    def __init__(self) -> None:
        self._items: deque[tuple[M, int]] = deque()
        self._ready = asyncio.Event()
        self.closed = False

    def put(self, item: M, size: int) -> None:
        self._items.append((item, size + ITEM_OVERHEAD))
        self._ready.set()

    def close(self) -> None:
        self.closed = True
        self._ready.set()

    async def take(self, limit: int) -> list[M]:
        """Every waiting envelope up to `limit` bytes (at least one); empty once closed."""
        while not self._items:
            if self.closed:
                return []
            self._ready.clear()
            await self._ready.wait()
        batch: list[M] = []
        total = 0
        while self._items and (not batch or total + self._items[0][1] <= limit):
            item, size = self._items.popleft()
            batch.append(item)
            total += size
        return batch


@dataclass(eq=False, slots=True)
class RelayStreamServer:
    """A plane's end of the gateway's streams: `handler()` is added to the plane's gRPC server
    (the chain passes the method on unwrapped: it is not an op; each call inside is)."""

    plane: str
    ops: Mapping[str, OpSpec]
    chain: OpChainInterceptor
    direct: Mapping[str, Callable[[Message], Awaitable[Message]]]
    max_message_bytes: int
    # Each open stream's reader: a plane shutting down stops taking calls (`drain`).
    _readers: set[asyncio.Task[None]] = field(default_factory=set, init=False)

    def drain(self) -> None:
        """Shutdown: every stream stops taking calls, answers those running and ends, so the
        server's grace is not spent waiting on streams that never end. The gateway answers a
        call it sent after that 503 and opens a new stream (to another replica, or to this
        plane when it is back)."""
        for reader in self._readers:
            reader.cancel()

    def handler(self) -> grpc.GenericRpcHandler:
        return grpc.method_handlers_generic_handler(
            RELAY_SERVICE,
            {
                "Relay": grpc.stream_stream_rpc_method_handler(
                    self.relay,
                    request_deserializer=relay_pb2.RelayCalls.FromString,
                    response_serializer=relay_pb2.RelayReplies.SerializeToString,
                )
            },
        )

    async def relay(
        self, messages: AsyncIterator[relay_pb2.RelayCalls], context: grpc.aio.ServicerContext[relay_pb2.RelayCalls, relay_pb2.RelayReplies]
    ) -> None:
        replies: Outbox[relay_pb2.RelayReply] = Outbox()
        running: dict[int, asyncio.Task[None]] = {}
        reader = asyncio.create_task(self._read(messages, replies, running))
        self._readers.add(reader)
        reader.add_done_callback(self._readers.discard)
        try:
            while batch := await replies.take(self.max_message_bytes + REPLY_BATCH_BYTES_SLACK):
                await context.write(relay_pb2.RelayReplies(replies=batch))
        finally:
            # The gateway went away (or closed the stream): nobody waits for these calls' answers,
            # as for a unary call its caller cancelled.
            reader.cancel()
            for task in running.values():
                task.cancel()

    async def _read(
        self, messages: AsyncIterator[relay_pb2.RelayCalls], replies: Outbox[relay_pb2.RelayReply], running: dict[int, asyncio.Task[None]]
    ) -> None:
        try:
            async for message in messages:
                for call in message.calls:
                    if call.cancel:
                        task = running.pop(call.id, None)
                        if task is not None:
                            task.cancel()
                        continue
                    task = asyncio.create_task(self._answer(call, replies))
                    running[call.id] = task
                    task.add_done_callback(functools.partial(_forget, running, call.id))
        finally:
            # The gateway sends no more calls, or this plane takes no more: answer those running
            # (shielded from the drain's cancel), then end the stream.
            await asyncio.shield(_answered(running, replies))

    async def _answer(self, call: relay_pb2.RelayCall, replies: Outbox[relay_pb2.RelayReply]) -> None:
        reply = relay_pb2.RelayReply(id=call.id)
        try:
            op = self.ops.get(call.op)
            if op is None:
                raise NotFound(
                    ErrorCode.UNKNOWN_OP, f"{call.op} is not served by the {self.plane} plane", {"op": call.op, "this_plane": self.plane}
                )
            try:
                request = op.request_cls.FromString(call.request)
            except DecodeError:
                # What a unary call whose request does not parse is answered.
                raise Unavailable(ErrorCode.BACKEND_UNAVAILABLE, "a plane did not answer") from None
            response = await self.chain.call(op, self.direct[op.name], request, call.metadata)
            data = response.SerializeToString()
            if len(data) > self.max_message_bytes:
                # What the gateway's channel answers for a unary response past its limit.
                raise Unavailable(ErrorCode.BACKEND_UNAVAILABLE, "a plane did not answer")
            reply.response = data
        except LoomError as error:
            reply.status = rich_status(error).SerializeToString()
        replies.put(reply, reply.ByteSize())


async def _answered(running: dict[int, asyncio.Task[None]], replies: Outbox[relay_pb2.RelayReply]) -> None:
    await asyncio.gather(*running.values(), return_exceptions=True)
    replies.close()


def _forget(running: dict[int, asyncio.Task[None]], call_id: int, _task: asyncio.Task[None]) -> None:
    running.pop(call_id, None)

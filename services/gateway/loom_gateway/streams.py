"""The gateway's end of its multiplexed streams to a plane (loom_core.relay_stream): one (or a
few) long-lived streams per plane, each call an envelope on one of them, its reply matched by id.

A stream that breaks fails its calls in flight as a unary call to a plane that went away does
(503, "a plane did not answer") and is opened again by the next call. A plane that does not
serve the stream (an older one) is called unary from then on."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Mapping

import grpc
from google.protobuf.message import Message
from google.rpc import status_pb2
from loom_api.relay.v1 import relay_pb2
from loom_core.catalog import OpSpec
from loom_core.errors import ErrorCode, Unavailable
from loom_core.grpc_errors import from_rich_status, from_rpc_error
from loom_core.relay_stream import RELAY_METHOD, REPLY_BATCH_BYTES_SLACK, Outbox
from loom_core.runtime import GRPC_LEAN_OPTIONS, MAX_MESSAGE_BYTES


class StreamsUnsupported(Exception):
    """The plane does not serve the relay stream: call it unary (nothing of the call ran)."""


def _no_answer() -> Unavailable:
    return Unavailable(ErrorCode.BACKEND_UNAVAILABLE, "a plane did not answer")


class _Stream:
    def __init__(self, channel: grpc.aio.Channel) -> None:
        method: grpc.aio.StreamStreamMultiCallable[relay_pb2.RelayCalls, relay_pb2.RelayReplies] = channel.stream_stream(
            RELAY_METHOD,
            request_serializer=relay_pb2.RelayCalls.SerializeToString,
            response_deserializer=relay_pb2.RelayReplies.FromString,
        )
        self.call = method()
        self.outbox: Outbox[relay_pb2.RelayCall] = Outbox()
        self.pending: dict[int, asyncio.Future[relay_pb2.RelayReply]] = {}
        self.ids = itertools.count(1)
        self.broken = False
        self.unsupported = False
        self._tasks = (asyncio.create_task(self._write()), asyncio.create_task(self._read()))

    async def send(self, envelope: relay_pb2.RelayCall, size: int) -> relay_pb2.RelayReply:
        envelope.id = call_id = next(self.ids)
        future: asyncio.Future[relay_pb2.RelayReply] = asyncio.get_running_loop().create_future()
        self.pending[call_id] = future
        self.outbox.put(envelope, size)
        try:
            return await future
        except asyncio.CancelledError:
            # The deadline, the caller gone, or the gateway draining: the plane ends its handler.
            if self.pending.pop(call_id, None) is not None and not self.broken:
                cancel = relay_pb2.RelayCall(id=call_id, cancel=True)
                self.outbox.put(cancel, cancel.ByteSize())
            raise

    async def _write(self) -> None:
        try:
            while batch := await self.outbox.take(MAX_MESSAGE_BYTES):
                await self.call.write(relay_pb2.RelayCalls(calls=batch))
        except Exception:  # noqa: BLE001 - the stream broke; its reader sees why
            self.close()

    async def _read(self) -> None:
        try:
            while (message := await self.call.read()) is not grpc.aio.EOF:
                assert isinstance(message, relay_pb2.RelayReplies)
                for reply in message.replies:
                    future = self.pending.pop(reply.id, None)
                    if future is not None and not future.done():
                        future.set_result(reply)
        except grpc.aio.AioRpcError as exc:
            self.unsupported = from_rpc_error(exc).code == ErrorCode.UNKNOWN_OP
        except Exception:  # noqa: BLE001 - any other failure is a plane that did not answer
            pass
        finally:
            self.close()

    def close(self) -> None:
        if self.broken:
            return
        self.broken = True
        self.outbox.close()
        for future in self.pending.values():
            if not future.done():
                future.set_exception(StreamsUnsupported() if self.unsupported else _no_answer())
        self.pending.clear()
        for task in self._tasks:
            if task is not asyncio.current_task():
                task.cancel()
        self.call.cancel()


class PlaneStreams:
    """`size` streams to one plane on a channel of their own, calls spread over them in turn."""

    def __init__(self, address: str, size: int) -> None:
        self.address = address
        self.unsupported = False
        self._channel: grpc.aio.Channel | None = None
        self._streams: list[_Stream | None] = [None] * size
        self._turn = itertools.cycle(range(size))

    def _stream(self) -> _Stream:
        if self._channel is None:
            self._channel = grpc.aio.insecure_channel(
                self.address,
                options=[
                    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES + REPLY_BATCH_BYTES_SLACK),
                    *GRPC_LEAN_OPTIONS,
                ],
            )
        i = next(self._turn)
        stream = self._streams[i]
        if stream is None or stream.broken:
            stream = self._streams[i] = _Stream(self._channel)
        return stream

    async def send(self, op: OpSpec, request: bytes, metadata: Mapping[str, str]) -> Message:
        """The call (its request message serialized) on one of the streams; its refusal as its
        LoomError. Raises StreamsUnsupported when the plane does not serve the stream."""
        envelope = relay_pb2.RelayCall(op=op.name, metadata=metadata, request=request)
        stream = self._stream()
        try:
            reply = await stream.send(envelope, envelope.ByteSize())
        except StreamsUnsupported:
            self.unsupported = True
            raise
        if reply.status:
            raise from_rich_status(status_pb2.Status.FromString(reply.status)) or _no_answer()
        return op.response_cls.FromString(reply.response)

    async def close(self) -> None:
        for stream in self._streams:
            if stream is not None:
                stream.close()
        if self._channel is not None:
            await self._channel.close()
            self._channel = None

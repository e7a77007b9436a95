"""REST/MCP arguments -> the op on its plane -> JSON. The gateway's only path to a handler, so
every door passes the planes' interceptor chain.

Two transports, one chain: a plane served by another process is called over gRPC, its calls
multiplexed on a few long-lived streams (loom_gateway.streams: a stream message costs grpc a
fraction of a unary call's CPU on each side), or unary; a plane running in the gateway's own
process (embedded mode) is called in process through the same chain (`PlaneServer.invoke`),
with the same metadata, errors, ledger row, deadline and message size limit, and without gRPC.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Protocol

import grpc
from google.protobuf.message import Message
from loom_core.catalog import Catalog, OpSpec, message_to_json
from loom_core.chain.context import FORWARDED_HEADERS, MD_NAMESPACE, MD_TRANSPORT
from loom_core.errors import ErrorCode, LoomError, NotFound, Unauthenticated, Unavailable, invalid_field
from loom_core.grpc_errors import from_rpc_error
from loom_core.runtime import GRPC_LEAN_OPTIONS, MAX_MESSAGE_BYTES

from .limits import too_large
from .streams import PlaneStreams, StreamsUnsupported

# A request up to this size goes to a remote plane on a relay stream, in an envelope with its
# metadata (the forwarded headers, each within MAX_HEADER_BYTES) that must fit the plane's
# message limit; a bigger one goes unary, where the limit is the request's alone.
STREAMED_REQUEST_BYTES = MAX_MESSAGE_BYTES - 64 * 1024

# Longest value of a forwarded header. gRPC's default metadata limit is 8 KiB for all of them
# together; past it a call fails as "a plane did not answer". A token is ~1 KiB.
MAX_HEADER_BYTES = 4096

TRANSPORTS = ("inproc", "grpc")


class LocalPlane(Protocol):
    """A plane served in this process: the op through its chain, no gRPC (PlaneServer)."""

    async def invoke(self, op: OpSpec, request: Message, metadata: Mapping[str, str]) -> Message: ...


class RefusalRecorder(Protocol):
    """Files the ledger row of a call refused before it became a request message (the chain's)."""

    def refused(self, op: OpSpec, error: LoomError, metadata: Mapping[str, str]) -> None: ...


class Relay:
    def __init__(
        self,
        catalog: Catalog,
        addresses: Mapping[str, str],
        timeout: float = 60.0,
        local: Mapping[str, LocalPlane] | None = None,
        recorder: RefusalRecorder | None = None,
        replica: object | None = None,
        streams: int = 1,
    ) -> None:
        """`recorder`: where a call refused here, before any plane's chain saw it (its body, its
        arguments), gets its ledger row, as every call the chain refuses does. `streams`: how
        many relay streams carry the calls to each remote plane (0: a unary call each). One by
        default: the more calls wait for a stream, the more each message carries (gateway CPU
        per call 145-88 µs on one stream, 171 on two, bench/cluster.py), at the cost of a large
        message holding up the calls behind it."""
        self.catalog = catalog
        self.recorder = recorder
        # The replica this gateway is part of (its bus connection, core's in-process registry
        # key): how the gateway finds a part of its own replica served in this process.
        self.replica = replica
        self.addresses = dict(addresses)
        self.local = dict(local or {})
        # Every plane this gateway serves, whichever transport reaches it.
        for plane in self.local:
            self.addresses.setdefault(plane, "(in process)")
        self.timeout = timeout
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._stubs: dict[str, grpc.aio.UnaryUnaryMultiCallable[Message, Message]] = {}
        self._streams = {
            plane: PlaneStreams(address, streams) for plane, address in self.addresses.items() if streams and plane not in self.local
        }
        self._inflight: set[asyncio.Task[Any]] = set()
        self._draining = False
        # In-process calls' deadlines, oldest first: every call gets the same timeout, so the
        # order they start in is the order they expire in. One timer, set for the oldest call
        # still running, ends what is overdue: a per-call asyncio.timeout cost a timer handle
        # made and cancelled on every call (~5 µs, a twentieth of an embedded request).
        self._deadlines: dict[asyncio.Task[Any], float] = {}
        self._overdue: set[asyncio.Task[Any]] = set()
        self._deadline_timer: asyncio.TimerHandle | None = None

    def drain(self) -> int:
        """Shutdown: end every call in flight at once (a long poll included) with a retryable
        503, and answer new ones so. Returns how many calls it ended."""
        self._draining = True
        for task in self._inflight:
            task.cancel()
        return len(self._inflight)

    def transport_of(self, plane: str) -> str:
        return "inproc" if plane in self.local else "grpc"

    def op(self, name: str) -> OpSpec:
        op = self.catalog.get(name)
        if op is None or op.plane not in self.addresses:
            raise NotFound(ErrorCode.UNKNOWN_OP, f"unknown op {name!r}", {"op": name})
        return op

    def _stub(self, op: OpSpec) -> grpc.aio.UnaryUnaryMultiCallable[Message, Message]:
        stub = self._stubs.get(op.name)
        if stub is None:
            channel = self._channels.get(op.plane)
            if channel is None:
                channel = grpc.aio.insecure_channel(
                    self.addresses[op.plane],
                    options=[
                        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                        *GRPC_LEAN_OPTIONS,
                    ],
                )
                self._channels[op.plane] = channel
            stub = channel.unary_unary(
                op.grpc_path,
                request_serializer=op.request_cls.SerializeToString,
                response_deserializer=op.response_cls.FromString,
            )
            self._stubs[op.name] = stub
        return stub

    def metadata(self, op: OpSpec, args: Mapping[str, Any], headers: Mapping[str, str], transport: str) -> dict[str, str]:
        """The call's metadata from its headers (and a `namespace` argument, which the request
        message does not carry: Catalog.parse_request leaves it out)."""
        md = {}
        for header, key in FORWARDED_HEADERS.items():
            value = headers.get(header)
            if value:
                md[key] = _metadata_value(header, value)
        if not op.org_level and "namespace" in args:
            ns = args["namespace"]
            if not isinstance(ns, str):
                raise invalid_field("namespace", "must be a string")
            md[MD_NAMESPACE] = _metadata_value("namespace", ns)
        md[MD_TRANSPORT] = transport
        return md

    def refused(self, op: OpSpec, error: LoomError, headers: Mapping[str, str], transport: str) -> None:
        """A call to `op` refused at the door: its ledger row (the forwarded headers that are
        valid metadata name the caller)."""
        if self.recorder is None:
            return
        md = {}
        for header, key in FORWARDED_HEADERS.items():
            value = headers.get(header)
            if value and len(value) <= MAX_HEADER_BYTES and printable_ascii(value):
                md[key] = value
        md[MD_TRANSPORT] = transport
        self.recorder.refused(op, error, md)

    async def call(self, name: str, args: Any, headers: Mapping[str, str], transport: str) -> dict[str, Any]:
        op = self.op(name)
        try:
            if not isinstance(args, dict):
                raise invalid_field("(body)", "must be a JSON object of the op's arguments")
            request = self.catalog.parse_request(op, args)  # every argument checked, namespace included
            metadata = self.metadata(op, args, headers, transport)
        except LoomError as err:
            self.refused(op, err, headers, transport)
            raise
        task = asyncio.current_task()
        if self._draining or task is None:
            raise _shutting_down()
        # A call made from inside another (an op composed of ops, search.unified) runs in its
        # caller's task: the outer call keeps the task tracked until it ends.
        nested = task in self._inflight
        self._inflight.add(task)
        # The deadline of a call in process or on a relay stream is the relay's; of a unary gRPC
        # call, the channel's. A nested call runs within its caller's deadline, which ends first.
        timed = not nested and (op.plane in self.local or op.plane in self._streams)
        if timed:
            self._watch(task)
        try:
            return message_to_json(await self.send(op, request, metadata))
        except asyncio.CancelledError:
            if timed and task in self._overdue:
                self._overdue.discard(task)
                if task.uncancel() == 0:
                    # What a gRPC deadline answers (grpc_errors.from_rpc_error).
                    raise Unavailable(ErrorCode.OVERLOADED, "the call took too long") from None
            if self._draining:
                # Our own drain cancelled it: the caller gets an answer it can retry elsewhere.
                task.uncancel()
                raise _shutting_down() from None
            raise
        finally:
            if not nested:
                self._inflight.discard(task)
                if timed:
                    del self._deadlines[task]
                    self._overdue.discard(task)

    def _watch(self, task: asyncio.Task[Any]) -> None:
        loop = task.get_loop()
        deadline = loop.time() + self.timeout
        self._deadlines[task] = deadline
        if self._deadline_timer is None:
            self._deadline_timer = loop.call_at(deadline, self._end_overdue, loop)

    def _end_overdue(self, loop: asyncio.AbstractEventLoop) -> None:
        """Cancel every in-process call past its deadline (`call` answers it OVERLOADED), then
        set the timer for the oldest call still running."""
        self._deadline_timer = None
        now = loop.time()
        for task, deadline in self._deadlines.items():
            if deadline > now:
                self._deadline_timer = loop.call_at(deadline, self._end_overdue, loop)
                return
            if task not in self._overdue:
                self._overdue.add(task)
                task.cancel()

    async def send(self, op: OpSpec, request: Message, metadata: dict[str, str]) -> Message:
        """One op call on whichever transport reaches its plane; a refusal as its LoomError. The
        deadline of a call in process is kept by `call`."""
        if request.ByteSize() > MAX_MESSAGE_BYTES:
            raise too_large(request.ByteSize())
        local = self.local.get(op.plane)
        if local is not None:
            response = await local.invoke(op, request, metadata)  # within the deadline `call` keeps
            if response.ByteSize() > MAX_MESSAGE_BYTES:
                # What gRPC answers for a response past the channel's limit.
                raise Unavailable(ErrorCode.BACKEND_UNAVAILABLE, "a plane did not answer")
            return response
        streams = self._streams.get(op.plane)
        if streams is not None and not streams.unsupported:
            data = request.SerializeToString()
            if len(data) <= STREAMED_REQUEST_BYTES:
                try:
                    return await streams.send(op, data, metadata)  # within the deadline `call` keeps
                except StreamsUnsupported:
                    pass  # nothing of the call ran: it goes unary
        try:
            return await self._stub(op)(request, metadata=list(metadata.items()), timeout=self.timeout)
        except grpc.aio.AioRpcError as exc:
            raise from_rpc_error(exc) from None
        except LoomError:
            raise
        except Exception as exc:
            # the gRPC channel boundary: a failure that is not an RPC status is a plane that did not answer
            raise Unavailable(ErrorCode.BACKEND_UNAVAILABLE, "a plane did not answer") from exc

    async def close(self) -> None:
        for streams in self._streams.values():
            await streams.close()
        for ch in self._channels.values():
            await ch.close()
        self._channels.clear()
        self._stubs.clear()


def _shutting_down() -> Unavailable:
    return Unavailable(ErrorCode.BACKEND_UNAVAILABLE, "the server is shutting down; retry the call", {"reason": "shutting_down"})


def _metadata_value(field: str, value: str) -> str:
    """gRPC metadata carries printable ASCII only, within a size limit; anything else is the
    caller's mistake (a 4xx), not a plane that did not answer."""
    if len(value) > MAX_HEADER_BYTES:
        if field == "authorization":
            raise Unauthenticated(ErrorCode.AUTH_INVALID, "the token is not valid (over the header size limit)")
        raise invalid_field(field, f"longer than {MAX_HEADER_BYTES} bytes")
    if not printable_ascii(value):
        if field == "authorization":
            raise Unauthenticated(ErrorCode.AUTH_INVALID, "the token is not valid")
        raise invalid_field(field, "must be printable ASCII")
    return value


_PRINTABLE_ASCII = bytes(range(0x20, 0x7F))


def printable_ascii(value: str) -> bool:
    """`value.isascii() and value.isprintable()`, a few times faster on a token's ~1 KiB (an
    ASCII string encodes by copying; bytes.translate deletes in one C pass)."""
    return value.isascii() and not value.encode("ascii").translate(None, _PRINTABLE_ASCII)

"""REST/MCP arguments -> the op's gRPC call on its plane -> JSON. The gateway's only path to a
handler, so every door passes the planes' interceptor chain."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import grpc
from loom_core.catalog import Catalog, OpSpec, message_to_json
from loom_core.chain.context import (
    MD_AGENT,
    MD_AUTHORIZATION,
    MD_NAMESPACE,
    MD_ORG,
    MD_REQUEST_ID,
    MD_RUN_ID,
    MD_SESSION,
    MD_TRANSPORT,
    MD_USER,
)
from loom_core.errors import ErrorCode, LoomError, NotFound, Unauthenticated, Unavailable, invalid_field
from loom_core.grpc_errors import from_rpc_error

# HTTP header (lower-case) -> gRPC metadata key
FORWARDED_HEADERS = {
    "authorization": MD_AUTHORIZATION,
    "x-loom-namespace": MD_NAMESPACE,
    "x-loom-org": MD_ORG,
    "x-loom-agent": MD_AGENT,
    "x-loom-user": MD_USER,
    "x-loom-session": MD_SESSION,
    "x-loom-run-id": MD_RUN_ID,
    "x-loom-request-id": MD_REQUEST_ID,
}


class Relay:
    def __init__(self, catalog: Catalog, addresses: Mapping[str, str], timeout: float = 60.0) -> None:
        self.catalog = catalog
        self.addresses = dict(addresses)
        self.timeout = timeout
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._stubs: dict[str, grpc.aio.UnaryUnaryMultiCallable] = {}

    def op(self, name: str) -> OpSpec:
        op = self.catalog.get(name)
        if op is None or op.plane not in self.addresses:
            raise NotFound(ErrorCode.UNKNOWN_OP, f"unknown op {name!r}", {"op": name})
        return op

    def _stub(self, op: OpSpec) -> grpc.aio.UnaryUnaryMultiCallable:
        stub = self._stubs.get(op.name)
        if stub is None:
            channel = self._channels.get(op.plane)
            if channel is None:
                channel = grpc.aio.insecure_channel(self.addresses[op.plane])
                self._channels[op.plane] = channel
            stub = channel.unary_unary(
                op.grpc_path,
                request_serializer=op.request_cls.SerializeToString,
                response_deserializer=op.response_cls.FromString,
            )
            self._stubs[op.name] = stub
        return stub

    async def call(self, name: str, args: Any, headers: Mapping[str, str], transport: str) -> dict[str, Any]:
        op = self.op(name)
        if not isinstance(args, dict):
            raise invalid_field("(body)", "must be a JSON object of the op's arguments")
        args = dict(args)
        metadata = [(md, _metadata_value(h, headers[h])) for h, md in FORWARDED_HEADERS.items() if headers.get(h)]
        if not op.org_level and "namespace" in args:
            ns = args.pop("namespace")
            if not isinstance(ns, str):
                raise invalid_field("namespace", "must be a string")
            metadata = [(k, v) for k, v in metadata if k != MD_NAMESPACE] + [(MD_NAMESPACE, _metadata_value("namespace", ns))]
        request = self.catalog.parse_request(op, args)
        metadata.append((MD_TRANSPORT, transport))
        try:
            response = await self._stub(op)(request, metadata=metadata, timeout=self.timeout)
        except grpc.aio.AioRpcError as exc:
            raise from_rpc_error(exc) from None
        except LoomError:
            raise
        except Exception as exc:
            raise Unavailable(ErrorCode.BACKEND_UNAVAILABLE, "a plane did not answer") from exc
        return message_to_json(response)

    async def close(self) -> None:
        for ch in self._channels.values():
            await ch.close()
        self._channels.clear()
        self._stubs.clear()


def _metadata_value(field: str, value: str) -> str:
    """gRPC metadata carries printable ASCII only; anything else is the caller's mistake (422),
    not a plane that did not answer."""
    if not (value.isascii() and value.isprintable()):
        if field == "authorization":
            raise Unauthenticated(ErrorCode.AUTH_INVALID, "the token is not valid")
        raise invalid_field(field, "must be printable ASCII")
    return value

"""LoomError <-> gRPC rich status (google.rpc.Status with an ErrorInfo detail). The only place
gRPC errors are translated."""

from __future__ import annotations

import json

import grpc
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from .errors import CODES, ErrorCode, LoomError, Unavailable

DOMAIN = "loom"


def to_rpc_status(err: LoomError) -> grpc.Status:
    return rpc_status.to_status(rich_status(err))


def rich_status(err: LoomError) -> status_pb2.Status:
    """The google.rpc.Status a refusal is answered with (a unary call's trailer, a relay
    stream's reply)."""
    info = error_details_pb2.ErrorInfo(reason=err.code, domain=DOMAIN)
    if err.detail:
        info.metadata["detail"] = json.dumps(err.detail, default=str)
    info.metadata["retryable"] = "true" if err.retryable else "false"
    detail = any_pb2.Any()
    detail.Pack(info)
    return status_pb2.Status(code=err.grpc_status.value[0], message=err.message, details=[detail])


def from_rpc_error(exc: grpc.aio.AioRpcError | grpc.RpcError) -> LoomError:
    # from_call reads code(), details() and trailing_metadata(), which an AioRpcError has; its stub
    # names grpc.Call, which the aio error does not subclass.
    status = rpc_status.from_call(exc)  # type: ignore[arg-type]
    if status is not None and (error := from_rich_status(status)) is not None:
        return error
    code = exc.code() if hasattr(exc, "code") else None
    if code == grpc.StatusCode.UNIMPLEMENTED:
        return LoomError(ErrorCode.UNKNOWN_OP, "this server does not serve that op")
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return Unavailable(ErrorCode.OVERLOADED, "the call took too long")
    return Unavailable(ErrorCode.BACKEND_UNAVAILABLE, "a plane did not answer")


def from_rich_status(status: status_pb2.Status) -> LoomError | None:
    """The LoomError a rich status carries (None: not one of Loom's)."""
    for d in status.details:
        if d.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            d.Unpack(info)
            if info.domain == DOMAIN and info.reason in CODES:
                detail = json.loads(info.metadata["detail"]) if "detail" in info.metadata else None
                payload = {"code": info.reason, "message": status.message, "detail": detail}
                if "retryable" in info.metadata:
                    payload["retryable"] = info.metadata["retryable"] == "true"
                return LoomError.from_payload(payload)
    return None

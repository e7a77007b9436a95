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
    info = error_details_pb2.ErrorInfo(reason=err.code, domain=DOMAIN)
    if err.detail:
        info.metadata["detail"] = json.dumps(err.detail, default=str)
    info.metadata["retryable"] = "true" if err.retryable else "false"
    detail = any_pb2.Any()
    detail.Pack(info)
    status = status_pb2.Status(code=err.grpc_status.value[0], message=err.message, details=[detail])
    return rpc_status.to_status(status)


def from_rpc_error(exc: grpc.aio.AioRpcError | grpc.RpcError) -> LoomError:
    # from_call reads code(), details() and trailing_metadata(), which an AioRpcError has; its stub
    # names grpc.Call, which the aio error does not subclass.
    status = rpc_status.from_call(exc)  # type: ignore[arg-type]
    if status is not None:
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
    code = exc.code() if hasattr(exc, "code") else None
    if code == grpc.StatusCode.UNIMPLEMENTED:
        return LoomError(ErrorCode.UNKNOWN_OP, "this server does not serve that op")
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return Unavailable(ErrorCode.OVERLOADED, "the call took too long")
    return Unavailable(ErrorCode.BACKEND_UNAVAILABLE, "a plane did not answer")

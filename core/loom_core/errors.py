"""One error model for every door.

LoomError
 ├── Unauthenticated           401 AUTH_REQUIRED / AUTH_INVALID / AUTH_EXPIRED / AUTH_REVOKED
 ├── Forbidden                 403 AUTH_INSUFFICIENT, POLICY_FORBIDDEN, TASK_POSTER_DENIED, ...
 ├── NotFound                  404 RESOURCE_NOT_FOUND, UNKNOWN_OP
 ├── Conflict                  409 TASK_TERMINAL, TASK_FENCE_STALE, PRECONDITION_FAILED, ...
 ├── ValidationFailed          422 VALIDATION_FAILED
 ├── Locked                    423
 ├── RateLimited               429 RATE_LIMITED
 └── Unavailable               503 BACKEND_UNAVAILABLE, OVERLOADED, ...

Every leaf carries a stable code; CODES maps code -> (HTTP status, gRPC status). Doors render
from `to_payload()` and rebuild with `from_payload()`; nothing else crosses a door.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import grpc

# code -> (http status, grpc status code, retryable)
CODES: dict[str, tuple[int, grpc.StatusCode, bool]] = {
    "AUTH_REQUIRED": (401, grpc.StatusCode.UNAUTHENTICATED, False),
    "AUTH_INVALID": (401, grpc.StatusCode.UNAUTHENTICATED, False),
    "AUTH_EXPIRED": (401, grpc.StatusCode.UNAUTHENTICATED, False),
    "AUTH_REVOKED": (401, grpc.StatusCode.UNAUTHENTICATED, False),
    "AUTH_INSUFFICIENT": (403, grpc.StatusCode.PERMISSION_DENIED, False),
    "AUTH_WRONG_ORG": (403, grpc.StatusCode.PERMISSION_DENIED, False),
    "POLICY_FORBIDDEN": (403, grpc.StatusCode.PERMISSION_DENIED, False),
    "TASK_POSTER_DENIED": (403, grpc.StatusCode.PERMISSION_DENIED, False),
    "TASK_SELF_ACCEPT": (403, grpc.StatusCode.PERMISSION_DENIED, False),
    "ASSISTANT_SELF_CALL": (403, grpc.StatusCode.PERMISSION_DENIED, False),
    "RESOURCE_NOT_FOUND": (404, grpc.StatusCode.NOT_FOUND, False),
    "UNKNOWN_OP": (404, grpc.StatusCode.UNIMPLEMENTED, False),
    "TASK_TERMINAL": (409, grpc.StatusCode.FAILED_PRECONDITION, False),
    "TASK_FENCE_STALE": (409, grpc.StatusCode.FAILED_PRECONDITION, False),
    "PRECONDITION_FAILED": (409, grpc.StatusCode.FAILED_PRECONDITION, True),
    "ALREADY_EXISTS": (409, grpc.StatusCode.ALREADY_EXISTS, False),
    "VALIDATION_FAILED": (422, grpc.StatusCode.INVALID_ARGUMENT, False),
    "LOCKED": (423, grpc.StatusCode.FAILED_PRECONDITION, True),
    "RATE_LIMITED": (429, grpc.StatusCode.RESOURCE_EXHAUSTED, True),
    "OVERLOADED": (503, grpc.StatusCode.UNAVAILABLE, True),
    "BACKEND_UNAVAILABLE": (503, grpc.StatusCode.UNAVAILABLE, True),
    "ANALYSIS_UNAVAILABLE": (503, grpc.StatusCode.UNAVAILABLE, True),
    "ASSISTANT_UNAVAILABLE": (503, grpc.StatusCode.UNAVAILABLE, True),
    "INTERNAL": (500, grpc.StatusCode.INTERNAL, True),
}


@dataclass(eq=False)
class LoomError(Exception):
    """A refusal every door renders the same way."""

    code: str = "INTERNAL"
    message: str = "internal error"
    detail: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.code not in CODES:
            raise ValueError(f"unknown error code {self.code}")
        super().__init__(self.message)

    @property
    def http_status(self) -> int:
        return CODES[self.code][0]

    @property
    def grpc_status(self) -> grpc.StatusCode:
        return CODES[self.code][1]

    @property
    def retryable(self) -> bool:
        return CODES[self.code][2]

    def to_payload(self) -> dict[str, Any]:
        body: dict[str, Any] = {"code": self.code, "message": self.message, "retryable": self.retryable}
        if self.detail:
            body["detail"] = self.detail
        return body

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> LoomError:
        code = str(payload.get("code", "INTERNAL"))
        if code not in CODES:
            code = "INTERNAL"
        return _CLASS_BY_STATUS.get(CODES[code][0], LoomError)(
            code=code, message=str(payload.get("message", "")), detail=payload.get("detail") or None
        )


class Unauthenticated(LoomError):
    def __init__(self, code: str = "AUTH_REQUIRED", message: str = "a valid token is required", detail: dict[str, Any] | None = None):
        super().__init__(code, message, detail)


class Forbidden(LoomError):
    def __init__(self, code: str = "AUTH_INSUFFICIENT", message: str = "not allowed", detail: dict[str, Any] | None = None):
        super().__init__(code, message, detail)


class NotFound(LoomError):
    def __init__(self, code: str = "RESOURCE_NOT_FOUND", message: str = "not found", detail: dict[str, Any] | None = None):
        super().__init__(code, message, detail)


class Conflict(LoomError):
    def __init__(self, code: str = "PRECONDITION_FAILED", message: str = "conflict", detail: dict[str, Any] | None = None):
        super().__init__(code, message, detail)


class ValidationFailed(LoomError):
    def __init__(self, message: str = "invalid arguments", detail: dict[str, Any] | None = None, code: str = "VALIDATION_FAILED"):
        super().__init__(code, message, detail)


class RateLimited(LoomError):
    def __init__(self, code: str = "RATE_LIMITED", message: str = "rate limit reached", detail: dict[str, Any] | None = None):
        super().__init__(code, message, detail)


class Unavailable(LoomError):
    def __init__(self, code: str = "BACKEND_UNAVAILABLE", message: str = "a backend is unavailable", detail: dict[str, Any] | None = None):
        super().__init__(code, message, detail)


_CLASS_BY_STATUS: dict[int, type[LoomError]] = {
    401: Unauthenticated,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    422: ValidationFailed,
    429: RateLimited,
    503: Unavailable,
}


def invalid_field(field: str, reason: str) -> ValidationFailed:
    """422 naming the offending field."""
    return ValidationFailed(f"{field}: {reason}", {"field": field, "reason": reason})

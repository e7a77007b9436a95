"""One error model for every door.

LoomError
 ├── BadRequest                400 MISSING_IDENTITY_FIELD, REQUEST_TOO_DEEP, UNKNOWN_TOOLSET
 ├── Unauthenticated           401 AUTH_REQUIRED / AUTH_INVALID / AUTH_EXPIRED / AUTH_REVOKED
 ├── Forbidden                 403 AUTH_INSUFFICIENT, POLICY_FORBIDDEN, CSRF_REJECTED, ...
 ├── NotFound                  404 RESOURCE_NOT_FOUND, UNKNOWN_OP
 ├── Conflict                  409 TASK_TERMINAL, TASK_FENCE_STALE, PRECONDITION_FAILED, ...
 ├── RequestTimeout            408 REQUEST_TIMEOUT
 ├── TooLarge                  413 REQUEST_TOO_LARGE
 ├── UnsupportedMediaType      415 UNSUPPORTED_MEDIA_TYPE
 ├── ValidationFailed          422 VALIDATION_FAILED
 ├── Locked                    423 LOCKED
 ├── RateLimited               429 RATE_LIMITED
 └── Unavailable               503 BACKEND_UNAVAILABLE, OVERLOADED, ...

Every leaf carries a stable code; CODES maps code -> (HTTP status, gRPC status). Doors render
from `to_payload()` and rebuild with `from_payload()`; nothing else crosses a door.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import grpc

from . import fastjson


class ErrorCode(StrEnum):
    """Every stable error code a door may answer. Call sites name a member, never a bare string."""

    AUTH_REQUIRED = "AUTH_REQUIRED"
    AUTH_INVALID = "AUTH_INVALID"
    AUTH_EXPIRED = "AUTH_EXPIRED"
    AUTH_REVOKED = "AUTH_REVOKED"
    AUTH_INSUFFICIENT = "AUTH_INSUFFICIENT"
    AUTH_WRONG_ORG = "AUTH_WRONG_ORG"
    POLICY_FORBIDDEN = "POLICY_FORBIDDEN"
    TASK_POSTER_DENIED = "TASK_POSTER_DENIED"
    TASK_SELF_ACCEPT = "TASK_SELF_ACCEPT"
    ASSISTANT_SELF_CALL = "ASSISTANT_SELF_CALL"
    RESOURCE_NOT_FOUND = "RESOURCE_NOT_FOUND"
    UNKNOWN_OP = "UNKNOWN_OP"
    TASK_TERMINAL = "TASK_TERMINAL"
    TASK_FENCE_STALE = "TASK_FENCE_STALE"
    PRECONDITION_FAILED = "PRECONDITION_FAILED"
    ALREADY_EXISTS = "ALREADY_EXISTS"
    VALIDATION_FAILED = "VALIDATION_FAILED"
    LOCKED = "LOCKED"
    RATE_LIMITED = "RATE_LIMITED"
    OVERLOADED = "OVERLOADED"
    BACKEND_UNAVAILABLE = "BACKEND_UNAVAILABLE"
    ANALYSIS_UNAVAILABLE = "ANALYSIS_UNAVAILABLE"
    ASSISTANT_UNAVAILABLE = "ASSISTANT_UNAVAILABLE"
    INTERNAL = "INTERNAL"
    MISSING_IDENTITY_FIELD = "MISSING_IDENTITY_FIELD"
    PINNED_CONFLICT = "PINNED_CONFLICT"
    UNKNOWN_TOOLSET = "UNKNOWN_TOOLSET"
    REQUEST_TOO_DEEP = "REQUEST_TOO_DEEP"
    REQUEST_TOO_LARGE = "REQUEST_TOO_LARGE"
    UNSUPPORTED_MEDIA_TYPE = "UNSUPPORTED_MEDIA_TYPE"
    REQUEST_TIMEOUT = "REQUEST_TIMEOUT"
    CSRF_REJECTED = "CSRF_REJECTED"


# code -> (http status, grpc status code, retryable)
CODES: dict[ErrorCode, tuple[int, grpc.StatusCode, bool]] = {
    ErrorCode.AUTH_REQUIRED: (401, grpc.StatusCode.UNAUTHENTICATED, False),
    ErrorCode.AUTH_INVALID: (401, grpc.StatusCode.UNAUTHENTICATED, False),
    ErrorCode.AUTH_EXPIRED: (401, grpc.StatusCode.UNAUTHENTICATED, False),
    ErrorCode.AUTH_REVOKED: (401, grpc.StatusCode.UNAUTHENTICATED, False),
    ErrorCode.AUTH_INSUFFICIENT: (403, grpc.StatusCode.PERMISSION_DENIED, False),
    ErrorCode.AUTH_WRONG_ORG: (403, grpc.StatusCode.PERMISSION_DENIED, False),
    ErrorCode.POLICY_FORBIDDEN: (403, grpc.StatusCode.PERMISSION_DENIED, False),
    ErrorCode.TASK_POSTER_DENIED: (403, grpc.StatusCode.PERMISSION_DENIED, False),
    ErrorCode.TASK_SELF_ACCEPT: (403, grpc.StatusCode.PERMISSION_DENIED, False),
    ErrorCode.ASSISTANT_SELF_CALL: (403, grpc.StatusCode.PERMISSION_DENIED, False),
    ErrorCode.CSRF_REJECTED: (403, grpc.StatusCode.PERMISSION_DENIED, False),
    ErrorCode.RESOURCE_NOT_FOUND: (404, grpc.StatusCode.NOT_FOUND, False),
    ErrorCode.UNKNOWN_OP: (404, grpc.StatusCode.UNIMPLEMENTED, False),
    ErrorCode.TASK_TERMINAL: (409, grpc.StatusCode.FAILED_PRECONDITION, False),
    ErrorCode.TASK_FENCE_STALE: (409, grpc.StatusCode.FAILED_PRECONDITION, False),
    ErrorCode.PRECONDITION_FAILED: (409, grpc.StatusCode.FAILED_PRECONDITION, True),
    ErrorCode.ALREADY_EXISTS: (409, grpc.StatusCode.ALREADY_EXISTS, False),
    ErrorCode.VALIDATION_FAILED: (422, grpc.StatusCode.INVALID_ARGUMENT, False),
    ErrorCode.LOCKED: (423, grpc.StatusCode.FAILED_PRECONDITION, True),
    ErrorCode.MISSING_IDENTITY_FIELD: (400, grpc.StatusCode.INVALID_ARGUMENT, False),
    ErrorCode.PINNED_CONFLICT: (409, grpc.StatusCode.FAILED_PRECONDITION, False),
    ErrorCode.UNKNOWN_TOOLSET: (400, grpc.StatusCode.INVALID_ARGUMENT, False),
    ErrorCode.REQUEST_TOO_DEEP: (400, grpc.StatusCode.INVALID_ARGUMENT, False),
    ErrorCode.REQUEST_TOO_LARGE: (413, grpc.StatusCode.RESOURCE_EXHAUSTED, False),
    ErrorCode.UNSUPPORTED_MEDIA_TYPE: (415, grpc.StatusCode.INVALID_ARGUMENT, False),
    # The client sent its request too slowly; the same request sent promptly succeeds.
    ErrorCode.REQUEST_TIMEOUT: (408, grpc.StatusCode.DEADLINE_EXCEEDED, True),
    ErrorCode.RATE_LIMITED: (429, grpc.StatusCode.RESOURCE_EXHAUSTED, True),
    ErrorCode.OVERLOADED: (503, grpc.StatusCode.UNAVAILABLE, True),
    ErrorCode.BACKEND_UNAVAILABLE: (503, grpc.StatusCode.UNAVAILABLE, True),
    ErrorCode.ANALYSIS_UNAVAILABLE: (503, grpc.StatusCode.UNAVAILABLE, True),
    ErrorCode.ASSISTANT_UNAVAILABLE: (503, grpc.StatusCode.UNAVAILABLE, True),
    ErrorCode.INTERNAL: (500, grpc.StatusCode.INTERNAL, True),
}


#: A refusal's detail: a JSON object whose fields differ by refusal (`field`, `limit`, `retry_after_s`...);
#: a reader checks a value's type before using it.
Detail = Mapping[str, object]


@dataclass(eq=False)
class LoomError(Exception):
    """A refusal every door renders the same way."""

    code: ErrorCode | str = ErrorCode.INTERNAL
    message: str = "internal error"
    detail: Detail | None = None
    # Overrides the code's retry hint for one refusal whose code usually says otherwise: a 409 for a
    # task in the wrong state (no retry moves it), an assistant or analysis store not configured.
    retry: bool | None = None

    def __post_init__(self) -> None:
        try:
            self.code = ErrorCode(self.code)
        except ValueError:
            raise ValueError(f"unknown error code {self.code}") from None
        super().__init__(self.message)

    @property
    def http_status(self) -> int:
        return CODES[ErrorCode(self.code)][0]

    @property
    def grpc_status(self) -> grpc.StatusCode:
        return CODES[ErrorCode(self.code)][1]

    @property
    def retryable(self) -> bool:
        return CODES[ErrorCode(self.code)][2] if self.retry is None else self.retry

    def to_payload(self) -> dict[str, Any]:
        body: dict[str, Any] = {"code": self.code, "message": self.message, "retryable": self.retryable}
        if self.detail:
            body["detail"] = self.detail
        return body

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> LoomError:
        try:
            code = ErrorCode(str(payload.get("code", ErrorCode.INTERNAL.value)))
        except ValueError:
            code = ErrorCode.INTERNAL
        error = _CLASS_BY_STATUS.get(CODES[code][0], LoomError)(
            code=code, message=str(payload.get("message", "")), detail=payload.get("detail") or None
        )
        if isinstance(payload.get("retryable"), bool) and payload["retryable"] != CODES[code][2]:
            error.retry = payload["retryable"]
        return error


# A leaf changes only the defaults of LoomError's `code` and `message`, so it takes LoomError's
# arguments (code, message, detail, retry) in that order; ValidationFailed and Unavailable differ.


@dataclass(eq=False)
class Unauthenticated(LoomError):
    code: ErrorCode | str = ErrorCode.AUTH_REQUIRED
    message: str = "a valid token is required"


@dataclass(eq=False)
class Forbidden(LoomError):
    code: ErrorCode | str = ErrorCode.AUTH_INSUFFICIENT
    message: str = "not allowed"


@dataclass(eq=False)
class NotFound(LoomError):
    code: ErrorCode | str = ErrorCode.RESOURCE_NOT_FOUND
    message: str = "not found"


@dataclass(eq=False)
class Conflict(LoomError):
    code: ErrorCode | str = ErrorCode.PRECONDITION_FAILED
    message: str = "conflict"


class ValidationFailed(LoomError):
    """The one leaf whose message comes first: `ValidationFailed("field: reason", detail)`."""

    def __init__(
        self, message: str = "invalid arguments", detail: Detail | None = None, code: ErrorCode | str = ErrorCode.VALIDATION_FAILED
    ):
        super().__init__(code, message, detail)


@dataclass(eq=False)
class RateLimited(LoomError):
    code: ErrorCode | str = ErrorCode.RATE_LIMITED
    message: str = "rate limit reached"


class Unavailable(LoomError):
    """Takes the retry override as the keyword `retryable` (an analysis or assistant store that
    is not configured is not worth retrying)."""

    def __init__(
        self,
        code: ErrorCode | str = ErrorCode.BACKEND_UNAVAILABLE,
        message: str = "a backend is unavailable",
        detail: Detail | None = None,
        *,
        retryable: bool | None = None,
    ):
        super().__init__(code, message, detail, retryable)


@dataclass(eq=False)
class BadRequest(LoomError):
    code: ErrorCode | str = ErrorCode.MISSING_IDENTITY_FIELD
    message: str = "bad request"


@dataclass(eq=False)
class Locked(LoomError):
    code: ErrorCode | str = ErrorCode.LOCKED
    message: str = "locked"


_CLASS_BY_STATUS: dict[int, type[LoomError]] = {
    400: BadRequest,
    401: Unauthenticated,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    422: ValidationFailed,
    423: Locked,
    429: RateLimited,
    503: Unavailable,
}


def invalid_field(field: str, reason: str) -> ValidationFailed:
    """422 naming the offending field."""
    return ValidationFailed(f"{field}: {reason}", {"field": field, "reason": reason})


def count_or_default(field: str, value: int, default: int, most: int) -> int:
    """A request's count (a limit, a lease, a ttl) where 0 means unset: `default` for 0,
    `value` when it is 1..`most`, else 422 naming the field."""
    if value == 0:
        return default
    if value < 1 or value > most:
        raise invalid_field(field, f"between 1 and {most}")
    return value


def retry_after(err: LoomError) -> str | None:
    """The Retry-After header of a refusal: whole seconds, rounded up, for a rate limit that
    says when to retry."""
    wait = err.detail.get("retry_after_s") if err.detail else None
    if err.code == ErrorCode.RATE_LIMITED and isinstance(wait, int | float):
        return str(max(1, math.ceil(wait)))
    return None


def http_error(err: LoomError) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """A refusal as HTTP: status, headers, and the body `{"error": {code, message, retryable, detail}}`.
    The one renderer every HTTP door answers a refusal with (the gateway's fast path and app,
    the chat route, the sign-in routes)."""
    headers = [(b"content-type", b"application/json")]
    after = retry_after(err)
    if after is not None:
        headers.append((b"retry-after", after.encode()))
    return err.http_status, headers, fastjson.dumps({"error": err.to_payload()})

"""Every error the SDK raises, in one module.

LoomError                         any refusal or failure, with the server's stable code
 ├── AuthError                    401 AUTH_REQUIRED, AUTH_INVALID, AUTH_EXPIRED, AUTH_REVOKED
 ├── ForbiddenError               403 AUTH_INSUFFICIENT, TASK_POSTER_DENIED, TASK_SELF_ACCEPT, ...
 │    └── PolicyForbiddenError    403 POLICY_FORBIDDEN (a history policy denied the call)
 ├── NotFoundError                404 RESOURCE_NOT_FOUND
 │    └── UnknownOpError          404 UNKNOWN_OP
 ├── ConflictError                409 PRECONDITION_FAILED, ALREADY_EXISTS, ...
 │    ├── FenceStaleError         409 TASK_FENCE_STALE (the claim was lost)
 │    └── TaskTerminalError       409 TASK_TERMINAL (the task is finished)
 ├── ValidationError              422 VALIDATION_FAILED (`detail["field"]` names the field)
 ├── LockedError                  423
 ├── RateLimitedError             429 RATE_LIMITED (`retry_after` in seconds)
 └── UnavailableError             503 BACKEND_UNAVAILABLE, OVERLOADED, ... and network failures

The server answers a refusal as `{"error": {"code", "message", "detail", "retryable"}}` with the
HTTP status its code maps to. The class is picked by the code first (most specific), then by the
status, so a code this SDK version does not know still lands in the right family.
"""

from __future__ import annotations

from typing import Any

import httpx

__all__ = [
    "AuthError",
    "ConflictError",
    "FenceStaleError",
    "ForbiddenError",
    "LockedError",
    "LoomError",
    "NotFoundError",
    "PolicyForbiddenError",
    "RateLimitedError",
    "TaskTerminalError",
    "UnavailableError",
    "UnknownOpError",
    "ValidationError",
]


class LoomError(Exception):
    """A call Loom refused or could not answer.

    Attributes:
        code: The server's stable error code, e.g. ``"AUTH_INVALID"`` or ``"TASK_FENCE_STALE"``.
        message: A human-readable explanation.
        detail: Structured facts about the refusal (e.g. ``{"field": "name"}``); empty if none.
        status: The HTTP status, or ``None`` when no response arrived (a network failure).
        retryable: The server's hint that the same call may succeed later.
        op: The op that was called, when known.
    """

    def __init__(
        self,
        code: str,
        message: str,
        detail: dict[str, Any] | None = None,
        status: int | None = None,
        *,
        retryable: bool = False,
        op: str | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.detail: dict[str, Any] = dict(detail or {})
        self.status = status
        self.retryable = retryable
        self.op = op

    def __str__(self) -> str:
        where = f" ({self.op})" if self.op else ""
        return f"{self.code}{where}: {self.message}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r}, status={self.status!r})"


class AuthError(LoomError):
    """401: no token, or a token that is invalid, expired or revoked."""


class ForbiddenError(LoomError):
    """403: the caller is known but may not make this call (role, org, inbox trust)."""


class PolicyForbiddenError(ForbiddenError):
    """403 POLICY_FORBIDDEN: a history policy in enforce mode denied the call.

    ``detail`` carries the rules and per-leaf values that decided it.
    """


class NotFoundError(LoomError):
    """404: the resource does not exist, or the caller may not know that it does."""


class UnknownOpError(NotFoundError):
    """404 UNKNOWN_OP: the server serves no op by that name."""


class ConflictError(LoomError):
    """409: the call conflicts with the resource's current state."""


class FenceStaleError(ConflictError):
    """409 TASK_FENCE_STALE: the fence presented is no longer the task's; the claim was lost."""


class TaskTerminalError(ConflictError):
    """409 TASK_TERMINAL: the task is finished (done, wont_do, failed or cancelled)."""


class ValidationError(LoomError):
    """422: the arguments are invalid; ``field`` names the offending one."""

    @property
    def field(self) -> str | None:
        """The argument the server named as invalid, if it named one."""
        value = self.detail.get("field")
        return str(value) if value is not None else None


class LockedError(LoomError):
    """423: the resource is locked for now; retry later."""


class RateLimitedError(LoomError):
    """429 RATE_LIMITED: the caller's rate class is spent for now."""

    @property
    def retry_after(self) -> float | None:
        """Seconds to wait before retrying, when the server said."""
        value = self.detail.get("retry_after_s")
        try:
            return float(value) if value is not None else None
        except (TypeError, ValueError):
            return None


class UnavailableError(LoomError):
    """503, or no answer at all: a backend or the network failed. Usually worth a retry."""


# Most specific first: a code this table names wins over its status family.
_BY_CODE: dict[str, type[LoomError]] = {
    "POLICY_FORBIDDEN": PolicyForbiddenError,
    "TASK_FENCE_STALE": FenceStaleError,
    "TASK_TERMINAL": TaskTerminalError,
    "UNKNOWN_OP": UnknownOpError,
}

_BY_STATUS: dict[int, type[LoomError]] = {
    401: AuthError,
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
    422: ValidationError,
    423: LockedError,
    429: RateLimitedError,
    502: UnavailableError,
    503: UnavailableError,
    504: UnavailableError,
}

# Codes a bare status implies when a response carries no Loom error body (e.g. a proxy's page).
_CODE_BY_STATUS: dict[int, str] = {
    401: "AUTH_REQUIRED",
    403: "AUTH_INSUFFICIENT",
    404: "RESOURCE_NOT_FOUND",
    409: "PRECONDITION_FAILED",
    422: "VALIDATION_FAILED",
    423: "LOCKED",
    429: "RATE_LIMITED",
    502: "BACKEND_UNAVAILABLE",
    503: "BACKEND_UNAVAILABLE",
    504: "BACKEND_UNAVAILABLE",
}


def error_class(code: str, status: int | None) -> type[LoomError]:
    """The class a refusal is raised as: by code first, then by HTTP status family."""
    if code in _BY_CODE:
        return _BY_CODE[code]
    if status is None:
        return UnavailableError
    return _BY_STATUS.get(status, LoomError)


def from_response(response: httpx.Response, op: str) -> LoomError:
    """The typed error for a non-2xx answer, whatever its body holds."""
    status = response.status_code
    body: Any
    try:
        body = response.json()
    except ValueError:
        body = None
    payload = body.get("error") if isinstance(body, dict) else None
    if not isinstance(payload, dict):
        # Not Loom's answer (a proxy, a crash page): keep the status, never the page text.
        code = _CODE_BY_STATUS.get(status, "INTERNAL")
        return error_class(code, status)(code, f"HTTP {status} without a Loom error body", {}, status, retryable=status >= 500, op=op)
    code = str(payload.get("code") or _CODE_BY_STATUS.get(status, "INTERNAL"))
    detail = payload.get("detail")
    detail = dict(detail) if isinstance(detail, dict) else {}
    if status == 429 and "retry_after_s" not in detail and "retry-after" in response.headers:
        detail["retry_after_s"] = response.headers["retry-after"]
    return error_class(code, status)(
        code,
        str(payload.get("message") or code),
        detail,
        status,
        retryable=bool(payload.get("retryable", False)),
        op=op,
    )


def from_transport_error(exc: httpx.TransportError, op: str) -> UnavailableError:
    """A call that got no answer: connection refused, timeout, broken stream."""
    if isinstance(exc, httpx.TimeoutException):
        reason, message = "timeout", "Loom did not answer in time"
    elif isinstance(exc, httpx.ConnectError):
        reason, message = "connect", "could not connect to Loom"
    else:
        reason, message = "network", "the connection to Loom failed"
    return UnavailableError("BACKEND_UNAVAILABLE", message, {"reason": reason, "error": type(exc).__name__}, None, retryable=True, op=op)

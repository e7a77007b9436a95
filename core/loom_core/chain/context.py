"""What a handler knows about its call, set by the chain before the handler runs."""

from __future__ import annotations

import contextvars
import itertools
import uuid
from dataclasses import dataclass, field
from typing import Any

from ..catalog import OpSpec
from ..identity.tokens import Principal
from ..roles import Role

# Metadata keys (gRPC metadata; the same names as HTTP headers, lower-cased).
MD_AUTHORIZATION = "authorization"
MD_NAMESPACE = "x-loom-namespace"
MD_ORG = "x-loom-org"
MD_AGENT = "x-loom-agent"
MD_USER = "x-loom-user"
MD_SESSION = "x-loom-session"
MD_RUN_ID = "x-loom-run-id"
MD_TRANSPORT = "x-loom-transport"
MD_REQUEST_ID = "x-loom-request-id"

# What the gateway forwards to a plane: HTTP header (lower-case) -> gRPC metadata key. The
# transport (MD_TRANSPORT) is the gateway's own word, never a caller's header.
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
LABEL_KEYS = (MD_NAMESPACE, MD_ORG, MD_AGENT, MD_USER, MD_SESSION, MD_RUN_ID, MD_TRANSPORT, MD_REQUEST_ID)
# The HTTP header an SDK names itself in (`sdk-python/…`); it picks the ledger's transport label.
HEADER_CLIENT = "x-loom-client"


def bearer_token(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` value; None for no value, another
    scheme or an empty token. Every door reads the header through this."""
    if not authorization:
        return None
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def http_transport(client: str | None) -> str:
    """The transport label of an HTTP call (REST or the chat route): `sdk` when an SDK sent it
    (its X-Loom-Client header), else `rest`. MCP's calls say `mcp`, gRPC's `grpc`."""
    return "sdk" if client and client.startswith("sdk") else "rest"


@dataclass(slots=True)
class CallContext:
    op: OpSpec
    principal: Principal
    namespace: str
    role: Role
    # The caller's role in `namespace` alone (the token's claim capped by the live grant), as the
    # chain read it; None when it did not (an org-level call without a namespace).
    namespace_role: Role | None = None
    agent: str = ""
    user: str = ""
    session: str = ""
    run_id: str = ""
    # Set by a handler: identifier keys its ledger row carries beside the request's arguments.
    ledger_extra: dict[str, str] | None = None
    transport: str = "grpc"
    token: str = ""
    request_id: str = field(default_factory=lambda: new_request_id())
    # Set by a handler: how many items its answer returned (ledger out_hits).
    out_hits: int | None = None
    # Set by a batch handler: one ledger row per item, (op, args, error code or "") each,
    # written instead of the call's own row.
    item_rows: list[tuple[str, dict[str, Any], str]] | None = None

    @property
    def org(self) -> str:
        return self.principal.org

    @property
    def subject(self) -> str:
        return self.principal.sub

    @property
    def consumer(self) -> str:
        return self.principal.consumer

    @property
    def agent_label(self) -> str:
        """The caller-chosen agent label, else the subject (labels grant nothing)."""
        return self.agent or self.principal.sub


# Request ids need to be unique, not secret: a random per-process prefix and a counter, instead
# of a uuid4 (an os.urandom system call on every op call).
_ID_PREFIX = uuid.uuid4().hex[:16]
_ID_COUNTER = itertools.count(1)


def new_request_id() -> str:
    return f"{_ID_PREFIX}{next(_ID_COUNTER):016x}"


_current: contextvars.ContextVar[CallContext] = contextvars.ContextVar("loom_call")


def current_call() -> CallContext:
    return _current.get()


def set_current_call(ctx: CallContext) -> contextvars.Token[CallContext]:
    return _current.set(ctx)


def reset_current_call(token: contextvars.Token[CallContext]) -> None:
    _current.reset(token)

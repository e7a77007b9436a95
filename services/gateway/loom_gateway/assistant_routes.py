"""POST /v1/assistant/chat/completions and GET /v1/assistant/models: handed to the assistant
bridge (spec 000 "Surfaces").

In one process (embedded, tests) the gateway passes the ASGI call to this replica's bridge, so
a disconnect reaches it at once; in a cluster it relays to LOOM_ASSISTANT_BRIDGE_URL, streaming.
The gateway holds no assistant logic: the bridge runs the chat through the op chain (token,
role, rate class, policy gate, ledger row), refuses, delegates and relays.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import httpx
from fastapi import FastAPI
from loom_core import inproc
from loom_core.assistant_paths import CHAT_PATH, HEALTH_PATH, MODELS_PATH, TOKENLESS_PATH, not_configured
from loom_core.errors import ErrorCode, LoomError, http_error
from loom_core.plane import HealthCheck
from loom_core.runtime import MAX_MESSAGE_BYTES
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from .mcp import LoomMCP
from .relay import Relay
from .settings import GatewaySettings

log = logging.getLogger(__name__)
# What the gateway tells a cluster's bridge is small and must not hold up the MCP door long.
NOTICE_TIMEOUT_S = 2.0

_HOP_HEADERS = {"host", "content-length", "connection", "transfer-encoding", "accept-encoding"}


def _local_plane(replica: object | None) -> Any | None:
    """This replica's assistant plane, registered in core's in-process registry (no plane import)."""
    return inproc.find("assistant", replica)


class _ChatEndpoint:
    def __init__(self, relay: Relay, replica: object | None, bridge_url: str) -> None:
        self.relay = relay
        self.replica = replica
        self.bridge_url = bridge_url
        self._http: httpx.AsyncClient | None = None

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = httpx.AsyncClient(base_url=self.bridge_url.rstrip("/"), timeout=httpx.Timeout(30.0, read=None))
        return self._http

    async def tokenless(self, run_id: str) -> None:
        """An answer's MCP request came with no token: the answer's bridge judges auth_off. A
        configured bridge URL (a cluster's bridge, in another process) is told over HTTP before
        the door answers 401, so it knows before the answer can end; otherwise this replica's."""
        if self.bridge_url:
            try:
                r = await self._client().post(TOKENLESS_PATH, json={"run_id": run_id}, timeout=NOTICE_TIMEOUT_S)
                r.raise_for_status()
            except httpx.HTTPError as exc:
                log.warning("assistant: could not tell the bridge an answer's MCP request came without a token: %s", type(exc).__name__)
            return
        plane = _local_plane(self.replica)
        if plane is not None:
            plane.bridge.observe_tokenless(run_id)

    async def bridge_health(self) -> dict[str, HealthCheck]:
        """A cluster's bridge's health check (its `assistant` check, never required), for this
        gateway's readiness; an unreachable bridge reads as such and is not required either."""
        try:
            r = await self._client().get(HEALTH_PATH, timeout=NOTICE_TIMEOUT_S)
            r.raise_for_status()
            reported = r.json()
        except (httpx.HTTPError, ValueError):
            return {"assistant": {"ok": False, "required": False, "reason": "unreachable"}}
        return reported if isinstance(reported, dict) else {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # A configured bridge URL (a cluster) wins over a bridge found in this process.
        plane = None if self.bridge_url else _local_plane(self.replica)
        if plane is not None:
            if plane.checker.ops is None:
                plane.attach_ops(self.relay.call)
            await plane.chat_app()(scope, receive, send)
            return
        if not self.bridge_url:
            await _render(not_configured(), send)
            return
        await self._proxy(Request(scope, receive), scope, receive, send)

    async def _proxy(self, request: Request, scope: Scope, receive: Receive, send: Send) -> None:
        http = self._client()
        headers: Mapping[str, str] = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_HEADERS}
        sent: bytes | None = b""
        if request.method == "POST":
            sent = await _body_within(request, MAX_MESSAGE_BYTES)
            if sent is None:
                # The bridge refuses it too; past the gateway's own limit it is not even buffered.
                await _render(
                    LoomError(ErrorCode.VALIDATION_FAILED, "the request is too large", {"field": "(body)", "reason": "too_large"}), send
                )
                return
        upstream = await http.send(http.build_request(request.method, request.url.path, content=sent, headers=dict(headers)), stream=True)

        async def body() -> AsyncIterator[bytes]:
            async for chunk in upstream.aiter_raw():
                yield chunk

        keep = {k: v for k, v in upstream.headers.items() if k.lower() in ("content-type", "retry-after", "cache-control")}
        response = StreamingResponse(body(), status_code=upstream.status_code, headers=keep, background=BackgroundTask(upstream.aclose))
        await response(scope, receive, send)


async def _render(err: LoomError, send: Send) -> None:
    status, headers, body = http_error(err)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _body_within(request: Request, limit: int) -> bytes | None:
    """The request body, or None once it passes `limit` (the rest is not read)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def register(app: FastAPI, relay: Relay, mcp: LoomMCP | None = None) -> Callable[[], Awaitable[dict[str, HealthCheck]]] | None:
    """The chat and models routes; answers the relayed bridge's health hook when this gateway
    relays to a bridge URL (a cluster), for the readiness checks."""
    # This replica's bridge is found by the replica the relay serves (core's in-process registry).
    endpoint = _ChatEndpoint(relay, relay.replica, GatewaySettings().assistant_bridge_url)
    if mcp is not None:
        mcp.on_tokenless = endpoint.tokenless
    # An ASGI app as the route's endpoint (a class instance is handed the raw ASGI call).
    app.add_route(CHAT_PATH, endpoint, methods=["POST"], include_in_schema=False)  # type: ignore[arg-type]
    app.add_route(MODELS_PATH, endpoint, methods=["GET"], include_in_schema=False)  # type: ignore[arg-type]
    return endpoint.bridge_health if endpoint.bridge_url else None

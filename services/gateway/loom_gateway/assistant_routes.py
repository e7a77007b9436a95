"""POST /v1/assistant/chat/completions and GET /v1/assistant/models: handed to the assistant
bridge (spec 000 "Surfaces").

In one process (embedded, tests) the gateway passes the ASGI call to this replica's bridge, so
a disconnect reaches it at once; in a cluster it relays to LOOM_ASSISTANT_BRIDGE_URL, streaming.
The gateway holds no assistant logic: the bridge runs the chat through the op chain (token,
role, rate class, policy gate, ledger row), refuses, delegates and relays.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx
from fastapi import FastAPI
from loom_core import inproc
from loom_core.errors import ErrorCode, LoomError, Unavailable, http_error
from loom_core.runtime import MAX_MESSAGE_BYTES
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from .mcp import LoomMCP
from .relay import Relay
from .settings import GatewaySettings

CHAT_PATH = "/v1/assistant/chat/completions"
MODELS_PATH = "/v1/assistant/models"
_HOP_HEADERS = {"host", "content-length", "connection", "transfer-encoding", "accept-encoding"}


def _local_plane(replica: object | None) -> Any | None:
    """This replica's assistant plane, registered in core's in-process registry (no plane import)."""
    return inproc.find("assistant", replica)


def relay_ops(relay: Relay) -> Any:
    """Calls an op with a token through this gateway's relay (the answer's citation checks)."""

    async def call(op: str, args: dict[str, Any], token: str) -> dict[str, Any]:
        return await relay.call(op, args, {"authorization": f"Bearer {token}"}, "rest")

    return call


class _ChatEndpoint:
    def __init__(self, relay: Relay, replica: object | None, bridge_url: str) -> None:
        self.relay = relay
        self.replica = replica
        self.bridge_url = bridge_url
        self._http: httpx.AsyncClient | None = None

    def tokenless(self, run_id: str) -> None:
        """An answer's MCP request came with no token: this replica's bridge judges auth_off
        (a cluster's bridge runs in another process and sees only its answers' tool calls)."""
        plane = _local_plane(self.replica)
        if plane is not None:
            plane.bridge.observe_tokenless(run_id)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # A configured bridge URL (a cluster) wins over a bridge found in this process.
        plane = None if self.bridge_url else _local_plane(self.replica)
        if plane is not None:
            if plane.checker.ops is None:
                plane.attach_ops(relay_ops(self.relay))
            await plane.chat_app()(scope, receive, send)
            return
        url = self.bridge_url
        if not url:
            err: LoomError = Unavailable(
                ErrorCode.ASSISTANT_UNAVAILABLE,
                "no assistant is configured: set LOOM_ASSISTANT_LIBRECHAT_URL to LibreChat's internal address",
                {"reason": "not_configured", "setting": "LOOM_ASSISTANT_LIBRECHAT_URL"},
                retryable=False,
            )
            await _render(err, send)
            return
        await self._proxy(url, Request(scope, receive), scope, receive, send)

    async def _proxy(self, url: str, request: Request, scope: Scope, receive: Receive, send: Send) -> None:
        if self._http is None:
            self._http = httpx.AsyncClient(base_url=url.rstrip("/"), timeout=httpx.Timeout(30.0, read=None))
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
        upstream = await self._http.send(
            self._http.build_request(request.method, request.url.path, content=sent, headers=dict(headers)), stream=True
        )

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


def register(app: FastAPI, relay: Relay, mcp: LoomMCP | None = None) -> None:
    # This replica's bridge is found by the replica the relay serves (core's in-process registry).
    endpoint = _ChatEndpoint(relay, relay.replica, GatewaySettings().assistant_bridge_url)
    if mcp is not None:
        mcp.on_tokenless = endpoint.tokenless
    # An ASGI app as the route's endpoint (a class instance is handed the raw ASGI call).
    app.add_route(CHAT_PATH, endpoint, methods=["POST"], include_in_schema=False)  # type: ignore[arg-type]
    app.add_route(MODELS_PATH, endpoint, methods=["GET"], include_in_schema=False)  # type: ignore[arg-type]

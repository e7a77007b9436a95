"""The MCP door: `/mcp`, streamable HTTP through the official `mcp` SDK's low-level server.

Tools are the op catalog: a tool is named `loom_<group>_<op>` (`task.create` ->
`loom_task_create`), since model tool APIs accept only `^[a-zA-Z0-9_-]{1,64}$`, unless the op
names its tool (`search.unified` is the spec's `loom_search`); a call by the dotted op name keeps
working. Its input and output schemas are the op's. `?toolset=<name>` on
the URL picks the listing the same way `GET /v1/ops?toolset=` does (no toolset: `all`; an
unknown one: 400 naming the known ones); every op stays callable by name whatever the listing,
unlisted ones included.

Without a valid bearer token an MCP request answers HTTP 401 with `WWW-Authenticate: Bearer`
pointing at the protected-resource metadata (RFC 9728, as the MCP authorization spec asks), so
a client knows to ask for a token. `GET /mcp` answers 405: the server is stateless and has
nothing to stream. A call goes through `Relay.call`, so it meets the planes' interceptor chain
exactly as a REST call does, with `transport="mcp"` on its ledger row.

The session manager runs stateless: every POST gets its own transport and nothing ties a client
to one gateway replica. Identity is not per session anyway: each call reads the headers of the
HTTP request that carried it (`ServerRequestContext.request`), so `Authorization`,
`X-Loom-Run-Id` and the label headers are honoured per call, on both protocol eras the SDK
serves (the `initialize` handshake and the 2026-07-28 per-request envelope).

This module holds the door's HTTP side (refusals, the 401 challenge, tool names) and imports
none of the SDK; mcp_server.py holds the SDK's server, imported and started by the first
request the door lets through (the SDK's import is a fifth of a `loom up` start).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from loom_core.catalog import load_catalog
from loom_core.chain.context import FORWARDED_HEADERS, bearer_token
from loom_core.errors import ErrorCode, LoomError, Unauthenticated, Unavailable, ValidationFailed
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from . import assistant_toolset
from .relay import MAX_HEADER_BYTES, Relay

if TYPE_CHECKING:
    from .mcp_server import McpServer

TRANSPORT = "mcp"
DEFAULT_TOOLSET = "all"


TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def tool_name(op_name: str) -> str:
    """`task.create` -> `loom_task_create`: the name model tool APIs accept; or the name the op
    gives its tool (its `tool_name` option: `search.unified` -> `loom_search`)."""
    op = load_catalog().get(op_name)
    name = op.tool_name if op is not None and op.tool_name else "loom_" + op_name.replace(".", "_")
    if not TOOL_NAME.match(name):
        raise ValueError(f"op {op_name!r} makes no valid MCP tool name")
    return name


# JSON-RPC 2.0's own codes for a refusal answered before any tool ran.
JSONRPC_PARSE_ERROR = -32700
JSONRPC_INVALID_REQUEST = -32600
JSONRPC_INTERNAL_ERROR = -32603
_PARSE_REFUSALS = frozenset({ErrorCode.REQUEST_TOO_DEEP, ErrorCode.REQUEST_TOO_LARGE, ErrorCode.UNSUPPORTED_MEDIA_TYPE})


def jsonrpc_error(err: LoomError, request_id: Any = None) -> dict[str, Any]:
    """A refusal of the HTTP request itself (no token, a body Loom will not read, a wrong
    method) as the JSON-RPC error object an MCP client reads, Loom's error body in `data`: the
    official client shows its message instead of "Server returned an error response"."""
    if err.code in _PARSE_REFUSALS or (err.detail or {}).get("field") == "(body)":
        code = JSONRPC_PARSE_ERROR
    elif err.http_status < 500:
        code = JSONRPC_INVALID_REQUEST
    else:
        code = JSONRPC_INTERNAL_ERROR
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": err.message, "data": err.to_payload()}}


def is_mcp_path(path: str) -> bool:
    return path == "/mcp" or path.startswith("/mcp/")


async def _request_id(request: Request) -> Any:
    """The JSON-RPC id of the request being refused, when its body names one (else null)."""
    try:
        body = json.loads(await request.body())
    except ValueError:
        return None
    return body.get("id") if isinstance(body, dict) and isinstance(body.get("id"), (str, int)) else None


def forwarded_headers(request: Request | None) -> dict[str, str]:
    """The headers of this call's own HTTP request that the relay forwards, lower-cased."""
    if request is None:
        return {}
    return {name: value for name in FORWARDED_HEADERS if (value := request.headers.get(name))}


def toolset_of(request: Request | None) -> str:
    if request is None:
        return DEFAULT_TOOLSET
    return request.query_params.get("toolset") or DEFAULT_TOOLSET


class LoomMCP:
    """The MCP door of one gateway: `run()` in the app's lifespan, `asgi_app()` at /mcp. The SDK's
    server (mcp_server.py) is imported and started by the first request the door does not
    refuse, and stopped when `run()` ends."""

    def __init__(self, relay: Relay, *, version: str = "0.1.0", verify: Callable[[str | None], Any] | None = None) -> None:
        self.relay = relay
        self.version = version
        # The token check that answers 401 at the HTTP layer (the chain checks it again per call).
        self.verify = verify
        self.by_tool_name = {tool_name(name): name for name in relay.catalog.ops}
        # Told the run id of an assistant-toolset request that came with no token at all (an
        # answer's connection whose Authorization header LibreChat left off): auth_off. Awaited
        # before the 401 goes out, so the bridge knows before the answer can end.
        self.on_tokenless: Callable[[str], Awaitable[None]] | None = None
        self._running = False
        self._server: McpServer | None = None
        self._serving: asyncio.Task[None] | None = None
        self._starting = asyncio.Lock()

    def op_name(self, name: str) -> str:
        """A tool name (`loom_task_create`) or the dotted op name (`task.create`) -> the op name."""
        return self.by_tool_name.get(name, name)

    @contextlib.asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """Serve while inside; the SDK's server, if a request started it, stops on the way out
        (a session manager runs once, so each run starts a fresh one)."""
        self._running = True
        try:
            yield
        finally:
            self._running = False
            server, serving = self._server, self._serving
            self._server = self._serving = None
            if server is not None and serving is not None:
                server.stop()
                await serving

    async def _started(self) -> McpServer:
        """The SDK's server, imported and started on first use (one start for concurrent first requests)."""
        async with self._starting:
            if self._server is None and self._running:
                # In a thread: the import's half second of CPU holds the loop up only in slices.
                module = await asyncio.to_thread(importlib.import_module, f"{__package__}.mcp_server")
                server: McpServer = module.McpServer(self, self.version)
                running = asyncio.Event()
                serving = asyncio.get_running_loop().create_task(server.serve(running))
                started = asyncio.ensure_future(running.wait())
                try:
                    await asyncio.wait([serving, started], return_when=asyncio.FIRST_COMPLETED)
                finally:
                    started.cancel()
                if serving.done():
                    serving.result()  # it failed to start: raise why
                if self._running:
                    self._server, self._serving = server, serving
                else:  # the door stopped while the server started
                    server.stop()
                    await serving
            if self._server is None:
                raise Unavailable(ErrorCode.BACKEND_UNAVAILABLE, "the MCP endpoint is not running")
            return self._server

    def asgi_app(self) -> _Endpoint:
        return _Endpoint(self)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        refusal: tuple[LoomError, dict[str, str]] | None = None
        server: McpServer | None = None
        if request.method != "POST":
            # Stateless: no stream to hold open (GET) and no session to end (DELETE).
            refusal = ValidationFailed("MCP is served with POST (stateless, no stream)"), {"Allow": "POST"}
        else:
            refusal = await self._refuse_unauthenticated(request)
        if refusal is None:
            try:
                self.relay.catalog.check_toolset(toolset_of(request))
                server = await self._started()
            except LoomError as exc:
                refusal = exc, {}
        if refusal is not None:
            refused, headers = refusal
            request_id = await _request_id(request) if request.method == "POST" else None
            status = 405 if request.method != "POST" else refused.http_status
            await JSONResponse(jsonrpc_error(refused, request_id), status_code=status, headers=headers)(scope, receive, send)
            return
        assert server is not None
        await server.handle(scope, receive, send)

    async def _refuse_unauthenticated(self, request: Request) -> tuple[LoomError, dict[str, str]] | None:
        """No token, or an invalid one: 401 with the bearer challenge (RFC 9728) an MCP client
        follows. A gateway-only process (`verify` None) cannot check a token, which the chain
        checks per call on the planes; a request with none it refuses here as every gateway
        does, so a listing is never served to nobody and a token-less answer is seen."""
        header = request.headers.get("authorization", "")
        token = bearer_token(header)
        try:
            if token is None or len(header) > MAX_HEADER_BYTES:
                raise Unauthenticated(ErrorCode.AUTH_REQUIRED, "a bearer token is required")
            if self.verify is not None:
                self.verify(token)
        except LoomError as err:
            if err.http_status != 401:
                return None  # not a token problem: the chain answers it per call
            run_id = request.headers.get("x-loom-run-id", "")
            assistant = toolset_of(request) == assistant_toolset.TOOLSET
            if err.code == ErrorCode.AUTH_REQUIRED and run_id and assistant and self.on_tokenless is not None:
                await self.on_tokenless(run_id)
            metadata = str(request.base_url).rstrip("/") + PROTECTED_RESOURCE_PATH
            challenge = f'Bearer resource_metadata="{metadata}"'
            if err.code != ErrorCode.AUTH_REQUIRED:
                challenge += ', error="invalid_token"'
            return err, {"WWW-Authenticate": challenge}
        return None


# RFC 9728 protected-resource metadata for /mcp (the MCP authorization spec's discovery).
PROTECTED_RESOURCE_PATH = "/.well-known/oauth-protected-resource/mcp"


def protected_resource_metadata(base_url: str) -> dict[str, Any]:
    base = base_url.rstrip("/")
    return {
        "resource": base + "/mcp",
        "resource_name": "Loom",
        "bearer_methods_supported": ["header"],
        # Loom's tokens are minted by Loom (`loom admin bootstrap`, token.mint), not by an OAuth server.
        "authorization_servers": [],
        "resource_documentation": base + "/openapi.json",
    }


class _Endpoint:
    """The ASGI app at /mcp. A class instance, not a function, so a Starlette `Route` hands it
    the raw ASGI call (a function endpoint would be wrapped as a GET-only request handler)."""

    def __init__(self, mcp: LoomMCP) -> None:
        self._mcp = mcp

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._mcp.handle(scope, receive, send)


__all__ = [
    "LoomMCP",
    "forwarded_headers",
    "is_mcp_path",
    "jsonrpc_error",
    "protected_resource_metadata",
    "tool_name",
    "toolset_of",
]

"""The MCP door: `/mcp`, streamable HTTP through the official `mcp` SDK's low-level server.

Tools are the op catalog: a tool's name is the op's name (`task.create`; SEP-986 allows dots),
its input schema the op's JSON schema. `?toolset=<name>` on the URL picks the listing the same
way `GET /v1/ops?toolset=` does; every op stays callable by name whatever the listing, unlisted
ones included. A call goes through `Relay.call`, so it meets the planes' interceptor chain
exactly as a REST call does, with `transport="mcp"` on its ledger row.

The session manager runs stateless: every POST gets its own transport and nothing ties a client
to one gateway replica. Identity is not per session anyway: each call reads the headers of the
HTTP request that carried it (`ServerRequestContext.request`), so `Authorization`,
`X-Loom-Run-Id` and the label headers are honoured per call, on both protocol eras the SDK
serves (the `initialize` handshake and the 2026-07-28 per-request envelope).
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any

import mcp_types as types
from loom_core.catalog import OpSpec
from loom_core.errors import LoomError, Unavailable
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from . import assistant_toolset
from .relay import FORWARDED_HEADERS, Relay

log = logging.getLogger(__name__)

TRANSPORT = "mcp"


def tool_of(op: OpSpec) -> types.Tool:
    """An op as an MCP tool: same name, its summary, its input schema."""
    return types.Tool(
        name=op.name,
        description=op.summary or None,
        input_schema=op.input_schema,
        annotations=types.ToolAnnotations(read_only_hint=not op.write_shaped),
    )


def ok_result(result: dict[str, Any]) -> types.CallToolResult:
    """The op's JSON as structured content and, for clients that read only text, as JSON text."""
    return types.CallToolResult(
        content=[types.TextContent(text=json.dumps(result, separators=(",", ":")))],
        structured_content=result,
    )


def error_result(err: LoomError) -> types.CallToolResult:
    """A refusal as a tool error carrying the REST error body, so a model can read and react."""
    body = {"error": err.to_payload()}
    return types.CallToolResult(
        content=[types.TextContent(text=json.dumps(body, separators=(",", ":")))],
        structured_content=body,
        is_error=True,
    )


def forwarded_headers(request: Request | None) -> dict[str, str]:
    """The headers of this call's own HTTP request that the relay forwards, lower-cased."""
    if request is None:
        return {}
    return {name: value for name in FORWARDED_HEADERS if (value := request.headers.get(name))}


def toolset_of(request: Request | None) -> str | None:
    if request is None:
        return None
    return request.query_params.get("toolset") or None


class LoomMCP:
    """The MCP server for one gateway; `run()` in the app's lifespan, `asgi_app()` at /mcp."""

    def __init__(self, relay: Relay, *, version: str = "0.1.0") -> None:
        self.relay = relay
        self.server: Server[Any] = Server(
            "loom",
            version=version,
            title="Loom",
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            get_tool_input_schema=self._input_schema,
        )
        self._manager: StreamableHTTPSessionManager | None = None
        self._tools: dict[str | None, list[types.Tool]] = {}

    # -- listing ---------------------------------------------------------------------------

    def tools(self, toolset: str | None) -> list[types.Tool]:
        """The listing for `toolset` (None: every listed op); a toolset no op names lists nothing."""
        if not self._tools:
            # The catalog is fixed for the process, so every listing is built once. Only names
            # the catalog knows are keys, so a caller's made-up ?toolset= values cost nothing.
            catalog, served = self.relay.catalog, self.relay.addresses
            names = {t for op in catalog.ops.values() for t in op.toolsets}
            self._tools = {ts: [tool_of(op) for op in catalog.listed(ts) if op.plane in served] for ts in [None, *sorted(names)]}
        return self._tools.get(toolset, [])

    async def _list_tools(self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=self.tools(toolset_of(ctx.request)))

    def _input_schema(self, name: str) -> Mapping[str, Any] | None:
        # Any op, listed or not, so a by-name call to an unlisted op is checked like a listed one.
        op = self.relay.catalog.get(name)
        return op.input_schema if op is not None and op.plane in self.relay.addresses else None

    # -- calls -----------------------------------------------------------------------------

    async def _call_tool(self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        headers, args = forwarded_headers(ctx.request), params.arguments or {}
        if toolset_of(ctx.request) == assistant_toolset.TOOLSET:
            args, headers = assistant_toolset.assistant_call(args, headers)
        try:
            result = await self.relay.call(params.name, args, headers, TRANSPORT)
        except LoomError as err:
            return error_result(err)
        except Exception:
            log.exception("mcp: tool %r failed", params.name)
            return error_result(LoomError())
        return ok_result(result)

    # -- HTTP ------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """Serve while inside: a session manager runs once, so each run gets a fresh one."""
        manager = StreamableHTTPSessionManager(
            app=self.server,
            stateless=True,
            # One JSON body per call: no op streams over MCP, and JSON passes proxies untouched.
            json_response=True,
            # No DNS-rebinding Host/Origin allowlist: the gateway serves any host name it is
            # deployed under, and every op needs a bearer token a rebound page cannot attach.
            security_settings=None,
        )
        async with manager.run():
            self._manager = manager
            try:
                yield
            finally:
                self._manager = None

    def asgi_app(self) -> _Endpoint:
        return _Endpoint(self)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        manager = self._manager
        if manager is None:
            err = Unavailable("BACKEND_UNAVAILABLE", "the MCP endpoint is not running")
            await JSONResponse({"error": err.to_payload()}, status_code=err.http_status)(scope, receive, send)
            return
        await manager.handle_request(scope, receive, send)


class _Endpoint:
    """The ASGI app at /mcp. A class instance, not a function, so a Starlette `Route` hands it
    the raw ASGI call (a function endpoint would be wrapped as a GET-only request handler)."""

    def __init__(self, mcp: LoomMCP) -> None:
        self._mcp = mcp

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._mcp.handle(scope, receive, send)


__all__ = ["LoomMCP", "error_result", "forwarded_headers", "ok_result", "tool_of"]

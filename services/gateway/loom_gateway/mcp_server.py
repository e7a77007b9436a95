"""The `mcp` SDK's side of the MCP door (mcp.py): the low-level server that lists the catalog's
ops as tools and calls them through the relay, and the stateless session manager that serves
it. Imported on the first /mcp request that passes the door's own refusals, not at start: the
SDK's import is ~0.5 s of CPU (a fifth of a `loom up` start), and most deployments never call
/mcp."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import mcp_types as types
from loom_core.catalog import OpSpec
from loom_core.errors import LoomError
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.types import Receive, Scope, Send

from . import assistant_toolset
from .mcp import DEFAULT_TOOLSET, TRANSPORT, forwarded_headers, tool_name, toolset_of

if TYPE_CHECKING:
    from .mcp import LoomMCP

log = logging.getLogger(__name__)


def tool_of(op: OpSpec) -> types.Tool:
    """An op as an MCP tool: its tool name, its summary (naming the op), its schemas."""
    summary = f"{op.summary} (op {op.name})" if op.summary else f"op {op.name}"
    return types.Tool(
        name=tool_name(op.name),
        description=summary,
        input_schema=op.input_schema,
        output_schema=op.output_schema or None,
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


class _QuietStatelessTermination(logging.Filter):
    """The stateless session manager ends every request's transport with an INFO line
    "Terminating session: None": one per call, saying nothing. Dropped; others pass."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != "Terminating session: None"


_STATELESS_LOGGER = logging.getLogger("mcp.server.streamable_http")
if not any(isinstance(f, _QuietStatelessTermination) for f in _STATELESS_LOGGER.filters):
    _STATELESS_LOGGER.addFilter(_QuietStatelessTermination())


class McpServer:
    """One gateway's MCP server: `serve()` runs its session manager (in a task of its own, which
    enters and leaves the manager's task group) until `stop()`, `handle()` answers a request
    while it runs."""

    def __init__(self, door: LoomMCP, version: str) -> None:
        self.door = door
        self.relay = door.relay
        self.server: Server[Any] = Server(
            "loom",
            version=version,
            title="Loom",
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            get_tool_input_schema=self._input_schema,
        )
        self.manager = StreamableHTTPSessionManager(
            app=self.server,
            stateless=True,
            # One JSON body per call: no op streams over MCP, and JSON passes proxies untouched.
            json_response=True,
            # No DNS-rebinding Host/Origin allowlist: the gateway serves any host name it is
            # deployed under, and every op needs a bearer token a rebound page cannot attach.
            security_settings=None,
        )
        self._tools: dict[str | None, list[types.Tool]] = {}
        self._stop = asyncio.Event()

    async def serve(self, running: asyncio.Event) -> None:
        """Run the session manager, `running` set once it serves, until `stop()` (a session
        manager runs once)."""
        async with self.manager.run():
            running.set()
            await self._stop.wait()

    def stop(self) -> None:
        self._stop.set()

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.manager.handle_request(scope, receive, send)

    # -- listing ---------------------------------------------------------------------------

    def tools(self, toolset: str = DEFAULT_TOOLSET) -> list[types.Tool]:
        """The listing for `toolset`; an unknown toolset is the caller's 400 (UNKNOWN_TOOLSET)."""
        if not self._tools:
            # The catalog is fixed for the process, so every listing is built once.
            catalog, served = self.relay.catalog, self.relay.addresses
            self._tools = {ts: [tool_of(op) for op in catalog.listed(ts) if op.plane in served] for ts in catalog.toolsets()}
        self.relay.catalog.check_toolset(toolset)
        return self._tools.get(toolset, [])

    async def _list_tools(self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=self.tools(toolset_of(ctx.request)))

    def _input_schema(self, name: str) -> Mapping[str, Any] | None:
        # Any op, listed or not, so a by-name call to an unlisted op is checked like a listed one.
        op = self.relay.catalog.get(self.door.op_name(name))
        return op.input_schema if op is not None and op.plane in self.relay.addresses else None

    # -- calls -----------------------------------------------------------------------------

    async def _call_tool(self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        headers, args = forwarded_headers(ctx.request), params.arguments or {}
        if toolset_of(ctx.request) == assistant_toolset.TOOLSET:
            args, headers = assistant_toolset.assistant_call(args, headers, self.door.verify)
        try:
            result = await self.relay.call(self.door.op_name(params.name), args, headers, TRANSPORT)
        except LoomError as err:
            return error_result(err)
        except Exception:
            # unexpected: a tool error with no text, logged here (the MCP SDK would send its text)
            log.exception("mcp: tool %r failed", params.name)
            return error_result(LoomError())
        return ok_result(result)


__all__ = ["McpServer", "error_result", "ok_result", "tool_of"]

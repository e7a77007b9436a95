"""MCP door (being written): streamable HTTP via the official `mcp` SDK."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from starlette.responses import JSONResponse

from .relay import Relay


class LoomMCP:
    def __init__(self, relay: Relay) -> None:
        self.relay = relay

    @contextlib.asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        yield

    def asgi_app(self) -> Any:
        async def app(scope: Any, receive: Any, send: Any) -> None:
            await JSONResponse({"error": {"code": "UNKNOWN_OP", "message": "MCP not ready"}}, status_code=404)(scope, receive, send)

        return app

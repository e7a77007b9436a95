"""The task ops as MCP tools: `.venv/bin/python examples/doors/mcp_tools.py`."""

import asyncio
import os

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


async def main() -> None:
    url = os.environ.get("LOOM_URL", "http://127.0.0.1:8080") + "/mcp?toolset=tasks"
    headers = {
        "Authorization": f"Bearer {os.environ['LOOM_TOKEN']}",
        "X-Loom-Namespace": os.environ.get("LOOM_NAMESPACE", "private"),
        "X-Loom-Agent": "mcp-example",
    }
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http, Client(streamable_http_client(url, http_client=http)) as mcp:
        tools = await mcp.list_tools()
        names = sorted(t.name for t in tools.tools)
        print(names)  # ['loom_inbox_list', 'loom_task_complete', ...]
        assert "loom_inbox_list" in names
        result = await mcp.call_tool("loom_inbox_list", {})
        print(result.structured_content)


asyncio.run(main())

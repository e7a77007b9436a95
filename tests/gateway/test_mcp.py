"""The MCP door, driven by the `mcp` SDK's own streamable HTTP client against the running stack.

Every client test runs on both protocol eras the SDK speaks: "legacy" (the `initialize`
handshake, what LibreChat's MCP client uses) and "auto" (the SDK's default, which discovers
the server and adopts the 2026-07-28 per-request envelope).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import mcp_types as types
import pytest
from loom_core.catalog import OpSpec
from loom_runner.embedded import Instance
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import Tenant, unique

ERAS = ["legacy", "auto"]


@pytest.fixture(params=ERAS)
def era(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@asynccontextmanager
async def mcp_client(url: str, era: str, **headers: str) -> AsyncIterator[tuple[Client, httpx2.AsyncClient]]:
    """An SDK client on `url`; its httpx2 client is returned too, so a test can change the
    headers between calls of one session."""
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http), mode=era) as client,
    ):
        yield client, http


def bearer(token: str) -> str:
    return f"Bearer {token}"


def served(stack: Instance, ops: list[OpSpec]) -> set[str]:
    assert stack.relay is not None
    return {op.name for op in ops if op.plane in stack.relay.addresses}


def error_of(result: types.CallToolResult) -> dict[str, Any]:
    assert result.is_error, result
    body = result.structured_content
    assert isinstance(body, dict) and set(body) == {"error"}, body
    # The text item carries the same body, for clients that read only text.
    assert [json.loads(c.text) for c in result.content if isinstance(c, types.TextContent)] == [body]
    err = body["error"]
    assert isinstance(err, dict)
    return err


async def ledger_rows(stack: Instance, org: str, want: int) -> list[dict[str, Any]]:
    """The org's ledger rows, once at least `want` have landed (rows are written in the background)."""
    rows: list[dict[str, Any]] = []
    for _ in range(100):
        await stack.runtime.ledger.flush()
        rows = await stack.runtime.store.query(
            "SELECT op, run_id, transport, agent, ok, error_code FROM {db}.agent_events WHERE org = {org:String} ORDER BY ts",
            {"org": org},
        )
        if len(rows) >= want:
            return rows
        await asyncio.sleep(0.05)
    raise AssertionError(f"expected {want} ledger rows for {org}, found {rows}")


# -- handshake and listings --------------------------------------------------------------------


async def test_initialize_names_loom_and_offers_tools(stack: Instance) -> None:
    async with mcp_client(stack.base_url + "/mcp", "legacy") as (client, _):
        assert client.protocol_version == "2025-11-25"
        assert client.server_info is not None and client.server_info.name == "loom"
        assert client.server_capabilities.tools is not None


async def test_auto_mode_adopts_the_per_request_era(stack: Instance) -> None:
    async with mcp_client(stack.base_url + "/mcp", "auto") as (client, _):
        assert client.protocol_version == "2026-07-28"
        assert client.server_capabilities.tools is not None


async def test_listing_without_toolset_shows_every_listed_op_with_its_schema(stack: Instance, era: str) -> None:
    assert stack.relay is not None
    catalog = stack.relay.catalog
    async with mcp_client(stack.base_url + "/mcp", era) as (client, _):
        listed = await client.list_tools()
    tools = {t.name: t for t in listed.tools}
    assert set(tools) == served(stack, catalog.listed(None))
    assert "auth.whoami" in tools and "token.mint" in tools
    for name, tool in tools.items():
        op = catalog.ops[name]
        assert not op.unlisted
        assert tool.input_schema == op.input_schema
        assert tool.description == op.summary


async def test_admin_toolset_lists_exactly_the_admin_ops(stack: Instance, era: str) -> None:
    assert stack.relay is not None
    # Ops of a plane this stack does not run are unknown here, so they are not listed either.
    admin_ops = served(stack, [op for op in stack.relay.catalog.ops.values() if "admin" in op.toolsets and not op.unlisted])
    async with mcp_client(stack.base_url + "/mcp?toolset=admin", era) as (client, _):
        listed = await client.list_tools()
    names = {t.name for t in listed.tools}
    assert names == served(stack, stack.relay.catalog.listed("admin")) == admin_ops
    assert "token.mint" in names
    assert "auth.whoami" not in names


async def test_trailing_slash_path_serves_the_same_toolset_listing(stack: Instance, era: str) -> None:
    assert stack.relay is not None
    async with mcp_client(stack.base_url + "/mcp/?toolset=admin", era) as (client, _):
        listed = await client.list_tools()
    assert {t.name for t in listed.tools} == served(stack, stack.relay.catalog.listed("admin"))
    assert "token.mint" in {t.name for t in listed.tools}


@pytest.mark.parametrize("path", ["/mcp", "/mcp/"])
async def test_mcp_paths_answer_without_a_redirect(stack: Instance, path: str) -> None:
    # The SDK client follows same-origin redirects, so the tests above would not notice one.
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
    }
    headers = {"Accept": "application/json, text/event-stream"}
    async with httpx2.AsyncClient(base_url=stack.base_url, timeout=30) as http:
        response = await http.post(path, json=init, headers=headers)
    assert response.status_code == 200, response.text
    assert response.json()["result"]["serverInfo"]["name"] == "loom"


async def test_unknown_toolset_lists_nothing(stack: Instance, era: str) -> None:
    async with mcp_client(stack.base_url + "/mcp?toolset=no-such-toolset", era) as (client, _):
        listed = await client.list_tools()
    assert listed.tools == []


# -- calls -------------------------------------------------------------------------------------


async def test_whoami_answers_the_token_subject_as_structured_and_text(tenant: Tenant, stack: Instance, era: str) -> None:
    async with mcp_client(stack.base_url + "/mcp", era, Authorization=bearer(tenant.token)) as (client, _):
        result = await client.call_tool("auth.whoami", {})
    assert not result.is_error, result
    body = result.structured_content
    assert isinstance(body, dict)
    assert body["subject"] == "user:admin"
    assert body["org"] == tenant.org
    assert body["namespace"] == tenant.namespace
    assert body["role"] == "admin"
    assert [json.loads(c.text) for c in result.content if isinstance(c, types.TextContent)] == [body]


async def test_call_without_token_is_a_tool_error_auth_required(stack: Instance, era: str) -> None:
    async with mcp_client(stack.base_url + "/mcp", era) as (client, _):
        result = await client.call_tool("auth.whoami", {})
    err = error_of(result)
    assert err["code"] == "AUTH_REQUIRED"
    assert err["message"]
    assert "Traceback" not in json.dumps(err)


async def test_bad_token_is_a_tool_error_auth_invalid(stack: Instance, era: str) -> None:
    async with mcp_client(stack.base_url + "/mcp", era, Authorization="Bearer not-a-jwt") as (client, _):
        result = await client.call_tool("auth.whoami", {})
    assert error_of(result)["code"] == "AUTH_INVALID"


async def test_unknown_field_is_validation_failed_naming_the_field(tenant: Tenant, stack: Instance, era: str) -> None:
    async with mcp_client(stack.base_url + "/mcp", era, Authorization=bearer(tenant.token)) as (client, _):
        result = await client.call_tool("auth.whoami", {"bogus": 1})
    err = error_of(result)
    assert err["code"] == "VALIDATION_FAILED"
    assert err["detail"]["field"] == "bogus"


async def test_wrong_type_is_validation_failed_naming_the_field(tenant: Tenant, stack: Instance, era: str) -> None:
    async with mcp_client(stack.base_url + "/mcp", era, Authorization=bearer(tenant.token)) as (client, _):
        result = await client.call_tool("namespace.create", {"name": 42})
    err = error_of(result)
    assert err["code"] == "VALIDATION_FAILED"
    assert err["detail"]["field"] == "name"


async def test_unknown_tool_is_a_tool_error_unknown_op(tenant: Tenant, stack: Instance, era: str) -> None:
    async with mcp_client(stack.base_url + "/mcp", era, Authorization=bearer(tenant.token)) as (client, _):
        result = await client.call_tool("nope.nothing", {})
    err = error_of(result)
    assert err["code"] == "UNKNOWN_OP"
    assert err["detail"] == {"op": "nope.nothing"}


async def test_op_outside_the_toolset_is_still_callable_by_name(tenant: Tenant, stack: Instance, era: str) -> None:
    # The call path ignores the listing: the same path serves unlisted ops by name.
    url = stack.base_url + "/mcp?toolset=admin"
    async with mcp_client(url, era, Authorization=bearer(tenant.token)) as (client, _):
        names = {t.name for t in (await client.list_tools()).tools}
        result = await client.call_tool("auth.whoami", {})
    assert "auth.whoami" not in names
    assert not result.is_error, result
    assert isinstance(result.structured_content, dict)
    assert result.structured_content["org"] == tenant.org


async def test_unlisted_op_is_callable_by_name_but_never_listed(tenant: Tenant, stack: Instance, era: str) -> None:
    assert stack.relay is not None
    unlisted = [op for op in stack.relay.catalog.ops.values() if op.unlisted and op.plane in stack.relay.addresses]
    # Whatever the catalog holds, no listing may show an unlisted op.
    for toolset in {None, *(t for op in stack.relay.catalog.ops.values() for t in op.toolsets)}:
        assert not any(op.unlisted for op in stack.relay.catalog.listed(toolset))
    if not unlisted:
        pytest.skip("the catalog has no unlisted op yet; this test covers the first one added")
    op = unlisted[0]
    toolsets = [None, *op.toolsets]
    async with mcp_client(stack.base_url + "/mcp", era, Authorization=bearer(tenant.token)) as (client, _):
        for toolset in toolsets:
            url = stack.base_url + "/mcp" + (f"?toolset={toolset}" if toolset else "")
            async with mcp_client(url, era) as (lister, _):
                assert op.name not in {t.name for t in (await lister.list_tools()).tools}
        result = await client.call_tool(op.name, {})
    if result.is_error:
        # Reached the op: whatever it refuses (arguments, role), it is not an unknown tool.
        assert error_of(result)["code"] != "UNKNOWN_OP"


# -- headers -----------------------------------------------------------------------------------


async def test_headers_are_read_per_call_and_run_id_lands_in_the_ledger(tenant: Tenant, stack: Instance, era: str) -> None:
    run_a, run_b = unique("run"), unique("run")
    async with mcp_client(stack.base_url + "/mcp", era) as (client, http):
        # One session, headers changed between calls: each call carries its own request's.
        refused = await client.call_tool("auth.whoami", {})
        http.headers["Authorization"] = bearer(tenant.token)
        http.headers["X-Loom-Run-Id"] = run_a
        http.headers["X-Loom-Agent"] = "mcp-tester"
        first = await client.call_tool("auth.whoami", {})
        http.headers["X-Loom-Run-Id"] = run_b
        second = await client.call_tool("auth.whoami", {})
    assert error_of(refused)["code"] == "AUTH_REQUIRED"
    assert not first.is_error and not second.is_error
    assert isinstance(first.structured_content, dict)
    assert first.structured_content["agent"] == "mcp-tester"

    rows = await ledger_rows(stack, tenant.org, want=2)
    assert [(r["op"], r["run_id"], r["transport"], r["agent"]) for r in rows] == [
        ("auth.whoami", run_a, "mcp", "mcp-tester"),
        ("auth.whoami", run_b, "mcp", "mcp-tester"),
    ]


async def test_namespace_header_picks_the_call_namespace(tenant: Tenant, stack: Instance, era: str) -> None:
    other = unique("ns")
    url = stack.base_url + "/mcp"
    async with mcp_client(url, era, Authorization=bearer(tenant.token)) as (client, http):
        created = await client.call_tool("namespace.create", {"name": other})
        assert not created.is_error, created
        http.headers["X-Loom-Namespace"] = other
        result = await client.call_tool("auth.whoami", {})
    assert isinstance(result.structured_content, dict)
    assert result.structured_content["namespace"] == other


async def test_failed_call_is_ledgered_with_its_code_over_mcp(tenant: Tenant, stack: Instance, era: str) -> None:
    run = unique("run")
    headers = {"Authorization": bearer(tenant.token), "X-Loom-Run-Id": run}
    async with mcp_client(stack.base_url + "/mcp", era, **headers) as (client, _):
        result = await client.call_tool("grants.set", {"subject": "user:someone", "role": "no-such-role"})
    code = error_of(result)["code"]
    rows = await ledger_rows(stack, tenant.org, want=1)
    assert [(r["op"], r["run_id"], r["transport"], r["ok"], r["error_code"]) for r in rows] == [("grants.set", run, "mcp", False, code)]

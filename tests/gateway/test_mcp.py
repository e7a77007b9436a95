"""The MCP door, driven by the `mcp` SDK's own streamable HTTP client against the running stack.

Every client test runs on both protocol eras the SDK speaks: "legacy" (the `initialize`
handshake, what LibreChat's MCP client uses) and "auto" (the SDK's default, which discovers
the server and adopts the 2026-07-28 per-request envelope).
"""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
import mcp_types as types
import pytest
from loom_core.catalog import OpSpec
from loom_gateway.mcp import TOOL_NAME, LoomMCP, tool_name
from loom_runner.embedded import Instance
from mcp import Client, MCPError
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
    """The tool names of the ops this stack serves."""
    assert stack.relay is not None
    return {tool_name(op.name) for op in ops if op.plane in stack.relay.addresses}


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


async def test_initialize_names_loom_and_offers_tools(stack: Instance, tenant: Tenant) -> None:
    async with mcp_client(stack.base_url + "/mcp", "legacy", Authorization=bearer(tenant.token)) as (client, _):
        assert client.protocol_version == "2025-11-25"
        assert client.server_info is not None and client.server_info.name == "loom"
        assert client.server_capabilities.tools is not None


async def test_auto_mode_adopts_the_per_request_era(stack: Instance, tenant: Tenant) -> None:
    async with mcp_client(stack.base_url + "/mcp", "auto", Authorization=bearer(tenant.token)) as (client, _):
        assert client.protocol_version == "2026-07-28"
        assert client.server_capabilities.tools is not None


async def test_listing_without_toolset_is_the_all_listing_with_model_safe_names_and_schemas(
    stack: Instance, tenant: Tenant, era: str
) -> None:
    assert stack.relay is not None
    catalog = stack.relay.catalog
    async with mcp_client(stack.base_url + "/mcp", era, Authorization=bearer(tenant.token)) as (client, _):
        listed = await client.list_tools()
        all_listed = await mcp_list(stack.base_url + "/mcp?toolset=all", era, tenant.token)
    tools = {t.name: t for t in listed.tools}
    assert set(tools) == {t.name for t in all_listed}
    # An op the spec names a tool for is listed under that name (search.unified is loom_search).
    assert "loom_search" in tools and "loom_search_unified" not in tools
    assert set(tools) == served(stack, catalog.listed("all"))
    assert "loom_auth_whoami" in tools and "loom_token_mint" in tools
    by_tool = {tool_name(name): op for name, op in catalog.ops.items()}
    for name, tool in tools.items():
        assert TOOL_NAME.match(name), name
        op = by_tool[name]
        assert not op.unlisted and not op.experimental
        assert tool.input_schema == op.input_schema
        assert tool.output_schema == op.output_schema
        assert op.name in (tool.description or "")


async def mcp_list(url: str, era: str, token: str) -> list[types.Tool]:
    async with mcp_client(url, era, Authorization=bearer(token)) as (client, _):
        return list((await client.list_tools()).tools)


async def test_v1_ops_and_mcp_list_the_same_ops_for_every_toolset(stack: Instance, tenant: Tenant) -> None:
    assert stack.relay is not None
    async with httpx.AsyncClient(base_url=stack.base_url, timeout=30) as http:
        for toolset in stack.relay.catalog.toolsets():
            ops = (await http.get("/v1/ops", params={"toolset": toolset})).json()["ops"]
            tools = await mcp_list(stack.base_url + f"/mcp?toolset={toolset}", "legacy", tenant.token)
            assert {o["tool"] for o in ops} == {t.name for t in tools}, toolset
        every = {o["name"]: o for o in (await http.get("/v1/ops")).json()["ops"]}
        listed_all = {o["name"] for o in (await http.get("/v1/ops?toolset=all")).json()["ops"]}
    # No toolset: every op served, the ones MCP's default listing leaves out marked as such.
    assert set(every) == {name for name, op in stack.relay.catalog.ops.items() if op.plane in stack.relay.addresses}
    assert {n for n, o in every.items() if o["experimental"] or o["unlisted"]} == set(every) - listed_all
    assert {"help.search", "help.get", "assistant.ask"} <= {n for n, o in every.items() if o["experimental"]}


async def test_admin_toolset_lists_exactly_the_admin_ops(stack: Instance, tenant: Tenant, era: str) -> None:
    assert stack.relay is not None
    # Ops of a plane this stack does not run are unknown here, so they are not listed either.
    admin_ops = served(stack, [op for op in stack.relay.catalog.ops.values() if "admin" in op.toolsets and not op.unlisted])
    names = {t.name for t in await mcp_list(stack.base_url + "/mcp?toolset=admin", era, tenant.token)}
    assert names == served(stack, stack.relay.catalog.listed("admin")) == admin_ops
    assert "loom_token_mint" in names
    assert "loom_auth_whoami" not in names


async def test_trailing_slash_path_serves_the_same_toolset_listing(stack: Instance, tenant: Tenant, era: str) -> None:
    assert stack.relay is not None
    names = {t.name for t in await mcp_list(stack.base_url + "/mcp/?toolset=admin", era, tenant.token)}
    assert names == served(stack, stack.relay.catalog.listed("admin"))
    assert "loom_token_mint" in names


@pytest.mark.parametrize("path", ["/mcp", "/mcp/"])
async def test_mcp_paths_answer_without_a_redirect(stack: Instance, tenant: Tenant, path: str) -> None:
    # The SDK client follows same-origin redirects, so the tests above would not notice one.
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
    }
    headers = {"Accept": "application/json, text/event-stream", "Authorization": bearer(tenant.token)}
    async with httpx2.AsyncClient(base_url=stack.base_url, timeout=30) as http:
        response = await http.post(path, json=init, headers=headers)
    assert response.status_code == 200, response.text
    assert response.json()["result"]["serverInfo"]["name"] == "loom"


INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}


async def test_unknown_toolset_is_a_400_naming_the_known_ones(stack: Instance, tenant: Tenant) -> None:
    assert stack.relay is not None
    headers = {"Accept": "application/json, text/event-stream", "Authorization": bearer(tenant.token)}
    async with httpx.AsyncClient(base_url=stack.base_url, timeout=30) as http:
        mcp = await http.post("/mcp?toolset=no-such-toolset", json=INIT, headers=headers)
        ops = await http.get("/v1/ops?toolset=no-such-toolset")
    assert mcp.json()["jsonrpc"] == "2.0" and mcp.json()["id"] == INIT["id"]
    for response in (mcp, ops):
        assert response.status_code == 400
        err = response.json()["error"]
        err = err.get("data", err)  # MCP: a JSON-RPC error object, Loom's error in `data`
        assert err["code"] == "UNKNOWN_TOOLSET" and err["retryable"] is False
        assert err["detail"]["known"] == stack.relay.catalog.toolsets()
        assert "admin" in err["message"] and "all" in err["message"]


@pytest.mark.parametrize("authorization", [None, "Bearer not-a-jwt", "Basic dXNlcjpwYXNz"])
async def test_mcp_request_without_a_valid_token_is_http_401_with_the_bearer_challenge(stack: Instance, authorization: str | None) -> None:
    headers = {"Accept": "application/json, text/event-stream"}
    if authorization:
        headers["Authorization"] = authorization
    async with httpx.AsyncClient(base_url=stack.base_url, timeout=30) as http:
        response = await http.post("/mcp", json=INIT, headers=headers)
        assert response.status_code == 401
        challenge = response.headers["www-authenticate"]
        assert challenge.startswith("Bearer ")
        metadata_url = challenge.split('resource_metadata="', 1)[1].split('"', 1)[0]
        metadata = (await http.get(metadata_url)).json()
    assert response.json()["error"]["data"]["code"] in ("AUTH_REQUIRED", "AUTH_INVALID")
    assert metadata["resource"] == stack.base_url + "/mcp"
    assert metadata["bearer_methods_supported"] == ["header"]


def leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in leaves(sub)]
    return [exc]


async def test_official_client_without_a_token_gets_no_session_and_no_tools(stack: Instance) -> None:
    listed = None
    with pytest.raises(BaseExceptionGroup) as caught:
        async with mcp_client(stack.base_url + "/mcp", "legacy") as (client, _):
            listed = await client.list_tools()
    assert listed is None
    assert any(isinstance(leaf, MCPError) for leaf in leaves(caught.value)), caught.value


async def test_official_client_shows_looms_message_for_a_refused_request(stack: Instance, tenant: Tenant) -> None:
    """A refusal of the HTTP request itself is a JSON-RPC error object: the official client
    raises it with Loom's message and code, not "Server returned an error response"."""
    with pytest.raises(BaseExceptionGroup) as caught:
        async with mcp_client(stack.base_url + "/mcp?toolset=no-such-toolset", "legacy", Authorization=bearer(tenant.token)) as (c, _):
            await c.list_tools()
    errors = [leaf for leaf in leaves(caught.value) if isinstance(leaf, MCPError)]
    assert errors, caught.value
    assert "no-such-toolset" in str(errors[0]) or "toolset" in str(errors[0])
    assert errors[0].error.data["code"] == "UNKNOWN_TOOLSET"


async def test_a_stateless_call_logs_no_terminating_session_line(tenant: Tenant, stack: Instance, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG):
        async with mcp_client(stack.base_url + "/mcp", "legacy", Authorization=bearer(tenant.token)) as (client, _):
            await client.call_tool("auth.whoami", {})
    assert not [r for r in caplog.records if "Terminating session" in r.getMessage()]


@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT"])
async def test_non_post_on_mcp_is_405_and_holds_no_stream(stack: Instance, tenant: Tenant, method: str) -> None:
    async with httpx.AsyncClient(base_url=stack.base_url, timeout=30) as http:
        response = await http.request(method, "/mcp", headers={"Accept": "text/event-stream", "Authorization": bearer(tenant.token)})
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"
    assert response.json()["error"]["data"]["code"] == "VALIDATION_FAILED"


# -- the SDK's server, started on first use ----------------------------------------------------


def test_starting_a_gateway_imports_no_mcp_sdk() -> None:
    """`loom up`'s imports (the embedded runner, the gateway's app) leave the SDK out: it is
    imported by the first /mcp request (mcp_server.py)."""
    probe = (
        "import sys, loom_runner.embedded, loom_gateway.app; print(sorted({m.split('.')[0] for m in sys.modules} & {'mcp', 'mcp_types'}))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


async def test_concurrent_first_requests_start_one_server_which_stops_with_the_door(stack: Instance, tenant: Tenant) -> None:
    assert stack.relay is not None
    door = LoomMCP(stack.relay, verify=stack.runtime.auth.verify)
    starts: list[object] = []
    real_started = door._started

    async def counted() -> Any:
        server = await real_started()
        starts.append(server)
        return server

    door._started = counted  # type: ignore[method-assign]
    transport = httpx2.ASGITransport(app=door.asgi_app())
    async with httpx2.AsyncClient(transport=transport, base_url="http://loom", headers={"Authorization": bearer(tenant.token)}) as http:

        async def listing(era: str) -> set[str]:
            async with Client(streamable_http_client("http://loom/mcp", http_client=http), mode=era) as client:
                return {t.name for t in (await client.list_tools()).tools}

        async def whoami(era: str) -> dict[str, Any]:
            async with Client(streamable_http_client("http://loom/mcp", http_client=http), mode=era) as client:
                result = await client.call_tool("auth.whoami", {})
            assert not result.is_error and isinstance(result.structured_content, dict), result
            return result.structured_content

        for round_ in range(2):  # each run of the door starts a fresh server
            async with door.run():
                # Four clients at once, each one's first request reaching a door with no server yet.
                a, b, c, d = await asyncio.gather(listing("legacy"), listing("auto"), whoami("legacy"), whoami("auto"))
                assert tool_name("auth.whoami") in a and a == b
                assert c["org"] == d["org"] == tenant.org
            servers = set(map(id, starts))
            assert len(servers) == round_ + 1, "concurrent first requests started more than one server"
            assert door._serving is None and door._server is None
            # Outside run(): refused before the SDK is reached, as a JSON-RPC error.
            body = {"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {}}
            refused = await http.post("/mcp", json=body, headers={"Accept": "application/json, text/event-stream"})
            assert refused.status_code == 503, refused.text
            assert refused.json()["id"] == 7 and refused.json()["error"]["data"]["code"] == "BACKEND_UNAVAILABLE"


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


async def test_tool_name_and_dotted_op_name_call_the_same_op(tenant: Tenant, stack: Instance, era: str) -> None:
    async with mcp_client(stack.base_url + "/mcp", era, Authorization=bearer(tenant.token)) as (client, _):
        by_tool = await client.call_tool("loom_auth_whoami", {})
        by_op = await client.call_tool("auth.whoami", {})
    assert not by_tool.is_error and not by_op.is_error
    assert by_tool.structured_content == by_op.structured_content


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
        result = await client.call_tool("loom_auth_whoami", {})
    assert "loom_auth_whoami" not in names
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
            assert tool_name(op.name) not in {t.name for t in await mcp_list(url, era, tenant.token)}
        result = await client.call_tool(tool_name(op.name), {})
    if result.is_error:
        # Reached the op: whatever it refuses (arguments, role), it is not an unknown tool.
        assert error_of(result)["code"] != "UNKNOWN_OP"


# -- headers -----------------------------------------------------------------------------------


async def test_headers_are_read_per_call_and_run_id_lands_in_the_ledger(tenant: Tenant, stack: Instance, era: str) -> None:
    run_a, run_b = unique("run"), unique("run")
    async with mcp_client(stack.base_url + "/mcp", era, Authorization=bearer(tenant.token)) as (client, http):
        # One session, headers changed between calls: each call carries its own request's.
        refused = await client.call_tool("auth.whoami", {"bogus": 1})  # refused before the chain, with its ledger row
        http.headers["X-Loom-Run-Id"] = run_a
        http.headers["X-Loom-Agent"] = "mcp-tester"
        first = await client.call_tool("auth.whoami", {})
        http.headers["X-Loom-Run-Id"] = run_b
        second = await client.call_tool("auth.whoami", {})
    assert error_of(refused)["code"] == "VALIDATION_FAILED"
    assert not first.is_error and not second.is_error
    assert isinstance(first.structured_content, dict)
    assert first.structured_content["agent"] == "mcp-tester"

    rows = await ledger_rows(stack, tenant.org, want=3)
    assert [(r["op"], r["run_id"], r["transport"], r["agent"], r["error_code"]) for r in rows] == [
        ("auth.whoami", "", "mcp", "", "VALIDATION_FAILED"),
        ("auth.whoami", run_a, "mcp", "mcp-tester", ""),
        ("auth.whoami", run_b, "mcp", "mcp-tester", ""),
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
        # Valid arguments the plane refuses (no such namespace): refused in the chain, so ledgered.
        result = await client.call_tool("grants.set", {"subject": "user:someone", "role": "viewer", "namespace": "no-such-namespace"})
    code = error_of(result)["code"]
    rows = await ledger_rows(stack, tenant.org, want=1)
    assert [(r["op"], r["run_id"], r["transport"], r["ok"], r["error_code"]) for r in rows] == [("grants.set", run, "mcp", False, code)]

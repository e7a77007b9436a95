"""The gate on every door: the same scenarios through REST, gRPC (straight to the planes'
servers: policy.* to stack.grpc_address("policy"), gated ops to their own plane) and MCP
(the `mcp` SDK's client on /mcp). Shadow logs and allows; enforce denies with the deciding
values; an evaluation error denies a write and allows a read; policy.* is never gated; the
caller pin holds."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import grpc
import httpx
import httpx2
import pytest
from loom_core.catalog import message_to_json
from loom_core.errors import LoomError
from loom_core.grpc_errors import from_rpc_error
from loom_runner.embedded import Instance
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import Tenant, call

from .conftest import eventually, one_list_per_hour

DOORS = ["rest", "grpc", "mcp"]


@dataclass
class Answer:
    body: dict[str, Any] | None = None
    error: dict[str, Any] | None = None

    def ok(self) -> dict[str, Any]:
        assert self.error is None, self.error
        assert self.body is not None
        return self.body

    def refused(self, code: str) -> dict[str, Any]:
        assert self.error is not None, self.body
        assert self.error["code"] == code, self.error
        return self.error


class Door:
    """One way in: call(op, **args) with a token and labels, answering the op's JSON or the
    error model."""

    def __init__(self, kind: str, inst: Instance, tenant: Tenant, token: str, labels: dict[str, str]) -> None:
        self.kind, self.inst, self.tenant, self.token, self.labels = kind, inst, tenant, token, labels
        self._channels: dict[str, grpc.aio.Channel] = {}

    async def __aenter__(self) -> Door:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        for ch in self._channels.values():
            await ch.close()

    async def call(self, op: str, **args: Any) -> Answer:
        if self.kind == "rest":
            async with httpx.AsyncClient(
                base_url=self.inst.base_url, headers={"Authorization": f"Bearer {self.token}", **self.labels}, timeout=30
            ) as c:
                r = await call(c, op, **args)
            body = r.json()
            return Answer(error=body["error"]) if r.status_code != 200 else Answer(body=body)
        if self.kind == "grpc":
            return await self._grpc(op, args)
        # One MCP client per call: an MCP session's task scope must open and close in one task.
        headers = {"Authorization": f"Bearer {self.token}", "X-Loom-Namespace": self.tenant.namespace, **self.labels}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30) as http,
            Client(streamable_http_client(self.inst.base_url + "/mcp", http_client=http), mode="legacy") as client,
        ):
            result = await client.call_tool(op, args)
        content = result.structured_content
        assert isinstance(content, dict)
        return Answer(error=content["error"]) if result.is_error else Answer(body=content)

    async def _grpc(self, op_name: str, args: dict[str, Any]) -> Answer:
        catalog = self.inst.runtime.catalog
        op = catalog.get(op_name)
        assert op is not None
        channel = self._channels.get(op.plane)
        if channel is None:
            channel = self._channels[op.plane] = grpc.aio.insecure_channel(self.inst.grpc_address(op.plane))
        stub = channel.unary_unary(
            op.grpc_path, request_serializer=op.request_cls.SerializeToString, response_deserializer=op.response_cls.FromString
        )
        md = [
            ("authorization", f"Bearer {self.token}"),
            ("x-loom-namespace", self.tenant.namespace),
            *((k.lower(), v) for k, v in self.labels.items()),
        ]
        try:
            response = await stub(catalog.parse_request(op, args), metadata=md, timeout=30)
        except grpc.aio.AioRpcError as exc:
            err: LoomError = from_rpc_error(exc)
            return Answer(error=err.to_payload())
        return Answer(body=message_to_json(response))


@pytest.fixture(params=DOORS)
def door_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def enforce_door(door_kind: str, enforce_stack: Instance, enforce_tenant: Tenant) -> AsyncIterator[Door]:
    async with Door(door_kind, enforce_stack, enforce_tenant, enforce_tenant.token, {"X-Loom-Agent": "bot"}) as d:
        yield d


@pytest.fixture
async def shadow_door(door_kind: str, shadow_stack: Instance, shadow_tenant: Tenant) -> AsyncIterator[Door]:
    async with Door(door_kind, shadow_stack, shadow_tenant, shadow_tenant.token, {"X-Loom-Agent": "bot"}) as d:
        yield d


async def test_shadow_logs_and_allows(shadow_door: Door) -> None:
    (await shadow_door.call("policy.set", **one_list_per_hour())).ok()
    (await shadow_door.call("grants.list")).ok()
    (await shadow_door.call("grants.list")).ok()

    async def denied() -> list[dict[str, Any]]:
        return list((await shadow_door.call("policy.decisions", decision="deny")).ok()["decisions"])

    [d] = await eventually(denied)
    assert (d["enforced"], d["mode"], d["operation"], d["determining_rules"]) == (False, "shadow", "grants.list", ["one-list-per-hour"])
    transport = {"rest": "rest", "grpc": "grpc", "mcp": "mcp"}[shadow_door.kind]
    row = await shadow_door.inst.runtime.store.query(
        "SELECT transport FROM {db}.policy_decisions WHERE request_id = {r:String}", {"r": d["request_id"]}
    )
    assert row and row[0]["transport"] == transport


async def test_enforce_denies_with_the_deciding_values(enforce_door: Door) -> None:
    (await enforce_door.call("policy.set", **one_list_per_hour())).ok()
    (await enforce_door.call("grants.list")).ok()
    err = (await enforce_door.call("grants.list")).refused("POLICY_FORBIDDEN")
    assert err["detail"]["determining_rules"] == ["one-list-per-hour"]
    leaf = err["detail"]["rules"][0]["leaves"][0]
    assert (leaf["op"], leaf["operation"], leaf["observed"], leaf["cmp"], leaf["threshold"], leaf["holds"]) == (
        "count_within",
        "grants.list",
        1.0,
        "gte",
        1.0,
        True,
    )


async def test_an_evaluation_error_denies_a_write_and_allows_a_read(enforce_door: Door) -> None:
    broken = {"op": "formerly", "within": "1h", "operation": "grants.list", "args_equal": {"subject": "$args.nope"}}
    (await enforce_door.call("policy.set", name="broken", effect="require", actions=["grants.*"], condition=broken)).ok()
    (await enforce_door.call("grants.list")).ok()
    err = (await enforce_door.call("grants.set", subject="user:x", role="viewer")).refused("POLICY_FORBIDDEN")
    assert err["detail"]["errors"][0]["message"] == "$args.nope: the call has no argument nope"


async def test_policy_ops_are_never_gated(enforce_door: Door) -> None:
    always = {"op": "count_within", "within": "1h", "operation": "*", "cmp": "gte", "value": 0}
    (await enforce_door.call("policy.set", name="all-shut", effect="forbid", actions=["*"], condition=always)).ok()
    (await enforce_door.call("auth.whoami")).refused("POLICY_FORBIDDEN")
    for op, args in [
        ("policy.list", {}),
        ("policy.check", {"operation": "auth.whoami"}),
        ("policy.decisions", {}),
        ("policy.replay", {"since": "1h"}),
    ]:
        (await enforce_door.call(op, **args)).ok()
    (await enforce_door.call("policy.delete", name="all-shut")).ok()
    (await enforce_door.call("auth.whoami")).ok()


async def test_the_caller_pin(door_kind: str, enforce_stack: Instance, enforce_tenant: Tenant) -> None:
    async with Door(door_kind, enforce_stack, enforce_tenant, enforce_tenant.token, {"X-Loom-Agent": "bot"}) as admin:
        (await admin.call("policy.set", **one_list_per_hour())).ok()
        (await admin.call("sa.create", name="twin", role="viewer")).ok()
        minted = (await admin.call("token.mint", subject="sa:twin", roles={enforce_tenant.namespace: "viewer"})).ok()
        (await admin.call("grants.list")).ok()
        (await admin.call("grants.list")).refused("POLICY_FORBIDDEN")
    async with Door(door_kind, enforce_stack, enforce_tenant, minted["token"], {"X-Loom-Agent": "bot"}) as twin:
        (await twin.call("grants.list")).ok()  # same label, another subject: none of the admin's calls count
        err = (await twin.call("grants.list")).refused("POLICY_FORBIDDEN")
    assert err["detail"]["rules"][0]["leaves"][0]["observed"] == 1.0


def test_doors_cover_rest_grpc_and_mcp() -> None:
    assert json.dumps(DOORS) == '["rest", "grpc", "mcp"]'

"""The SDK against the running stack: generated ops, headers, minted tokens, typed errors, ledger."""

from __future__ import annotations

import asyncio
import socket
import uuid

import httpx
import pytest
from loom import (
    Agent,
    AuthError,
    ForbiddenError,
    LoomError,
    NotFoundError,
    UnavailableError,
    UnknownOpError,
    ValidationError,
)
from loom_runner.embedded import Instance

from tests.conftest import Tenant, unique

from .conftest import AGENT_LABEL


def _agent(tenant: Tenant, **overrides: object) -> Agent:
    kwargs: dict[str, object] = {
        "org": tenant.org,
        "namespace": tenant.namespace,
        "agent": AGENT_LABEL,
        "api_key": tenant.token,
        "base_url": tenant.base_url,
    }
    kwargs.update(overrides)
    return Agent(**kwargs)  # type: ignore[arg-type]


async def test_whoami_answers_the_subject_and_the_labels_the_agent_sends(tenant: Tenant) -> None:
    async with _agent(tenant, user="ada", session="s-1") as a:
        me = await a.ops.auth.whoami()
    assert me["subject"] == "user:admin"
    assert me["org"] == tenant.org
    assert me["namespace"] == tenant.namespace
    assert me["role"] == "admin"
    assert me["agent"] == AGENT_LABEL
    assert me["user"] == "ada"
    assert me["session"] == "s-1"


async def test_generic_call_reaches_the_same_op_as_the_generated_method(agent: Agent) -> None:
    assert await agent.call("auth.whoami") == await agent.ops.auth.whoami()


async def test_namespace_create_then_list_shows_it(agent: Agent) -> None:
    name = unique("ns")
    out = await agent.ops.namespace.create(name=name, description="made by the SDK")
    assert out["created"] is True
    assert out["namespace"]["name"] == name
    listed = await agent.ops.namespace.list()
    assert name in {ns["name"] for ns in listed["namespaces"]}


async def test_namespace_argument_overrides_the_agents_namespace_for_one_call(agent: Agent) -> None:
    other = unique("ns")
    await agent.ops.namespace.create(name=other)
    out = await agent.ops.grants.set(namespace=other, subject="user:bob", role="viewer")
    assert out["grant"]["namespace"] == other
    grants = await agent.ops.grants.list(namespace=other)
    assert {(g["subject"], g["role"]) for g in grants["grants"]} >= {("user:bob", "viewer")}
    # The agent's own namespace was not touched.
    assert "user:bob" not in {g["subject"] for g in (await agent.ops.grants.list())["grants"]}


async def test_minted_token_works_in_a_new_agent_with_its_narrower_role(agent: Agent, tenant: Tenant) -> None:
    minted = await agent.ops.token.mint(roles={tenant.namespace: "viewer"}, ttl_seconds=60)
    assert minted["token"]
    async with _agent(tenant, api_key=minted["token"], agent="viewer-bot") as viewer:
        me = await viewer.ops.auth.whoami()
        assert me["token_id"] == minted["token_id"]
        assert me["role"] == "viewer"
        assert me["agent"] == "viewer-bot"
        with pytest.raises(ForbiddenError) as info:
            await viewer.ops.namespace.create(name=unique("ns"))
    assert info.value.code == "AUTH_INSUFFICIENT"
    assert info.value.status == 403


async def test_bad_token_raises_auth_error_with_code_auth_invalid(tenant: Tenant) -> None:
    async with _agent(tenant, api_key="not-a-token") as a:
        with pytest.raises(AuthError) as info:
            await a.ops.auth.whoami()
    err = info.value
    assert err.code == "AUTH_INVALID"
    assert err.status == 401
    assert err.retryable is False
    assert err.op == "auth.whoami"


async def test_missing_api_key_raises_auth_error_with_code_auth_required(tenant: Tenant, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LOOM_API_KEY", raising=False)
    async with _agent(tenant, api_key=None) as a:
        with pytest.raises(AuthError) as info:
            await a.ops.auth.whoami()
    assert info.value.code == "AUTH_REQUIRED"


async def test_api_key_and_url_default_to_the_environment(tenant: Tenant, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOOM_API_KEY", tenant.token)
    monkeypatch.setenv("LOOM_URL", tenant.base_url)
    async with Agent(org=tenant.org, namespace=tenant.namespace, agent=AGENT_LABEL) as a:
        assert a.base_url == tenant.base_url
        assert (await a.ops.auth.whoami())["subject"] == "user:admin"


async def test_from_env_reads_the_url_token_org_and_namespace_the_examples_use(tenant: Tenant, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LOOM_API_KEY", raising=False)
    for name, value in (
        ("LOOM_URL", tenant.base_url),
        ("LOOM_TOKEN", tenant.token),
        ("LOOM_ORG", tenant.org),
        ("LOOM_NAMESPACE", tenant.namespace),
    ):
        monkeypatch.setenv(name, value)
    async with Agent.from_env("docs", run_id="run-1") as a:
        assert (a.base_url, a.org, a.namespace, a.agent) == (tenant.base_url, tenant.org, tenant.namespace, "docs")
        me = await a.ops.auth.whoami()
    assert (me["subject"], me["org"], me["namespace"]) == ("user:admin", tenant.org, tenant.namespace)


async def test_from_env_overrides_win_over_the_environment(tenant: Tenant, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOOM_URL", tenant.base_url)
    monkeypatch.setenv("LOOM_TOKEN", tenant.token)
    monkeypatch.setenv("LOOM_ORG", "some-other-org")
    monkeypatch.setenv("LOOM_NAMESPACE", tenant.namespace)
    async with Agent.from_env("docs", org=tenant.org, api_key="not-a-token") as a:
        assert a.org == tenant.org
        with pytest.raises(AuthError) as info:
            await a.ops.auth.whoami()
    assert info.value.code == "AUTH_INVALID"


@pytest.mark.parametrize("unset", ["LOOM_ORG", "LOOM_NAMESPACE"])
def test_from_env_without_an_org_or_namespace_says_which_variable_is_missing(unset: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOOM_ORG", "acme")
    monkeypatch.setenv("LOOM_NAMESPACE", "private")
    monkeypatch.delenv(unset)
    with pytest.raises(ValueError, match=unset):
        Agent.from_env("docs")


async def test_unknown_op_raises_unknown_op_error(agent: Agent) -> None:
    with pytest.raises(NotFoundError) as info:
        await agent.call("nope.nothing")
    assert isinstance(info.value, UnknownOpError)
    assert info.value.code == "UNKNOWN_OP"
    assert info.value.status == 404


async def test_wrong_argument_type_raises_validation_error_naming_the_field(agent: Agent) -> None:
    with pytest.raises(ValidationError) as info:
        await agent.ops.namespace.create(name=123)  # type: ignore[arg-type]
    assert info.value.code == "VALIDATION_FAILED"
    assert info.value.status == 422
    assert info.value.field == "name"


async def test_unknown_argument_raises_validation_error_naming_it(agent: Agent) -> None:
    with pytest.raises(ValidationError) as info:
        await agent.call("namespace.create", name=unique("ns"), colour="blue")
    assert info.value.field == "colour"


async def test_token_of_another_org_is_refused_as_forbidden(tenant: Tenant) -> None:
    async with _agent(tenant, org="other-org") as a:
        with pytest.raises(ForbiddenError) as info:
            await a.ops.auth.whoami()
    assert info.value.status == 403
    assert info.value.code == "AUTH_WRONG_ORG"
    assert info.value.detail.get("reason") == "wrong_org"


async def test_unreachable_gateway_raises_unavailable_error() -> None:
    # A port that was just free: nothing listens on it.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    async with Agent(org="o", namespace="n", agent="a", api_key="k", base_url=f"http://127.0.0.1:{port}") as a:
        with pytest.raises(UnavailableError) as info:
            await a.ops.auth.whoami()
    err = info.value
    assert err.status is None
    assert err.retryable is True
    assert err.detail["reason"] == "connect"
    assert isinstance(err.__cause__, httpx.ConnectError)


async def test_every_op_the_gateway_lists_has_a_generated_method(agent: Agent, tenant: Tenant) -> None:
    async with tenant.client() as c:
        listed = (await c.get("/v1/ops")).json()["ops"]
    assert listed
    for op in listed:
        group, leaf = op["name"].split(".", 1)
        # A dotted leaf is one method: memory.record.write -> agent.ops.memory.record_write (scripts/gen_sdk.py identifier).
        assert callable(getattr(getattr(agent.ops, group), leaf.replace(".", "_"))), op["name"]


async def test_ledger_row_of_an_sdk_call_says_transport_sdk(stack: Instance, tenant: Tenant) -> None:
    run_id = uuid.uuid4().hex
    async with _agent(tenant, run_id=run_id) as a:
        await a.ops.auth.whoami()
        with pytest.raises(LoomError):
            await a.call("namespace.create", name=42)
    rows: list[dict[str, object]] = []
    for _ in range(100):
        await stack.runtime.ledger.flush()
        rows = await stack.runtime.store.query(
            "SELECT op, transport, agent, run_id, ok FROM {db}.agent_events WHERE org = {org:String} ORDER BY ts",
            {"org": tenant.org},
        )
        if any(r["op"] == "auth.whoami" for r in rows):
            break
        await asyncio.sleep(0.05)
    whoami = [r for r in rows if r["op"] == "auth.whoami"]
    assert len(whoami) == 1, rows
    assert whoami[0]["transport"] == "sdk"
    assert whoami[0]["agent"] == AGENT_LABEL
    assert whoami[0]["run_id"] == run_id
    assert whoami[0]["ok"] is True

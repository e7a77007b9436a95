"""The admin controls on the assistant's model spend: the org's model-calls switch
(org.set_model_calls / org.model_calls) and each namespace's daily model cost cap (budget.set /
budget.get, daily_cost_cap_usd), over REST and the SDK, with their refusals."""

from __future__ import annotations

import grpc
import pytest
from loom import Agent
from loom._errors import ForbiddenError, LoomError
from loom_api.assistant.v1 import assistant_pb2 as pb
from loom_api.assistant.v1 import assistant_pb2_grpc

from tests.conftest import call

from .conftest import Asker, Bench, chat_body, run_row

CHAT = "/v1/assistant/chat/completions"


async def _spend(bench: Bench, asker: Asker, namespace: str, usd: float) -> None:
    """An answer's ledger row in `namespace` today carrying `usd` of spend."""
    row = run_row(asker, namespace=namespace, run_id="spent", upstream_cost_usd=usd)
    await bench.inst.runtime.store.insert("{db}.agent_events", [row])


async def _ask(asker: Asker, token: str | None = None, namespace: str | None = None) -> tuple[int, dict[str, object]]:
    headers = {"X-Loom-Namespace": namespace} if namespace else {}
    async with asker.client(token, **headers) as c:
        r = await c.post(CHAT, json=chat_body())
    return r.status_code, r.json()


async def _namespace_with_viewer(asker: Asker, name: str) -> str:
    async with asker.client(asker.admin) as c:
        r = await call(c, "namespace.create", name=name)
        assert r.status_code == 200, r.text
    minted = await asker.mint(roles={name: "viewer"}, ttl_seconds=3600)
    return str(minted["token"])


# -- the org's model-calls switch ------------------------------------------------------------


async def test_an_org_admin_switches_model_calls_off_and_on_over_rest(bench: Bench, asker: Asker) -> None:
    async with asker.client(asker.admin) as c:
        off = await call(c, "org.set_model_calls", enabled=False)
        assert off.status_code == 200, off.text
        assert off.json() == {"org": asker.org, "enabled": False}
        assert (await call(c, "org.model_calls")).json() == {"org": asker.org, "enabled": False}
    status, body = await _ask(asker)
    assert status == 403
    assert body["error"]["code"] == "AUTH_INSUFFICIENT" and body["error"]["detail"] == {"reason": "model_calls_off"}  # type: ignore[index]
    assert not bench.emu.chat_bodies  # refused before LibreChat is called
    async with asker.client(asker.admin) as c:
        assert (await call(c, "org.set_model_calls", enabled=True)).json() == {"org": asker.org, "enabled": True}
    status, _ = await _ask(asker)
    assert status == 200


async def test_the_switch_over_the_sdk_refuses_assistant_ask_while_off(bench: Bench, asker: Asker) -> None:
    async with Agent(org=asker.org, namespace=asker.namespace, agent="admin", api_key=asker.admin, base_url=asker.base_url) as admin:
        assert await admin.ops.org.set_model_calls(enabled=False) == {"org": asker.org, "enabled": False}
        assert (await admin.ops.org.model_calls())["enabled"] is False
        async with Agent(org=asker.org, namespace=asker.namespace, agent="viewer", api_key=asker.token, base_url=asker.base_url) as a:
            with pytest.raises(ForbiddenError) as refused:
                await a.ops.assistant.ask(question="hi")
            assert refused.value.detail == {"reason": "model_calls_off"}
            await admin.ops.org.set_model_calls(enabled=True)
            assert (await a.ops.assistant.ask(question="hi"))["text"]


async def test_a_namespace_admin_or_a_viewer_cannot_switch_the_orgs_model_calls(bench: Bench, asker: Asker) -> None:
    ns_admin = str((await asker.mint(roles={asker.namespace: "admin"}, ttl_seconds=3600))["token"])
    async with asker.client(ns_admin) as c:
        r = await call(c, "org.set_model_calls", enabled=False)
    assert r.status_code == 403 and r.json()["error"]["detail"]["scope"] == "org"
    async with asker.client() as c:
        r = await call(c, "org.set_model_calls", enabled=False)
    assert r.status_code == 403 and r.json()["error"]["code"] == "AUTH_INSUFFICIENT"
    async with Agent(org=asker.org, namespace=asker.namespace, agent="ns-admin", api_key=ns_admin, base_url=asker.base_url) as a:
        with pytest.raises(ForbiddenError):
            await a.ops.org.set_model_calls(enabled=False)
        assert (await a.ops.org.model_calls())["enabled"] is True  # any member reads it
    status, _ = await _ask(asker)
    assert status == 200


async def test_another_orgs_switch_is_refused_and_leaves_this_org_answering(bench: Bench, asker: Asker) -> None:
    from loom_gateway.identity import bootstrap_org

    from tests.conftest import unique

    other_org, other_ns = unique("org"), unique("ns")
    other_admin, _ = await bootstrap_org(bench.inst.runtime.identity, bench.inst.runtime.codec, other_org, other_ns, 3600)
    async with asker.client(other_admin) as c:
        named = await call(c, "org.set_model_calls", enabled=False, org=asker.org)
        read = await call(c, "org.model_calls", org=asker.org)
        own = await call(c, "org.set_model_calls", enabled=False)
    assert named.status_code == 403 and named.json()["error"]["detail"]["reason"] == "org"
    assert read.status_code == 403 and read.json()["error"]["detail"]["reason"] == "org"
    assert own.status_code == 200 and own.json() == {"org": other_org, "enabled": False}
    async with Agent(org=other_org, namespace=other_ns, agent="x", api_key=other_admin, base_url=asker.base_url) as a:
        with pytest.raises(ForbiddenError) as refused:
            await a.ops.org.set_model_calls(enabled=True, org=asker.org)
        assert refused.value.detail["reason"] == "org"
    status, _ = await _ask(asker)  # the other org's switch is its own
    assert status == 200


async def test_the_switch_needs_its_enabled_argument(bench: Bench, asker: Asker) -> None:
    async with asker.client(asker.admin) as c:
        r = await call(c, "org.set_model_calls")
    assert r.status_code == 422 and r.json()["error"]["detail"]["field"] == "enabled"


async def test_a_grpc_caller_switches_model_calls_off_with_an_explicit_false(bench: Bench, asker: Asker) -> None:
    # A plain proto3 bool drops `false` from the wire, so the required check read it as absent.
    md = [("authorization", f"Bearer {asker.admin}")]
    async with grpc.aio.insecure_channel(bench.inst.grpc_address("assistant")) as channel:
        stub = assistant_pb2_grpc.AssistantServiceStub(channel)
        off = await stub.SetModelCalls(pb.SetModelCallsRequest(enabled=False), metadata=md)
        assert (off.org, off.enabled) == (asker.org, False)
        assert (await _ask(asker))[0] != 200
        with pytest.raises(grpc.aio.AioRpcError) as missing:
            await stub.SetModelCalls(pb.SetModelCallsRequest(), metadata=md)
        assert missing.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        on = await stub.SetModelCalls(pb.SetModelCallsRequest(enabled=True), metadata=md)
        assert (on.org, on.enabled) == (asker.org, True)
    assert (await _ask(asker))[0] == 200


# -- the namespace's daily cost cap ----------------------------------------------------------


@pytest.mark.parametrize(("spent", "admitted"), [(0.4, True), (0.5, False), (0.6, False)], ids=["under", "at", "over"])
async def test_the_default_cap_admits_under_its_share_and_refuses_at_and_over(
    bench: Bench, asker: Asker, spent: float, admitted: bool
) -> None:
    # Default cap $1 a day, the assistant's share half of it: $0.50.
    await _spend(bench, asker, asker.namespace, spent)
    status, body = await _ask(asker)
    if admitted:
        assert status == 200
        return
    assert status == 429 and body["error"]["code"] == "RATE_LIMITED"  # type: ignore[index]
    detail = body["error"]["detail"]  # type: ignore[index]
    assert detail["reason"] == "budget" and detail["cap_usd"] == 1.0 and detail["cap_source"] == "default"
    assert detail["spent_usd"] == pytest.approx(spent) and detail["share"] == 0.5
    assert not bench.emu.chat_bodies


@pytest.mark.parametrize(("spent", "admitted"), [(0.9, True), (1.0, False), (1.1, False)], ids=["under", "at", "over"])
async def test_a_namespaces_own_cap_admits_under_its_share_and_refuses_at_and_over(
    bench: Bench, asker: Asker, spent: float, admitted: bool
) -> None:
    async with asker.client(asker.admin) as c:
        r = await call(c, "budget.set", namespace=asker.namespace, daily_cost_cap_usd=2.0)
    assert r.status_code == 200, r.text
    assert r.json()["daily_cost_cap_usd"] == 2.0 and r.json()["is_default"] is False
    await _spend(bench, asker, asker.namespace, spent)
    status, body = await _ask(asker)
    assert (status == 200) is admitted
    if not admitted:
        detail = body["error"]["detail"]  # type: ignore[index]
        assert detail["reason"] == "budget" and detail["cap_usd"] == 2.0 and detail["cap_source"] == "namespace"


async def test_the_cap_is_per_namespace(bench: Bench, asker: Asker) -> None:
    from tests.conftest import unique

    rich = unique("ns")
    rich_viewer = await _namespace_with_viewer(asker, rich)
    async with asker.client(asker.admin) as c:
        assert (await call(c, "budget.set", namespace=rich, daily_cost_cap_usd=5.0)).status_code == 200
    await _spend(bench, asker, asker.namespace, 0.6)
    await _spend(bench, asker, rich, 0.6)
    assert (await _ask(asker))[0] == 429  # $0.60 spends the default cap's share
    assert (await _ask(asker, rich_viewer, rich))[0] == 200  # the same spend is under $2.50
    async with asker.client(asker.admin) as c:
        cleared = await call(c, "budget.set", namespace=rich)
    assert cleared.json()["is_default"] is True and cleared.json()["daily_cost_cap_usd"] == 1.0
    assert (await _ask(asker, rich_viewer, rich))[0] == 429  # back on the default


async def test_setting_the_cap_needs_admin_on_the_namespace(bench: Bench, asker: Asker) -> None:
    writer = str((await asker.mint(roles={asker.namespace: "writer"}, ttl_seconds=3600))["token"])
    for token in (asker.token, writer):
        async with asker.client(token) as c:
            r = await call(c, "budget.set", daily_cost_cap_usd=100.0)
        assert r.status_code == 403 and r.json()["error"]["detail"]["needed"] == "admin"
    ns_admin = str((await asker.mint(roles={asker.namespace: "admin"}, ttl_seconds=3600))["token"])
    async with Agent(org=asker.org, namespace=asker.namespace, agent="ns-admin", api_key=ns_admin, base_url=asker.base_url) as a:
        assert (await a.ops.budget.set(daily_cost_cap_usd=3.0))["daily_cost_cap_usd"] == 3.0
    async with Agent(org=asker.org, namespace=asker.namespace, agent="viewer", api_key=asker.token, base_url=asker.base_url) as a:
        got = await a.ops.budget.get()
        with pytest.raises(ForbiddenError):
            await a.ops.budget.set(daily_cost_cap_usd=100.0)
    assert got["daily_cost_cap_usd"] == 3.0 and got["is_default"] is False and got["assistant_share"] == 0.5


async def test_a_negative_cap_is_refused(bench: Bench, asker: Asker) -> None:
    async with Agent(org=asker.org, namespace=asker.namespace, agent="admin", api_key=asker.admin, base_url=asker.base_url) as a:
        with pytest.raises(LoomError) as refused:
            await a.ops.budget.set(daily_cost_cap_usd=-1.0)
    assert refused.value.code == "VALIDATION_FAILED"


async def test_budget_get_reports_the_assistants_spend_today(bench: Bench, asker: Asker) -> None:
    await _spend(bench, asker, asker.namespace, 0.125)
    async with asker.client() as c:
        got = (await call(c, "budget.get")).json()
    assert got == {
        "namespace": asker.namespace,
        "daily_cost_cap_usd": 1.0,
        "is_default": True,
        "assistant_share": 0.5,
        "assistant_spent_today_usd": 0.125,
    }

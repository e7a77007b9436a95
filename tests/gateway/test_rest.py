"""The REST door: argument validation, the catalog, OpenAPI, health, metrics, the namespace
rules, the error model, and the ledger row every call leaves."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import httpx
import pytest
from loom_core.bus import NatsServer, connect_bus
from loom_core.settings import Settings
from loom_core.store.embedded import EmbeddedStore
from loom_gateway.app import create_app
from loom_runner.embedded import Instance, start_instance
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import Tenant, call, ledger_rows, unique

LEAKS = ("Traceback", 'File "', "DB::Exception", "chdb", "grpc", "_pb2", "Error(")


def error_of(r: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["code"] == code, err
    assert isinstance(err["message"], str) and err["message"]
    for leak in LEAKS:
        assert leak not in r.text, f"{leak!r} leaked into {r.text}"
    return dict(err)


def run_id() -> str:
    return f"run-{uuid.uuid4().hex}"


# --- arguments --------------------------------------------------------------------------------


async def test_body_that_is_not_json_is_refused_with_422(tenant: Tenant) -> None:
    async with tenant.client() as c:
        r = await c.post("/v1/grants.list", content=b"{not json", headers={"Content-Type": "application/json"})
    err = error_of(r, 422, "VALIDATION_FAILED")
    assert err["detail"]["field"] == "(body)"


async def test_body_that_is_not_an_object_is_refused_with_422(tenant: Tenant) -> None:
    async with tenant.client() as c:
        r = await c.post("/v1/grants.list", json=["a"])
    error_of(r, 422, "VALIDATION_FAILED")


async def test_unknown_field_is_refused_naming_it(tenant: Tenant) -> None:
    async with tenant.client() as c:
        err = error_of(await call(c, "namespace.create", name=unique("ns"), colour="blue"), 422, "VALIDATION_FAILED")
    assert err["detail"]["field"] == "colour"
    assert err["detail"]["reason"] == "unknown field"


@pytest.mark.parametrize(
    ("op", "args", "field"),
    [
        ("namespace.create", {"name": 5}, "name"),
        ("token.mint", {"ttl_seconds": "soon"}, "ttl_seconds"),
        ("token.mint", {"ttl_seconds": 2**70}, "ttl_seconds"),
        ("token.mint", {"roles": ["viewer"]}, "roles"),
        ("token.mint", {"roles": {"ns": 3}}, "roles.ns"),
        ("token.mint", {"read_scope": "ns"}, "read_scope"),
        ("grants.set", {"subject": "user:x", "role": True}, "role"),
        ("grants.set", {"namespace": 7, "subject": "user:x", "role": "viewer"}, "namespace"),
    ],
)
async def test_wrong_type_is_refused_naming_the_field(tenant: Tenant, op: str, args: dict[str, Any], field: str) -> None:
    async with tenant.client() as c:
        err = error_of(await c.post(f"/v1/{op}", json=args), 422, "VALIDATION_FAILED")
    assert err["detail"]["field"] == field


async def test_handler_validation_names_the_field(tenant: Tenant) -> None:
    async with tenant.client() as c:
        err = error_of(await call(c, "namespace.create", name="Not A Name"), 422, "VALIDATION_FAILED")
        assert err["detail"]["field"] == "name"
        err = error_of(await call(c, "grants.set", subject="bob", role="viewer"), 422, "VALIDATION_FAILED")
        assert err["detail"]["field"] == "subject"


@pytest.mark.parametrize(
    ("header", "value"), [("X-Loom-Agent", "agent-\u00e9"), ("X-Loom-Run-Id", "a\tb"), ("X-Loom-Namespace", "n\u00e9")]
)
async def test_label_header_that_grpc_cannot_carry_is_422_naming_it(tenant: Tenant, header: str, value: str) -> None:
    async with tenant.client(**{header: value.encode()}) as c:  # type: ignore[arg-type]
        err = error_of(await call(c, "grants.list"), 422, "VALIDATION_FAILED")
    assert err["detail"]["field"] == header.lower()


async def test_namespace_field_that_grpc_cannot_carry_is_422(tenant: Tenant) -> None:
    async with tenant.client() as c:
        err = error_of(await call(c, "grants.list", namespace="ns\u00e9"), 422, "VALIDATION_FAILED")
    assert err["detail"]["field"] == "namespace"


async def test_token_with_characters_grpc_cannot_carry_is_auth_invalid(tenant: Tenant) -> None:
    async with httpx.AsyncClient(base_url=tenant.base_url, headers={"Authorization": "Bearer t\u00f6ken".encode()}) as c:  # type: ignore[dict-item]
        error_of(await call(c, "auth.whoami"), 401, "AUTH_INVALID")


async def test_refused_write_writes_nothing(tenant: Tenant) -> None:
    async with tenant.client() as c:
        error_of(await call(c, "grants.set", subject="user:nobody", role="owner"), 422, "VALIDATION_FAILED")
        grants = (await call(c, "grants.list")).json()["grants"]
    assert all(g["subject"] != "user:nobody" for g in grants)


async def test_unknown_op_is_404_unknown_op(tenant: Tenant) -> None:
    async with tenant.client() as c:
        err = error_of(await call(c, "no.such_op"), 404, "UNKNOWN_OP")
    assert err["detail"]["op"] == "no.such_op"


async def test_unknown_op_wins_over_a_missing_token(tenant: Tenant) -> None:
    async with httpx.AsyncClient(base_url=tenant.base_url) as c:
        error_of(await c.post("/v1/nope.nope", content=b"{bad"), 404, "UNKNOWN_OP")


async def test_op_called_with_get_is_405(tenant: Tenant) -> None:
    async with tenant.client() as c:
        r = await c.get("/v1/auth.whoami")
    assert r.status_code == 405
    assert r.json()["error"]["code"] == "VALIDATION_FAILED"


# --- catalog, OpenAPI, health, metrics ---------------------------------------------------------


async def test_ops_catalog_lists_ops_with_json_schemas(tenant: Tenant) -> None:
    async with httpx.AsyncClient(base_url=tenant.base_url) as c:
        r = await c.get("/v1/ops")
    assert r.status_code == 200
    ops = {op["name"]: op for op in r.json()["ops"]}
    identity = {"auth.whoami", "namespace.create", "namespace.list", "grants.set", "grants.list", "sa.create", "token.mint", "token.revoke"}
    assert identity <= set(ops)
    mint = ops["token.mint"]
    assert mint["min_role"] == "viewer" and mint["write_shaped"] is True and mint["rate_class"] == "admin"
    schema = mint["input_schema"]
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    assert schema["properties"]["ttl_seconds"]["type"] == "integer"
    assert schema["properties"]["roles"] == {
        "type": "object",
        "additionalProperties": {"type": "string", "enum": ["viewer", "writer", "admin"]},
        "minProperties": 1,
    }
    assert schema["properties"]["ttl_seconds"]["minimum"] == 1  # an explicit 0 is refused, never defaulted
    assert schema["dependentRequired"] == {"subject": ["roles"]}
    assert schema["properties"]["read_scope"] == {"type": "array", "items": {"type": "string"}}
    # A namespaced op takes the namespace as an argument.
    assert ops["grants.set"]["input_schema"]["properties"]["namespace"]["type"] == "string"
    assert ops["grants.set"]["min_role"] == "admin"
    for op in ops.values():
        assert op["input_schema"]["type"] == "object", op["name"]
        assert op["output_schema"]["type"] == "object" and op["output_schema"]["properties"], op["name"]


async def test_ops_catalog_filters_by_toolset(tenant: Tenant) -> None:
    async with httpx.AsyncClient(base_url=tenant.base_url) as c:
        admin = {op["name"] for op in (await c.get("/v1/ops", params={"toolset": "admin"})).json()["ops"]}
    assert "grants.set" in admin
    assert "auth.whoami" not in admin


async def test_openapi_has_a_path_per_op(tenant: Tenant) -> None:
    async with httpx.AsyncClient(base_url=tenant.base_url) as c:
        ops = [op["name"] for op in (await c.get("/v1/ops")).json()["ops"]]
        r = await c.get("/openapi.json")
    assert r.status_code == 200
    doc = r.json()
    assert doc["openapi"].startswith("3.")
    for name in ops:
        post = doc["paths"][f"/v1/{name}"]["post"]
        assert post["requestBody"]["content"]["application/json"]["schema"]["type"] == "object"
        assert "422" in post["responses"] and "401" in post["responses"]
    assert doc["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"


async def test_health_answers_ok(tenant: Tenant) -> None:
    async with httpx.AsyncClient(base_url=tenant.base_url) as c:
        r = await c.get("/v1/health")
    assert r.status_code == 200
    assert r.json()["status"] == "ok"


async def test_ready_reports_store_and_bus_checks(tenant: Tenant) -> None:
    async with httpx.AsyncClient(base_url=tenant.base_url) as c:
        r = await c.get("/v1/health/ready")
    assert r.status_code == 200
    body = r.json()
    assert body["status"] == "ready"
    assert body["checks"]["store"] == {"ok": True, "required": True}
    assert body["checks"]["bus"] == {"ok": True, "required": True}


async def test_ready_is_503_naming_the_dependency_that_fails(stack: Instance, nats_server: NatsServer) -> None:
    closed = await connect_bus(nats_server.url, name="closed-for-ready")
    await closed.close()
    assert stack.relay is not None
    app = create_app(stack.relay, {"store": stack.runtime.store.ping, "bus": closed.ping})
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://loom") as c:
        r = await c.get("/v1/health/ready")
    assert r.status_code == 503
    body = r.json()
    assert body["status"] == "not_ready"
    assert body["checks"]["store"] == {"ok": True, "required": True}
    assert body["checks"]["bus"] == {"ok": False, "reason": "BACKEND_UNAVAILABLE", "required": True}


async def test_rate_class_budget_spent_is_429_with_retry_after(
    tenant: Tenant, settings: Settings, store: EmbeddedStore, nats_server: NatsServer, stack: Instance
) -> None:
    tight = await start_instance(
        settings.model_copy(update={"rate_admin_per_minute": 2}), store=store, nats_url=nats_server.url, name="tight"
    )
    try:
        async with httpx.AsyncClient(base_url=tight.base_url, headers={"Authorization": f"Bearer {tenant.token}"}) as c:
            for _ in range(2):
                assert (await call(c, "token.mint", ttl_seconds=60)).status_code == 200
            r = await call(c, "token.mint", ttl_seconds=60)
            err = error_of(r, 429, "RATE_LIMITED")
            assert err["detail"]["rate_class"] == "admin"
            assert int(r.headers["Retry-After"]) >= 1
            assert err["retryable"] is True
            # Another class has its own budget.
            assert (await call(c, "auth.whoami")).status_code == 200
    finally:
        await tight.stop()


async def test_metrics_count_requests_by_op_and_code(tenant: Tenant) -> None:
    async with tenant.client() as c:
        assert (await call(c, "auth.whoami")).status_code == 200
    async with httpx.AsyncClient(base_url=tenant.base_url) as anon:
        await call(anon, "auth.whoami")
        r = await anon.get("/metrics")
    assert r.status_code == 200
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value for family in text_string_to_metric_families(r.text) for s in family.samples
    }

    def value(name: str, **labels: str) -> float:
        return samples.get((name, tuple(sorted(labels.items()))), 0.0)

    assert value("loom_requests_total", op="auth.whoami", transport="rest", code="OK") >= 1
    assert value("loom_requests_total", op="auth.whoami", transport="rest", code="AUTH_REQUIRED") >= 1
    assert value("loom_request_latency_seconds_count", op="auth.whoami", code="OK") >= 1


# --- the namespace of a call ----------------------------------------------------------------------


async def test_namespace_comes_from_the_body_field(tenant: Tenant) -> None:
    other = unique("ns")
    async with tenant.client() as c:
        assert (await call(c, "namespace.create", name=other)).status_code == 200
        assert (await call(c, "grants.set", namespace=other, subject="user:in-other", role="viewer")).status_code == 200
        in_other = {g["subject"] for g in (await call(c, "grants.list", namespace=other)).json()["grants"]}
        in_default = {g["subject"] for g in (await call(c, "grants.list")).json()["grants"]}
    assert "user:in-other" in in_other
    assert "user:in-other" not in in_default


async def test_namespace_comes_from_the_header(tenant: Tenant) -> None:
    other = unique("ns")
    async with tenant.client() as c:
        assert (await call(c, "namespace.create", name=other)).status_code == 200
    async with tenant.client(**{"X-Loom-Namespace": other}) as c:
        assert (await call(c, "auth.whoami")).json()["namespace"] == other
        assert (await call(c, "grants.set", subject="user:via-header", role="viewer")).status_code == 200
        # The body field wins over the header.
        listed = {g["subject"] for g in (await call(c, "grants.list", namespace=tenant.namespace)).json()["grants"]}
    assert "user:via-header" not in listed
    async with tenant.client() as c:
        in_other = {g["subject"] for g in (await call(c, "grants.list", namespace=other)).json()["grants"]}
    assert "user:via-header" in in_other


async def test_namespace_defaults_to_the_tokens(tenant: Tenant) -> None:
    async with tenant.client() as c:
        body = (await call(c, "auth.whoami")).json()
    assert body["namespace"] == tenant.namespace


# --- the ledger -------------------------------------------------------------------------------------


async def test_each_call_leaves_exactly_one_labelled_ledger_row(tenant: Tenant, stack: Instance) -> None:
    run = run_id()
    name = unique("ns")
    headers = {"X-Loom-Agent": "planner", "X-Loom-User": "u-42", "X-Loom-Session": "s-7", "X-Loom-Run-Id": run}
    async with tenant.client(**headers) as c:
        r = await call(c, "namespace.create", name=name, description="the secret plan for launch")
    assert r.status_code == 200, r.text
    rows = await ledger_rows(stack, run)
    await asyncio.sleep(0.3)  # a duplicate would have landed by now
    rows = await ledger_rows(stack, run)
    assert len(rows) == 1
    row = rows[0]
    assert row["org"] == tenant.org
    assert row["namespace"] == tenant.namespace
    assert row["subject"] == "user:admin"
    assert (row["agent"], row["user"], row["session"]) == ("planner", "u-42", "s-7")
    assert row["op"] == "namespace.create"
    assert row["transport"] == "rest"
    assert row["ok"] is True and row["error_code"] == ""
    assert row["latency_ms"] > 0
    assert row["write_shaped"] is True
    assert row["token_id"].startswith("bootstrap-")
    # Identifiers in clear, text as a digest.
    assert row["args"]["name"] == name
    assert row["args"]["description"].startswith("sha256:")
    assert "secret plan" not in json.dumps(row)


async def test_refused_call_is_ledgered_with_its_code(tenant: Tenant, stack: Instance) -> None:
    run = run_id()
    async with tenant.client(**{"X-Loom-Run-Id": run}) as c:
        viewer = (await call(c, "token.mint", roles={tenant.namespace: "viewer"}, ttl_seconds=60)).json()["token"]
    run2 = run_id()
    async with tenant.client(viewer, **{"X-Loom-Run-Id": run2}) as c:
        error_of(await call(c, "grants.set", subject="user:x", role="viewer"), 403, "AUTH_INSUFFICIENT")
    rows = await ledger_rows(stack, run2)
    assert len(rows) == 1
    assert rows[0]["ok"] is False
    assert rows[0]["error_code"] == "AUTH_INSUFFICIENT"
    assert rows[0]["op"] == "grants.set"
    assert rows[0]["org"] == tenant.org


async def test_unauthenticated_call_is_ledgered_without_a_subject(tenant: Tenant, stack: Instance) -> None:
    run = run_id()
    async with httpx.AsyncClient(base_url=tenant.base_url, headers={"X-Loom-Run-Id": run}) as c:
        error_of(await call(c, "auth.whoami"), 401, "AUTH_REQUIRED")
    rows = await ledger_rows(stack, run)
    assert len(rows) == 1
    assert rows[0]["subject"] == "" and rows[0]["error_code"] == "AUTH_REQUIRED" and rows[0]["ok"] is False


async def test_minted_token_never_reaches_the_ledger(tenant: Tenant, stack: Instance) -> None:
    run = run_id()
    async with tenant.client(**{"X-Loom-Run-Id": run}) as c:
        minted = (await call(c, "token.mint", roles={tenant.namespace: "viewer"}, ttl_seconds=60)).json()
    async with tenant.client(minted["token"], **{"X-Loom-Run-Id": run}) as c:
        assert (await call(c, "auth.whoami")).status_code == 200
    rows = await ledger_rows(stack, run, expect=2)
    assert [r["op"] for r in rows] == ["token.mint", "auth.whoami"]
    everything = json.dumps(
        await stack.runtime.store.query("SELECT * FROM {db}.agent_events WHERE org = {org:String}", {"org": tenant.org}), default=str
    )
    assert minted["token"] not in everything
    assert minted["token"].split(".")[2] not in everything
    assert tenant.token not in everything
    assert rows[1]["token_id"] == minted["token_id"]
    assert rows[0]["args"]["roles"] == json.dumps({tenant.namespace: "viewer"})


async def test_list_answer_records_its_out_hits(tenant: Tenant, stack: Instance) -> None:
    run = run_id()
    async with tenant.client() as c:
        for _ in range(2):
            assert (await call(c, "namespace.create", name=unique("ns"))).status_code == 200
    async with tenant.client(**{"X-Loom-Run-Id": run}) as c:
        listed = (await call(c, "namespace.list")).json()["namespaces"]
    rows = await ledger_rows(stack, run)
    assert len(listed) == 3
    assert rows[0]["out_hits"] == 3


async def test_ledger_rows_are_readable_within_a_second(tenant: Tenant, stack: Instance) -> None:
    """The ledger's own pacing, read without a flush, at the 0.05 s interval this test has always
    run at (the suite's ledgers otherwise keep production's 0.5 s): a row waits at most the
    interval plus its insert, which a loaded machine stretches."""
    ledger, run = stack.runtime.ledger, run_id()
    saved, ledger.flush_interval = ledger.flush_interval, 0.05
    ledger.hurry()  # a wait begun at the longer interval ends now
    try:
        async with tenant.client(**{"X-Loom-Run-Id": run}) as c:
            assert (await call(c, "auth.whoami")).status_code == 200
        rows = await ledger_rows(stack, run, within=1.0, flush=False)
    finally:
        ledger.flush_interval = saved
    assert len(rows) == 1


# --- the error model -----------------------------------------------------------------------------


async def test_store_failure_is_503_without_driver_text(tenant: Tenant, stack: Instance, monkeypatch: pytest.MonkeyPatch) -> None:
    store = stack.runtime.store

    async def broken_list(org: str) -> list[dict[str, Any]]:
        # A real statement the real engine refuses, so the driver's own error text is produced.
        return await store.query("SELECT no_such_column FROM {db}.no_such_table WHERE org = {org:String}", {"org": org})

    monkeypatch.setattr(stack.runtime.identity, "list_namespaces", broken_list)
    async with tenant.client() as c:
        err = error_of(await call(c, "namespace.list"), 503, "BACKEND_UNAVAILABLE")
    assert "no_such" not in json.dumps(err)
    assert err["retryable"] is True


async def test_unexpected_failure_is_500_internal_without_details(tenant: Tenant, stack: Instance, monkeypatch: pytest.MonkeyPatch) -> None:
    async def explode(org: str) -> list[dict[str, Any]]:
        raise RuntimeError("connection string clickhouse://root:hunter2@db")

    monkeypatch.setattr(stack.runtime.identity, "list_namespaces", explode)
    async with tenant.client() as c:
        r = await call(c, "namespace.list")
    err = error_of(r, 500, "INTERNAL")
    assert "hunter2" not in r.text and "RuntimeError" not in r.text
    assert err["message"] == "internal error"

"""insights.query and insights.catalog on the embedded store (chDB): the boundary cannot be
enforced there, so the query answers ANALYSIS_UNAVAILABLE saying why, and nothing weaker
stands in for it; the catalog still answers from the allowlist."""

from __future__ import annotations

import uuid

import httpx
from loom_insights.domain.entities import REVISION
from loom_runner.embedded import Instance

from tests.conftest import Tenant, call, ledger_rows


async def test_query_on_the_embedded_store_answers_analysis_unavailable_naming_the_reason(tenant: Tenant, stack: Instance) -> None:
    run = f"run-{uuid.uuid4().hex}"
    sql = "SELECT op, count() FROM agent_events GROUP BY op"
    async with tenant.client(**{"X-Loom-Run-Id": run}) as c:
        r = await call(c, "insights.query", sql=sql)
    assert r.status_code == 503, r.text
    err = r.json()["error"]
    assert err["code"] == "ANALYSIS_UNAVAILABLE"
    assert "ClickHouse server" in err["detail"]["reason"]
    rows = await ledger_rows(stack, run, within=5.0)
    assert len(rows) == 1
    row = rows[0]
    assert row["op"] == "insights.query" and row["error_code"] == "ANALYSIS_UNAVAILABLE"
    assert row["args"]["sql"].startswith("sha256:") and sql not in str(row["args"])
    assert row["args"]["sql_digest"] == row["args"]["sql"]
    assert row["args"]["sql_length"] == str(len(sql))


async def test_catalog_answers_from_the_allowlist_without_the_canary(tenant: Tenant) -> None:
    async with tenant.client() as c:
        r = await call(c, "insights.catalog")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["available"] is False
    names = [t["name"] for t in body["tables"]]
    assert ("tasks" in names or "task_state" in names) and "agent_events" in names and "analysis_canary" not in names
    columns = {c["name"] for t in body["tables"] for c in t["columns"]}
    assert not {"title", "brief", "outcome", "reason", "args", "doc"} & columns
    assert body["version"].startswith(f"{REVISION}.")
    assert any(cap["setting"] == "max_execution_time" for cap in body["caps"])


async def test_query_needs_viewer_on_every_namespace_it_names(tenant: Tenant) -> None:
    async with tenant.client() as admin:
        minted = await call(admin, "token.mint", roles={tenant.namespace: "viewer"}, ttl_seconds=300)
    assert minted.status_code == 200, minted.text
    async with tenant.client(minted.json()["token"]) as c:
        r = await call(c, "insights.query", sql="SELECT 1", namespaces=[tenant.namespace, "someone-elses"])
    assert r.status_code == 403, r.text
    assert r.json()["error"]["detail"]["namespace"] == "someone-elses"


async def test_query_is_refused_to_a_token_whose_read_scope_is_narrower_than_its_namespaces(tenant: Tenant) -> None:
    async with tenant.client() as admin:
        minted = await call(admin, "token.mint", roles={"*": "viewer"}, read_scope=[tenant.namespace], ttl_seconds=300)
    assert minted.status_code == 200, minted.text
    async with tenant.client(minted.json()["token"]) as c:
        r = await call(c, "insights.query", sql="SELECT 1", namespaces=[tenant.namespace])
    assert r.status_code == 403, r.text
    assert r.json()["error"]["detail"]["reason"] == "read_scope"


async def test_both_ops_join_the_assistant_toolset_and_query_has_its_own_rate_class(stack: Instance) -> None:
    cat = stack.runtime.catalog
    for name in ("insights.query", "insights.catalog"):
        op = cat.get(name)
        assert op is not None and "assistant" in op.toolsets and not op.write_shaped
    query = cat.get("insights.query")
    assert query is not None and query.rate_class == "insights"
    assert "insights" in stack.runtime.limiter.per_minute


async def test_health_names_the_embedded_store_as_the_reason(stack: Instance) -> None:
    plane = next(p for p in stack.planes if p.name == "insights")
    checks = await plane.health()  # type: ignore[attr-defined]
    # Not applicable on the embedded store: shown with its reason, never `ok: false`.
    assert checks["analysis"]["applicable"] is False and "ok" not in checks["analysis"] and checks["analysis"]["required"] is False
    assert "ClickHouse server" in checks["analysis"]["reason"]
    async with httpx.AsyncClient(base_url=stack.base_url) as http:
        health = (await http.get("/v1/health")).json()
    assert health["status"] == "ok"
    assert health["checks"]["analysis"] == {"applicable": False, "required": False, "reason": checks["analysis"]["reason"]}
    assert [name for name, c in health["checks"].items() if c.get("ok") is False] == []

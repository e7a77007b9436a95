"""policy.widened audit rows in the ledger read: policy.decisions serves them (decision=widened,
and among the rest unfiltered), with the rule, why it widened and the rule before and after."""

from __future__ import annotations

import time
from typing import Any

from loom_core.identity.tokens import Principal, new_token_id
from loom_runner.embedded import Instance

from tests.conftest import Tenant

from .conftest import eventually, ok, one_list_per_hour, refused

BOT = {"X-Loom-Agent": "bot"}


async def decisions_of(tenant: Tenant, **filters: Any) -> list[dict[str, Any]]:
    async with tenant.client() as c:
        return list((await ok(c, "policy.decisions", **filters))["decisions"])


async def test_widening_changes_are_served_by_policy_decisions(shadow_tenant: Tenant) -> None:
    async with shadow_tenant.client(**BOT) as c:
        first = await ok(c, "policy.set", **one_list_per_hour(mode="enforce"))
        assert first["widened"] is False  # a new rule only takes away
        loosened = await ok(c, "policy.set", **one_list_per_hour(mode="shadow"))
        assert loosened["widened"] is True
        await ok(c, "grants.list")
        await ok(c, "grants.list")  # a shadow deny
        await ok(c, "policy.delete", name="one-list-per-hour")
    widened = await decisions_of(shadow_tenant, decision="widened")
    assert [(w["operation"], w["rule"], w["decision"]) for w in widened] == [
        ("policy.delete", "one-list-per-hour", "widened"),
        ("policy.set", "one-list-per-hour", "widened"),
    ]
    gone, looser = widened
    assert gone["agent"] == "bot" and gone["subject"] and gone["request_id"] and gone["widened_reasons"]
    assert gone["before"]["mode"] == "shadow" and "after" not in gone
    assert looser["widened_reasons"] == loosened["widened_reasons"]
    assert (looser["before"]["mode"], looser["after"]["mode"]) == ("enforce", "shadow")
    assert looser["after"]["condition"] == one_list_per_hour()["condition"]
    # The ledger read, unfiltered: the gate's decisions and the widening rows, newest first.
    everything = await eventually(lambda: _with_gate_rows(shadow_tenant))
    assert [d["decision"] for d in everything] == ["widened", "deny", "allow", "widened"]
    times = [d["time"] for d in everything]
    assert times == sorted(times, reverse=True)
    # The other filters apply to them too; allow / deny leave them out.
    assert [d["decision"] for d in await decisions_of(shadow_tenant, decision="deny")] == ["deny"]
    assert [d["operation"] for d in await decisions_of(shadow_tenant, operation="policy.delete")] == ["policy.delete"]
    assert [d["decision"] for d in await decisions_of(shadow_tenant, rule="one-list-per-hour")] == ["widened", "deny", "allow", "widened"]
    assert await decisions_of(shadow_tenant, agent="someone-else") == []
    assert len(await decisions_of(shadow_tenant, limit=1)) == 1
    assert await decisions_of(shadow_tenant, decision="widened", since="2099-01-01T00:00:00Z") == []


async def _with_gate_rows(tenant: Tenant) -> list[dict[str, Any]] | None:
    rows = await decisions_of(tenant)
    return rows if len(rows) == 4 else None


async def test_widened_rows_are_refused_to_callers_without_the_role_or_from_another_org(
    shadow_tenant: Tenant, shadow_stack: Instance
) -> None:
    async with shadow_tenant.client(**BOT) as c:
        await ok(c, "policy.set", **one_list_per_hour())
        await ok(c, "policy.delete", name="one-list-per-hour")
        await ok(c, "sa.create", name="reader", role="viewer")
        viewer = await ok(
            c, "token.mint", subject="sa:reader", roles={shadow_tenant.namespace: "viewer"}, default_namespace=shadow_tenant.namespace
        )
        await refused(c, "policy.decisions", 422, "VALIDATION_FAILED", decision="widen")
    # A viewer reads them (policy.decisions is a viewer op).
    async with shadow_tenant.client(viewer["token"]) as v:
        assert [d["operation"] for d in (await ok(v, "policy.decisions", decision="widened"))["decisions"]] == ["policy.delete"]
    # No role in the namespace: refused, nothing served.
    now = int(time.time())
    nobody = shadow_stack.runtime.codec.encode(
        Principal(jti=new_token_id("test-"), sub="user:nobody", org=shadow_tenant.org, roles={}, iat=now, exp=now + 600)
    )
    async with shadow_tenant.client(nobody, **{"X-Loom-Namespace": shadow_tenant.namespace}) as n:
        await refused(n, "policy.decisions", 403, "AUTH_INSUFFICIENT", decision="widened")
    # Another org named on the call: refused before anything is read.
    async with shadow_tenant.client(**{"X-Loom-Org": "another-org"}) as o:
        await refused(o, "policy.decisions", 403, "AUTH_WRONG_ORG", decision="widened")

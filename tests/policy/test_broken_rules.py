"""A stored rule that no longer compiles is never dropped: it fails closed for write-shaped
calls, open for reads, and policy.list names it as broken with the reason."""

from __future__ import annotations

from loom_runner.embedded import Instance

from tests.conftest import Tenant
from tests.policy.conftest import gate_of, ok, refused


async def store_rule_the_grammar_no_longer_knows(inst: Instance, tenant: Tenant) -> None:
    # Written straight to the table, as an older build (or a renamed leaf) left it.
    gate = gate_of(inst)
    await gate.rule_store.put(
        tenant.org,
        tenant.namespace,
        {
            "name": "legacy-guard",
            "effect": "forbid",
            "actions": ["grants.set", "grants.list"],
            "condition": {"op": "count_since", "operation": "grants.set", "value": 3},
            "description": "",
            "mode": "inherit",
        },
        1,
        "user:admin",
    )
    assert gate.rules is not None
    await gate.rules.changed(tenant.org, tenant.namespace)


async def test_stored_rule_that_no_longer_compiles_denies_writes_and_allows_reads(enforce_stack: Instance, enforce_tenant: Tenant) -> None:
    await store_rule_the_grammar_no_longer_knows(enforce_stack, enforce_tenant)
    async with enforce_tenant.client() as c:
        err = await refused(c, "grants.set", 403, "POLICY_FORBIDDEN", subject="user:bob", role="viewer")
        assert "legacy-guard" in err["message"]
        assert "does not compile" in err["message"]
        listed = await ok(c, "grants.list")
    assert isinstance(listed["grants"], list)


async def test_policy_list_names_the_broken_rule_with_its_reason(enforce_stack: Instance, enforce_tenant: Tenant) -> None:
    await store_rule_the_grammar_no_longer_knows(enforce_stack, enforce_tenant)
    async with enforce_tenant.client() as c:
        out = await ok(c, "policy.list")
    (rule,) = [r for r in out["rules"] if r["name"] == "legacy-guard"]
    assert rule["broken"] is True
    assert "condition" in rule["broken_reason"]


async def test_policy_list_marks_compiling_rules_as_not_broken(enforce_stack: Instance, enforce_tenant: Tenant) -> None:
    async with enforce_tenant.client() as c:
        await ok(
            c,
            "policy.set",
            name="fine",
            effect="forbid",
            actions=["grants.set"],
            condition={"op": "count_within", "within": "1h", "operation": "grants.set", "cmp": "gte", "value": 100},
        )
        out = await ok(c, "policy.list")
    (rule,) = [r for r in out["rules"] if r["name"] == "fine"]
    assert (rule["broken"], rule["broken_reason"]) == (False, "")

"""policy.set says what the rule will do: the mode it is applied in (the rule's own over the
deployment's), a warning when that mode refuses nothing (off, shadow), and a warning when the
rule names an argument the op it points at does not take (such a comparison never matches)."""

from __future__ import annotations

from typing import Any

import pytest
from loom_runner.embedded import Instance

from tests.conftest import Tenant
from tests.policy.conftest import ok, one_list_per_hour


async def set_rule(tenant: Tenant, **over: Any) -> dict[str, Any]:
    async with tenant.client() as c:
        return await ok(c, "policy.set", **one_list_per_hour(**over))


async def test_mode_off_answers_off_and_warns_the_rule_refuses_nothing(tenant: Tenant) -> None:
    out = await set_rule(tenant)
    assert out["mode_in_effect"] == "off"
    assert any("LOOM_POLICY_MODE" in w and "refuses nothing" in w for w in out["warnings"]), out["warnings"]


async def test_a_rule_in_enforce_under_an_off_deployment_is_still_off(tenant: Tenant) -> None:
    out = await set_rule(tenant, mode="enforce")
    assert out["mode_in_effect"] == "off" and any("refuses nothing" in w for w in out["warnings"])


async def test_shadow_answers_shadow_and_warns(shadow_tenant: Tenant) -> None:
    out = await set_rule(shadow_tenant)
    assert out["mode_in_effect"] == "shadow"
    assert any("shadow" in w and "refuses nothing" in w for w in out["warnings"]), out["warnings"]


@pytest.mark.parametrize(("mode", "effect"), [("inherit", "enforce"), ("shadow", "shadow"), ("enforce", "enforce")])
async def test_under_enforce_the_rules_own_mode_decides(enforce_tenant: Tenant, mode: str, effect: str) -> None:
    out = await set_rule(enforce_tenant, mode=mode)
    assert out["mode_in_effect"] == effect
    assert any("refuses nothing" in w for w in out["warnings"]) == (effect == "shadow")


@pytest.mark.parametrize(
    ("condition", "field", "name"),
    [
        # The recorded event's argument: grants.list takes no argument `nope`.
        ({"args_equal": {"nope": "x"}}, "condition.args_equal.nope", "nope"),
        # The current call's argument: the rule's action (grants.set) takes no `missing`.
        ({"operation": "grants.set", "args_equal": {"subject": "$args.missing"}}, "condition.args_equal.subject", "$args.missing"),
    ],
)
async def test_a_rule_naming_an_argument_the_op_does_not_take_is_warned(
    enforce_tenant: Tenant, condition: dict[str, Any], field: str, name: str
) -> None:
    rule = one_list_per_hour(actions=["grants.set"])
    rule["condition"] = {**rule["condition"], **condition}
    async with enforce_tenant.client() as c:
        out = await ok(c, "policy.set", **rule)
    warned = [w for w in out["warnings"] if w.startswith(f"{field}:")]
    assert len(warned) == 1 and name in warned[0], out["warnings"]
    assert len(out["warnings"]) == 1, out["warnings"]


async def test_a_rule_naming_arguments_the_ops_take_gets_no_argument_warning(enforce_tenant: Tenant, stack: Instance) -> None:
    rule = one_list_per_hour(actions=["grants.set"])
    rule["condition"] = {**rule["condition"], "operation": "grants.set", "args_equal": {"subject": "$args.subject"}}
    async with enforce_tenant.client() as c:
        out = await ok(c, "policy.set", **rule)
    assert out["warnings"] == [], out["warnings"]
    assert "subject" in stack.runtime.catalog.ops["grants.set"].request_cls.DESCRIPTOR.fields_by_name

"""policy.check through the SDK, as the spec writes it; breadth_within over recorded exposure
rows; rules passed in. memory.* ops are not served by Loom yet, so the example's rule
(actions memory.delete, operation memory.get) is stored and dry-run with policy.check, which
takes the operation, the agent and the arguments explicitly; a memory.get in the caller's
history is a ledger row recorded the way the chain records every call."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from loom import Agent, ValidationError
from loom_core.chain.ledger import ledger_row
from loom_core.exposures import ExposureRow, live_rows, set_live_rows, write_exposures
from loom_core.store import ch_time
from loom_policy.domain.history import Shape
from loom_runner.embedded import Instance

from tests.conftest import Tenant

from .conftest import eventually, gate_of, ledger_held, ok, refused

VERDICT_FIELDS = {"decision", "would_enforce", "mode", "write_shaped", "determining_rules", "errors", "rules", "latency_ms"}


def sdk(tenant: Tenant, agent: str = "admin") -> Agent:
    return Agent(org=tenant.org, namespace=tenant.namespace, agent=agent, api_key=tenant.token, base_url=tenant.base_url)


async def spec_example(agent: Agent) -> dict[str, Any]:
    """The spec's example, as written."""
    await agent.policy.set(
        "read-before-delete",
        effect="require",
        actions=["memory.delete"],
        condition={
            "op": "formerly",
            "within": "1h",
            "operation": "memory.get",
            "args_equal": {"memory_key": "$args.memory_key"},
        },
        description="An agent deletes only what it has just looked at.",
    )
    verdict = await agent.policy.check(operation="memory.delete", agent="cleanup-bot", args={"memory_key": "notes/old"})
    return verdict


def record_read(inst: Instance, tenant: Tenant, key: str, *, agent: str = "cleanup-bot", subject: str = "user:admin") -> None:
    """A memory.get by the caller, recorded as the chain records a call (ledger + observers)."""
    inst.runtime.ledger.record(
        ledger_row(
            org=tenant.org,
            namespace=tenant.namespace,
            subject=subject,
            agent=agent,
            user="",
            session="",
            op="memory.get",
            transport="sdk",
            run_id="",
            consumer="",
            ok=True,
            error_code="",
            latency_ms=1.0,
            args={"memory_key": key},
            out_hits=1,
            token_id="t",
            request_id=uuid.uuid4().hex,
            write_shaped=False,
        )
    )


async def test_the_specs_example_runs_as_written_through_the_sdk(stack: Instance, tenant: Tenant) -> None:
    async with sdk(tenant) as agent:
        verdict = await spec_example(agent)
        assert set(verdict) == VERDICT_FIELDS
        assert (verdict["decision"], verdict["would_enforce"], verdict["mode"], verdict["write_shaped"]) == ("deny", False, "off", True)
        assert verdict["determining_rules"] == ["read-before-delete"] and verdict["errors"] == []
        [rule] = verdict["rules"]
        assert (rule["name"], rule["effect"], rule["condition_holds"], rule["denies"]) == ("read-before-delete", "require", False, True)
        assert rule["leaves"][0]["key_value"] == "cleanup-bot"
        assert verdict["latency_ms"] >= 0

        # The agent reads the key: the same check now allows (the off deployment reads the table).
        record_read(stack, tenant, "notes/old")

        async def allowed() -> dict[str, Any] | None:
            v = await agent.policy.check(operation="memory.delete", agent="cleanup-bot", args={"memory_key": "notes/old"})
            return v if v["decision"] == "allow" else None

        verdict = await eventually(allowed)
        assert verdict["rules"][0]["leaves"][0]["last_time"].endswith("Z")
        other_key = await agent.policy.check(operation="memory.delete", agent="cleanup-bot", args={"memory_key": "notes/new"})
        other_agent = await agent.policy.check(operation="memory.delete", agent="another-bot", args={"memory_key": "notes/old"})
        assert other_key["decision"] == other_agent["decision"] == "deny"
        listed = await agent.policy.list()
        assert [r["name"] for r in listed["rules"]] == ["read-before-delete"]


async def test_the_specs_example_in_an_enforce_deployment_would_enforce(enforce_stack: Instance, enforce_tenant: Tenant) -> None:
    async with sdk(enforce_tenant) as agent:
        verdict = await spec_example(agent)
        assert set(verdict) == VERDICT_FIELDS
        assert (verdict["decision"], verdict["would_enforce"], verdict["mode"]) == ("deny", True, "enforce")
        # The enforce deployment's live window sees the read as soon as it is recorded.
        record_read(enforce_stack, enforce_tenant, "notes/old")
        verdict = await agent.policy.check(operation="memory.delete", agent="cleanup-bot", args={"memory_key": "notes/old"})
        assert (verdict["decision"], verdict["would_enforce"]) == ("allow", False)
        # A read is not write-shaped, guessed from the verb of an op this deployment does not serve.
        read = await agent.policy.check(operation="memory.get", agent="cleanup-bot", args={"memory_key": "x"})
        assert read["write_shaped"] is False and read["rules"] == []


async def test_check_against_rules_passed_in(tenant: Tenant) -> None:
    proposed = {
        "name": "no-second-list",
        "effect": "forbid",
        "actions": ["grants.list"],
        "condition": {"op": "count_within", "within": "1h", "operation": "grants.list", "cmp": "gte", "value": 1},
    }
    async with sdk(tenant, agent="bot") as agent:
        first = await agent.policy.check(operation="grants.list", rules=[proposed])
        assert first["decision"] == "allow" and first["rules"][0]["name"] == "no-second-list"
        assert (await agent.policy.list())["rules"] == []  # nothing stored
        with pytest.raises(ValidationError) as info:
            await agent.policy.check(operation="grants.list", rules=[proposed, {**proposed, "name": "x", "condition": {"op": "formerly"}}])
        assert info.value.detail["field"] == "rules[1].condition.within"


async def test_check_refuses_a_missing_or_glob_operation(tenant: Tenant) -> None:
    async with tenant.client() as c:
        assert (await refused(c, "policy.check", 422, "VALIDATION_FAILED"))["detail"]["field"] == "operation"
        assert (await refused(c, "policy.check", 422, "VALIDATION_FAILED", operation="memory.*"))["detail"]["field"] == "operation"


# --- breadth_within over exposure rows ------------------------------------------------------


def exposure(tenant: Tenant, key: str, *, subject: str = "user:admin", agent: str = "bot") -> ExposureRow:
    return ExposureRow(
        ts=ch_time(),
        org=tenant.org,
        namespace=tenant.namespace,
        subject=subject,
        agent=agent,
        user="",
        session="",
        run_id="",
        op="memory.search",
        kind="memory",
        key=key,
        request_id=uuid.uuid4().hex,
    )


BROAD = {"op": "breadth_within", "within": "1h", "cmp": "gt", "value": 2}


async def test_breadth_within_denies_after_the_caller_was_shown_too_many_keys(enforce_stack: Instance, enforce_tenant: Tenant) -> None:
    async with enforce_tenant.client(**{"X-Loom-Agent": "bot"}) as c:
        await ok(c, "policy.set", name="not-too-broad", effect="forbid", actions=["grants.list"], condition=BROAD)
        await write_exposures(enforce_stack.runtime, [exposure(enforce_tenant, k) for k in ("a", "b", "a")])
        await write_exposures(enforce_stack.runtime, [exposure(enforce_tenant, k, subject="user:other") for k in ("x", "y", "z")])
        await ok(c, "grants.list")  # two distinct keys shown to this subject: not more than 2
        await write_exposures(enforce_stack.runtime, [exposure(enforce_tenant, "c", agent="another-label")])
        err = await refused(c, "grants.list", 403, "POLICY_FORBIDDEN")  # actor key: every label of the subject
    leaf = err["detail"]["rules"][0]["leaves"][0]
    assert (leaf["op"], leaf["key"], leaf["observed"], leaf["threshold"]) == ("breadth_within", "actor", 3.0, 2.0)
    stored = await enforce_stack.runtime.store.query(
        "SELECT count() AS n FROM {db}.memory_exposures WHERE org = {org:String}", {"org": enforce_tenant.org}
    )
    assert stored[0]["n"] == 7


async def test_breadth_within_fraction_of_live_rows_from_the_tables(stack: Instance, tenant: Tenant) -> None:
    half = {"op": "breadth_within", "within": "1h", "cmp": "gte", "fraction": 0.5}
    store = stack.runtime.store
    await write_exposures(stack.runtime, [exposure(tenant, k) for k in ("a", "b", "c")])
    async with tenant.client(**{"X-Loom-Agent": "bot"}) as c:
        rule = {"name": "half", "effect": "forbid", "actions": ["grants.list"], "condition": half}
        unknown = await ok(c, "policy.check", operation="grants.list", rules=[rule])
        assert unknown["errors"][0]["message"] == "the namespace's live memory row count is unknown"
        await set_live_rows(store, tenant.org, tenant.namespace, "memory", 8)
        assert await live_rows(store, tenant.org, tenant.namespace) == {"memory": 8}
        below = await ok(c, "policy.check", operation="grants.list", rules=[rule])
        assert (below["decision"], below["rules"][0]["leaves"][0]["threshold"]) == ("allow", 4.0)
        await set_live_rows(store, tenant.org, tenant.namespace, "memory", 6)
        above = await ok(c, "policy.check", operation="grants.list", rules=[rule])
        assert above["decision"] == "deny" and above["rules"][0]["leaves"][0]["observed"] == 3.0


async def test_check_with_rules_passed_in_reads_fresh_history_and_keeps_no_window(enforce_stack: Instance, enforce_tenant: Tenant) -> None:
    proposed = {
        "name": "no-second-list",
        "effect": "forbid",
        "actions": ["grants.list"],
        "condition": {"op": "count_within", "within": "1h", "operation": "grants.list", "cmp": "gte", "value": 1},
    }
    history = gate_of(enforce_stack).history
    assert history is not None
    async with enforce_tenant.client(**{"X-Loom-Agent": "bot"}) as c, ledger_held(enforce_stack):
        await ok(c, "grants.list")  # not in the table yet: the ring has it
        verdict = await ok(c, "policy.check", operation="grants.list", rules=[proposed])
    assert (verdict["decision"], verdict["would_enforce"]) == ("deny", True)
    assert verdict["rules"][0]["leaves"][0]["observed"] == 1.0
    assert history.cached_window(enforce_tenant.org, enforce_tenant.namespace, Shape()) is None  # no rules stored: no window kept

"""policy.replay: what proposed rules, or a stored rule in another mode, would have decided
for each call recorded in a window, with totals."""

from __future__ import annotations

from typing import Any

from loom_runner.embedded import Instance

from tests.conftest import Tenant

from .conftest import eventually, ok, refused

SECOND_LIST = {"op": "count_within", "within": "1h", "operation": "grants.list", "cmp": "gte", "value": 2}


def rule(name: str = "third-list", **over: Any) -> dict[str, Any]:
    return {"name": name, "effect": "forbid", "actions": ["grants.list"], "condition": SECOND_LIST, **over}


async def recorded(stack: Instance, tenant: Tenant, n: int) -> bool:
    await stack.runtime.ledger.flush()
    rows = await stack.runtime.store.query(
        "SELECT count() AS n FROM {db}.agent_events WHERE org = {org:String} AND op = 'grants.list'", {"org": tenant.org}
    )
    return int(rows[0]["n"]) >= n


async def make_history(stack: Instance, tenant: Tenant) -> None:
    async with tenant.client(**{"X-Loom-Agent": "bot"}) as bot, tenant.client(**{"X-Loom-Agent": "other"}) as other:
        for _ in range(3):
            await ok(bot, "grants.list")
        await ok(other, "grants.list")
        await ok(bot, "auth.whoami")
    await eventually(lambda: recorded(stack, tenant, 4))


async def test_replay_reports_per_call_what_a_proposed_rule_would_have_decided(stack: Instance, tenant: Tenant) -> None:
    await make_history(stack, tenant)
    async with tenant.client() as c:
        body = await ok(c, "policy.replay", rules=[rule()], mode="enforce", since="1h")
    totals = body["totals"]
    assert (totals["calls"], totals["evaluated"], totals["allowed"], totals["denied"], totals["would_enforce"], totals["newly_denied"]) == (
        4,
        4,
        3,
        1,
        1,
        1,
    )
    assert totals["by_rule"] == [{"name": "third-list", "evaluated": 4, "denied": 1, "errors": 0}]
    assert body["mode"] == "enforce" and body["truncated"] is False
    calls = body["calls"]
    assert [(x["agent"], x["decision"]) for x in calls] == [("bot", "allow"), ("bot", "allow"), ("bot", "deny"), ("other", "allow")]
    third = calls[2]
    assert third["would_enforce"] is True and third["recorded_ok"] is True and third["determining_rules"] == ["third-list"]
    leaf = third["rules"][0]["leaves"][0]
    assert (leaf["observed"], leaf["key_value"]) == (2.0, "bot")
    # Past-only: each call sees only the calls before it.
    assert [x["rules"][0]["leaves"][0]["observed"] for x in calls] == [0.0, 1.0, 2.0, 0.0]


async def test_replay_of_a_stored_shadow_rule_in_enforce_mode(stack: Instance, tenant: Tenant) -> None:
    await make_history(stack, tenant)
    async with tenant.client() as c:
        await ok(c, "policy.set", **rule(mode="shadow"))
        as_is = await ok(c, "policy.replay", since="1h")
        as_enforced = await ok(c, "policy.replay", names=["third-list"], mode="enforce", since="1h", only_denied=True)
        only_bot = await ok(c, "policy.replay", agent="other", since="1h")
        await refused(c, "policy.replay", 404, "RESOURCE_NOT_FOUND", names=["nope"])
        await refused(c, "policy.replay", 422, "VALIDATION_FAILED", mode="loud")
    assert (as_is["totals"]["denied"], as_is["totals"]["would_enforce"]) == (1, 0)  # shadow: nothing enforced
    assert (as_enforced["totals"]["denied"], as_enforced["totals"]["would_enforce"]) == (1, 1)
    assert [x["decision"] for x in as_enforced["calls"]] == ["deny"]
    assert [x["agent"] for x in only_bot["calls"]] == ["other"]


async def test_replay_skips_calls_refused_before_the_gate_and_the_policy_ops(stack: Instance, tenant: Tenant) -> None:
    async with tenant.client(**{"X-Loom-Agent": "bot"}) as admin:
        await ok(admin, "grants.list")
        await ok(admin, "policy.list")  # the gate never applies to policy.*: nothing to replay
        await ok(admin, "sa.create", name="reader", role="viewer")
        minted = await ok(admin, "token.mint", subject="sa:reader", roles={tenant.namespace: "viewer"}, default_namespace=tenant.namespace)
    async with tenant.client(minted["token"]) as viewer:
        await refused(viewer, "grants.set", 403, "AUTH_INSUFFICIENT", subject="user:x", role="viewer")  # refused by its role

    async def landed() -> bool:
        await stack.runtime.ledger.flush()
        rows = await stack.runtime.store.query(
            "SELECT count() AS n FROM {db}.agent_events WHERE org = {org:String} AND error_code = 'AUTH_INSUFFICIENT'", {"org": tenant.org}
        )
        return bool(rows[0]["n"]) and await recorded(stack, tenant, 1)

    await eventually(landed)
    everything = {"name": "all", "effect": "forbid", "actions": ["*"], "condition": {**SECOND_LIST, "operation": "*", "value": 0}}
    async with tenant.client() as c:
        body = await ok(c, "policy.replay", rules=[everything], mode="enforce", since="1h")
    assert [x["operation"] for x in body["calls"]] == ["grants.list", "sa.create", "token.mint"]
    assert body["totals"]["calls"] == 3


async def test_every_schema_valid_window_is_answered(stack: Instance, tenant: Tenant) -> None:
    """since/until publish their grammar (an RFC 3339 instant or a duration back from now), and
    every window it allows is answered: one that ends before it starts holds no calls, one
    reaching before the epoch or after now is cut to what the ledger can hold."""
    await make_history(stack, tenant)
    async with tenant.client() as c:
        inverted = await ok(c, "policy.replay", rules=[rule()], since="1m", until="1h")
        vast = await ok(c, "policy.replay", rules=[rule()], since="999999999d", until="9999-12-31T23:59:59Z")
        decisions = await ok(c, "policy.decisions", since="999999999d")
        bad = await refused(c, "policy.replay", 422, "VALIDATION_FAILED", rules=[rule()], since="yesterday")
    assert inverted["totals"]["calls"] == 0 and inverted["calls"] == []
    assert vast["totals"]["calls"] == 4
    assert isinstance(decisions["decisions"], list)
    assert bad["detail"]["field"] == "since"


async def test_refusals_of_well_formed_replays_are_not_422s(stack: Instance, tenant: Tenant) -> None:
    """What only the namespace's state refuses (no stored rules to replay) is a 404; two proposed
    rules under one name conflict (409)."""
    async with tenant.client() as c:
        none = await refused(c, "policy.replay", 404, "RESOURCE_NOT_FOUND")
        twice = await refused(c, "policy.replay", 409, "ALREADY_EXISTS", rules=[rule(), rule()])
        checked = await refused(c, "policy.check", 409, "ALREADY_EXISTS", operation="grants.list", rules=[rule(), rule()])
    assert none["detail"]["reason"] == "no_rules"
    assert twice["detail"] == checked["detail"] == {"field": "rules", "rule": "third-list", "reason": "duplicate"}

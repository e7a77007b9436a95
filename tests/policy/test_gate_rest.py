"""The gate through REST, on instances in each deployment mode: off reads and writes nothing,
shadow logs and allows, enforce denies with the deciding values; evaluation errors; policy.*
never gated; the caller pin; identity and task ops gated."""

from __future__ import annotations

import asyncio
from typing import Any

from loom_core.chain import GateCall
from loom_core.chain.context import CallContext
from loom_core.chain.ledger import LedgerCaller, call_row
from loom_core.errors import Forbidden
from loom_core.identity.tokens import Principal
from loom_core.roles import Role
from loom_runner.embedded import Instance

from tests.conftest import Tenant, unique

from .conftest import eventually, gate_of, ledger_held, ledger_rows, ok, on, one_list_per_hour, refused

BOT = {"X-Loom-Agent": "bot"}


async def decisions_of(tenant: Tenant, **filters: Any) -> list[dict[str, Any]]:
    async with tenant.client() as c:
        return list((await ok(c, "policy.decisions", **filters))["decisions"])


def _caller(tenant: Tenant) -> LedgerCaller:
    return {
        "org": tenant.org,
        "namespace": tenant.namespace,
        "subject": "user:admin",
        "agent": "bot",
        "user": "",
        "session": "",
        "transport": "grpc",
        "run_id": "",
        "consumer": "",
        "token_id": "",
    }


# --- off ------------------------------------------------------------------------------------


async def test_off_mode_gate_reads_and_writes_nothing(stack: Instance, tenant: Tenant) -> None:
    gate = gate_of(stack)
    assert gate.enabled is False and gate.history is None and gate.rules is None
    assert gate.history is None and not stack.runtime.ledger.observers
    async with tenant.client(**BOT) as c:
        await ok(c, "policy.set", **one_list_per_hour())
        for _ in range(3):
            await ok(c, "grants.list")
        listed = await ok(c, "policy.list")
    assert listed["mode"] == "off" and [r["name"] for r in listed["rules"]] == ["one-list-per-hour"]
    await stack.runtime.ledger.flush()
    rows = await stack.runtime.store.query("SELECT count() AS n FROM {db}.policy_decisions WHERE org = {org:String}", {"org": tenant.org})
    assert rows[0]["n"] == 0


# --- shadow ---------------------------------------------------------------------------------


async def test_shadow_logs_each_decision_and_allows(shadow_tenant: Tenant) -> None:
    async with shadow_tenant.client(**BOT) as c:
        await ok(c, "policy.set", **one_list_per_hour())
        await ok(c, "grants.list")
        await ok(c, "grants.list")  # would be denied in enforce; shadow lets it through
        await ok(c, "auth.whoami")  # no rule applies: no decision row
    denied = await eventually(lambda: decisions_of(shadow_tenant, decision="deny"))
    allowed = await decisions_of(shadow_tenant, decision="allow")
    assert [d["operation"] for d in denied] == ["grants.list"] and len(allowed) == 1
    d = denied[0]
    assert (d["enforced"], d["mode"], d["agent"], d["determining_rules"]) == (False, "shadow", "bot", ["one-list-per-hour"])
    leaf = d["rules"][0]["leaves"][0]
    assert (leaf["op"], leaf["observed"], leaf["cmp"], leaf["threshold"], leaf["holds"]) == ("count_within", 1.0, "gte", 1.0, True)
    assert len(await decisions_of(shadow_tenant)) == 2


async def test_a_decision_row_names_the_rules_that_applied_in_their_outcomes_order(shadow_tenant: Tenant) -> None:
    """A row is buffered as atoms (the rule names from the op's rule lookup) and built at the
    flush: the names `policy.decisions`' rule filter reads are the rules whose outcomes it holds."""
    async with shadow_tenant.client(**BOT) as c:
        await ok(c, "policy.set", **one_list_per_hour("b-lists"))
        await ok(c, "policy.set", **one_list_per_hour("a-tasks", actions=["task.*"]))
        await ok(c, "policy.set", **one_list_per_hour("c-lists"))
        await ok(c, "grants.list")
    (d,) = await eventually(lambda: decisions_of(shadow_tenant))
    names = [r["name"] for r in d["rules"]]
    assert sorted(names) == ["b-lists", "c-lists"]
    for name in names:
        assert [x["request_id"] for x in await decisions_of(shadow_tenant, rule=name)] == [d["request_id"]]
    assert await decisions_of(shadow_tenant, rule="a-tasks") == []


async def test_decisions_since_an_instant_keeps_the_later_ones(shadow_tenant: Tenant) -> None:
    async with shadow_tenant.client(**BOT) as c:
        await ok(c, "policy.set", **one_list_per_hour())
        await ok(c, "grants.list")
    await eventually(lambda: decisions_of(shadow_tenant))
    assert len(await decisions_of(shadow_tenant, since="2000-01-01T00:00:00Z")) == 1
    assert len(await decisions_of(shadow_tenant, since="1h")) == 1
    assert await decisions_of(shadow_tenant, since="2999-01-01T00:00:00Z") == []


async def test_a_rule_in_enforce_mode_enforces_in_a_shadow_deployment(shadow_tenant: Tenant) -> None:
    async with shadow_tenant.client(**BOT) as c:
        await ok(c, "policy.set", **one_list_per_hour(mode="enforce"))
        await ok(c, "grants.list")
        err = await refused(c, "grants.list", 403, "POLICY_FORBIDDEN")
    assert err["detail"]["determining_rules"] == ["one-list-per-hour"]


# --- enforce --------------------------------------------------------------------------------


async def test_enforce_denies_with_the_rules_and_per_leaf_values_that_decided(enforce_tenant: Tenant) -> None:
    async with enforce_tenant.client(**BOT) as c:
        await ok(c, "policy.set", **one_list_per_hour())
        await ok(c, "grants.list")
        err = await refused(c, "grants.list", 403, "POLICY_FORBIDDEN")
    detail = err["detail"]
    assert detail["reason"] == "policy" and detail["mode"] == "enforce"
    assert detail["determining_rules"] == ["one-list-per-hour"]
    [rule] = detail["rules"]
    assert (rule["name"], rule["effect"], rule["mode"], rule["condition_holds"], rule["denies"]) == (
        "one-list-per-hour",
        "forbid",
        "enforce",
        True,
        True,
    )
    [leaf] = rule["leaves"]
    assert leaf["observed"] == 1.0 and leaf["key"] == "agent" and leaf["key_value"] == "bot" and leaf["within_seconds"] == 3600
    assert leaf["last_time"].endswith("Z")
    assert "one-list-per-hour" in err["message"]
    deny = await eventually(lambda: decisions_of(enforce_tenant, decision="deny"))
    assert deny[0]["enforced"] is True and deny[0]["operation"] == "grants.list"


async def test_the_decision_row_is_recorded_after_the_check_returns(enforce_tenant: Tenant, enforce_stack: Instance) -> None:
    """Nothing but the verdict on the answer's path: `check` returns (or refuses) with the call's
    decision row not yet recorded; it leaves that to the chain (`GateCall.after`, run with the
    call's ledger row after the answer has gone), and the row holds the verdict decided."""
    async with enforce_tenant.client(**BOT) as c:
        await ok(c, "policy.set", **one_list_per_hour())
    gate = gate_of(enforce_stack)
    writer, history = gate.decisions, gate.history
    assert writer is not None and history is not None
    op = enforce_stack.runtime.catalog.get("grants.list")
    principal = Principal(jti="t", sub="user:admin", org=enforce_tenant.org, roles={enforce_tenant.namespace: "admin"}, iat=0, exp=2**40)
    outcomes = []
    for _ in range(2):
        ctx = CallContext(op=op, principal=principal, namespace=enforce_tenant.namespace, role=Role.ADMIN, agent="bot")
        call = GateCall(ctx, op.request_cls())
        try:
            await gate.check(call)
            outcomes.append("allow")
        except Forbidden:
            outcomes.append("deny")
        assert not [r for r in writer._buf if r[8] == ctx.request_id] and call.after is not None
        # what the chain does after the answer: the gate's record, then the ledger row (which the window takes)
        call.after()
        history.observe_ledger_row(call_row(_caller(enforce_tenant), "grants.list", True, "", 0.0, {}, 0, ctx.request_id, False))
        [row] = [r for r in writer._buf if r[8] == ctx.request_id]
        assert (row[0], row[6], row[9]) == (enforce_tenant.org, "grants.list", outcomes[-1])
    assert outcomes == ["allow", "deny"]


async def test_enforce_sees_the_callers_newest_calls_before_the_ledger_lands(enforce_tenant: Tenant, enforce_stack: Instance) -> None:
    """Two calls back to back: the second is refused while the first's row is still in the
    ledger's buffer (the gate's window is fed as each row is recorded, not from the table)."""
    async with enforce_tenant.client(**BOT) as c:
        await ok(c, "policy.set", **one_list_per_hour())
        async with ledger_held(enforce_stack):
            await ok(c, "grants.list")
            await refused(c, "grants.list", 403, "POLICY_FORBIDDEN")
            assert await ledger_rows(enforce_stack, enforce_tenant, "grants.list") == 0


async def test_an_evaluation_error_denies_a_write_and_allows_a_read(enforce_tenant: Tenant) -> None:
    broken = {"op": "formerly", "within": "1h", "operation": "grants.list", "args_equal": {"subject": "$args.no_such_field"}}
    async with enforce_tenant.client(**BOT) as c:
        await ok(c, "policy.set", name="broken", effect="forbid", actions=["grants.*"], condition=broken)
        body = await ok(c, "grants.list")  # a read: allowed, the error reported in the decision
        assert "grants" in body
        err = await refused(c, "grants.set", 403, "POLICY_FORBIDDEN", subject="user:someone", role="viewer")
    assert err["detail"]["errors"] == [
        {"rule": "broken", "path": "condition", "message": "$args.no_such_field: the call has no argument no_such_field"}
    ]
    assert err["detail"]["write_shaped"] is True
    read = await eventually(lambda: decisions_of(enforce_tenant, operation="grants.list"))
    assert read[0]["decision"] == "allow" and read[0]["errors"][0]["rule"] == "broken"


async def test_policy_ops_are_never_gated_so_a_rule_can_always_be_fixed(enforce_tenant: Tenant) -> None:
    everything = {"op": "count_within", "within": "1h", "operation": "*", "cmp": "gte", "value": 0}
    async with enforce_tenant.client(**BOT) as c:
        await ok(c, "policy.set", name="lockout", effect="forbid", actions=["*"], condition=everything)
        await refused(c, "auth.whoami", 403, "POLICY_FORBIDDEN")
        await refused(c, "grants.list", 403, "POLICY_FORBIDDEN")
        assert (await ok(c, "policy.list"))["rules"][0]["name"] == "lockout"
        verdict = await ok(c, "policy.check", operation="auth.whoami")
        assert verdict["decision"] == "deny"
        await ok(c, "policy.decisions")
        await ok(c, "policy.delete", name="lockout")
        await ok(c, "auth.whoami")


async def test_the_caller_pin_another_principals_events_never_count(enforce_tenant: Tenant) -> None:
    async with enforce_tenant.client() as admin:
        await ok(admin, "policy.set", **one_list_per_hour())
        await ok(admin, "sa.create", name="other", role="viewer")
        minted = await ok(
            admin, "token.mint", subject="sa:other", roles={enforce_tenant.namespace: "viewer"}, default_namespace=enforce_tenant.namespace
        )
    async with enforce_tenant.client(**BOT) as c:
        await ok(c, "grants.list")
        await refused(c, "grants.list", 403, "POLICY_FORBIDDEN")
    # Another subject under the very same agent label starts from its own empty history.
    async with enforce_tenant.client(minted["token"], **BOT) as other:
        await ok(other, "grants.list")
        err = await refused(other, "grants.list", 403, "POLICY_FORBIDDEN")
    assert err["detail"]["rules"][0]["leaves"][0]["observed"] == 1.0


async def test_key_choice_agent_label_vs_actor(enforce_tenant: Tenant) -> None:
    async with enforce_tenant.client() as c:
        await ok(c, "policy.set", **one_list_per_hour())
    async with enforce_tenant.client(**{"X-Loom-Agent": "a"}) as a, enforce_tenant.client(**{"X-Loom-Agent": "b"}) as b:
        await ok(a, "grants.list")
        await ok(b, "grants.list")  # key agent (default): another label, another history
        await refused(a, "grants.list", 403, "POLICY_FORBIDDEN")
        actor = {**one_list_per_hour()["condition"], "key": "actor", "value": 2}
        await ok(a, "policy.set", **one_list_per_hour(name="per-actor", condition=actor))
    async with enforce_tenant.client(**{"X-Loom-Agent": "c"}) as fresh:
        # A label with no history of its own: only the per-subject rule sees a's and b's lists.
        err = await refused(fresh, "grants.list", 403, "POLICY_FORBIDDEN")
    assert err["detail"]["determining_rules"] == ["per-actor"]
    assert err["detail"]["rules"][0]["leaves"][0]["observed"] == 2.0


async def test_a_call_refused_by_its_role_never_reaches_the_gate(enforce_tenant: Tenant) -> None:
    async with enforce_tenant.client() as admin:
        await ok(
            admin,
            "policy.set",
            name="no-grants",
            effect="forbid",
            actions=["grants.set"],
            condition={"op": "count_within", "within": "1h", "operation": "*", "cmp": "gte", "value": 0},
        )
        await ok(admin, "sa.create", name="viewer-bot", role="viewer")
        minted = await ok(
            admin,
            "token.mint",
            subject="sa:viewer-bot",
            roles={enforce_tenant.namespace: "viewer"},
            default_namespace=enforce_tenant.namespace,
        )
    async with enforce_tenant.client(minted["token"]) as viewer:
        await refused(viewer, "grants.set", 403, "AUTH_INSUFFICIENT", subject="user:x", role="viewer")
    assert await decisions_of(enforce_tenant, operation="grants.set") == []


async def test_task_ops_pass_the_gate(enforce_stack: Instance, enforce_tenant: Tenant) -> None:
    inbox = unique("inbox")
    one_create = {
        "op": "count_within",
        "within": "1h",
        "operation": "task.create",
        "args_equal": {"inbox": "$args.inbox"},
        "cmp": "gte",
        "value": 1,
    }
    async with enforce_tenant.client(**BOT) as c:
        await ok(c, "inbox.register", inbox=inbox, owner_agent="worker")
        await ok(c, "policy.set", name="one-task-per-inbox", effect="forbid", actions=["task.*"], condition=one_create)
        await ok(
            c,
            "policy.set",
            **one_list_per_hour(
                name="one-task-list", actions=["task.list"], condition={**one_list_per_hour()["condition"], "operation": "task.list"}
            ),
        )
        await ok(c, "task.create", inbox=inbox, kind="chore", title="first")
        err = await refused(c, "task.create", 403, "POLICY_FORBIDDEN", inbox=inbox, kind="chore", title="second")
        assert err["detail"]["determining_rules"] == ["one-task-per-inbox"]
        await ok(c, "task.list")
        await refused(c, "task.list", 403, "POLICY_FORBIDDEN")


# --- replicas -------------------------------------------------------------------------------


async def test_history_from_another_replica_counts_at_once_through_the_feed(
    enforce_stack: Instance, shadow_stack: Instance, enforce_tenant: Tenant
) -> None:
    """A call on one replica counts on another before its ledger row reaches the table."""
    async with enforce_tenant.client(**BOT) as c:
        await ok(c, "policy.set", **one_list_per_hour(mode="enforce"))
    await eventually(lambda: _has_rule(shadow_stack, enforce_tenant, "one-list-per-hour"), within=3)
    async with ledger_held(enforce_stack, shadow_stack):
        async with on(enforce_tenant, shadow_stack).client(**BOT) as s:
            await ok(s, "grants.list")
        async with enforce_tenant.client(**BOT) as c:
            # policy.check dry-runs over the same live window without adding a call to it.
            await eventually(lambda: _check_denies(c), within=3)
            err = await refused(c, "grants.list", 403, "POLICY_FORBIDDEN")
        assert await ledger_rows(enforce_stack, enforce_tenant, "grants.list") == 0
    assert err["detail"]["rules"][0]["leaves"][0]["observed"] == 1.0
    # The feed's connection has no echo: the server never sent the shadow replica its own batch
    # (a round trip on that connection first, so an echo would have been read before it).
    shadow = gate_of(shadow_stack)
    assert shadow.history is not None and shadow.bus is not None
    await (await shadow.bus.quiet()).flush()
    await asyncio.sleep(0)
    assert shadow.history.echoes_received == 0


async def _has_rule(inst: Instance, tenant: Tenant, name: str) -> bool:
    rules = gate_of(inst).rules
    assert rules is not None
    return rules.cached(tenant.org, tenant.namespace).get(name) is not None


async def _check_denies(c: Any) -> bool:
    verdict = await ok(c, "policy.check", operation="grants.list")
    return bool(verdict["decision"] == "deny")


# --- set / delete / list --------------------------------------------------------------------


async def test_a_malformed_rule_is_refused_with_422_naming_the_path(enforce_tenant: Tenant) -> None:
    async with enforce_tenant.client() as c:
        err = await refused(
            c,
            "policy.set",
            422,
            "VALIDATION_FAILED",
            name="bad",
            effect="forbid",
            actions=["grants.list"],
            condition={
                "op": "all",
                "of": [
                    {"op": "formerly", "within": "1h", "operation": "x.y"},
                    {"op": "count_within", "within": "an hour", "operation": "x.y", "cmp": "gt", "value": 1},
                ],
            },
        )
    assert err["detail"]["field"] == "condition.of[1].within"
    assert err["message"].startswith("condition.of[1].within:")


async def test_set_reports_leaf_count_and_whether_it_widened(enforce_tenant: Tenant) -> None:
    strict = {"op": "count_within", "within": "1h", "operation": "grants.list", "cmp": "gt", "value": 5}
    async with enforce_tenant.client(**BOT) as c:
        first = await ok(
            c,
            "policy.set",
            name="cap",
            effect="forbid",
            actions=["grants.list"],
            condition={"op": "any", "of": [strict, {"op": "formerly", "within": "1m", "operation": "sa.create"}]},
        )
        assert (first["leaf_count"], first["widened"], first["created"]) == (2, False, True)
        stricter = await ok(
            c,
            "policy.set",
            name="cap",
            effect="forbid",
            actions=["grants.*"],
            condition={"op": "any", "of": [{**strict, "value": 2}, {"op": "formerly", "within": "1m", "operation": "sa.create"}]},
        )
        assert (stricter["widened"], stricter["created"]) == (False, False)
        # Dropping a branch of a forbid's `any` denies in fewer cases: that widens.
        looser = await ok(c, "policy.set", name="cap", effect="forbid", actions=["grants.*"], condition=strict)
        assert (looser["widened"], looser["leaf_count"]) == (True, 1)
        assert looser["widened_reasons"] == ["the new condition does not deny every call the old one denied"]


async def _audit(inst: Instance, tenant: Tenant) -> list[dict[str, Any]]:
    return await inst.runtime.store.query(
        "SELECT rule, change, reasons FROM {db}.policy_audit WHERE org = {org:String} AND kind = 'policy.widened' ORDER BY ts",
        {"org": tenant.org},
    )


async def test_a_widening_change_writes_a_policy_widened_audit_row(enforce_stack: Instance, enforce_tenant: Tenant) -> None:
    strict = {"op": "count_within", "within": "1h", "operation": "grants.list", "cmp": "gt", "value": 5}
    async with enforce_tenant.client(**BOT) as c:
        await ok(c, "policy.set", name="cap", effect="forbid", actions=["grants.list"], condition=strict)
        narrower = await ok(c, "policy.set", name="cap", effect="forbid", actions=["grants.list"], condition={**strict, "value": 2})
        assert narrower["widened"] is False
        assert await _audit(enforce_stack, enforce_tenant) == []
        wider = await ok(c, "policy.set", name="cap", effect="forbid", actions=["grants.list"], condition={**strict, "value": 50})
        assert wider["widened"] is True and wider["widened_reasons"]
        deleted = await ok(c, "policy.delete", name="cap")
        assert deleted == {"deleted": True, "widened": True}
        await refused(c, "policy.delete", 404, "RESOURCE_NOT_FOUND", name="cap")
    audit = await _audit(enforce_stack, enforce_tenant)
    assert [(a["rule"], a["change"]) for a in audit] == [("cap", "set"), ("cap", "delete")]


async def test_policy_list_shows_rules_and_the_deployments_mode(enforce_tenant: Tenant) -> None:
    async with enforce_tenant.client() as c:
        await ok(c, "policy.set", **one_list_per_hour(description="one a day keeps the auditor away", mode="shadow"))
        listed = await ok(c, "policy.list")
    assert listed["mode"] == "enforce" and listed["max_window_seconds"] == 86400
    [rule] = listed["rules"]
    assert (rule["name"], rule["mode"], rule["leaf_count"], rule["updated_by"]) == ("one-list-per-hour", "shadow", 1, "user:admin")
    assert rule["condition"]["op"] == "count_within" and rule["actions"] == ["grants.list"]


async def test_rules_are_per_namespace(enforce_stack: Instance, enforce_tenant: Tenant) -> None:
    other_ns = unique("ns")
    async with enforce_tenant.client(**BOT) as c:
        await ok(c, "namespace.create", name=other_ns)
        await ok(c, "policy.set", **one_list_per_hour())
        await ok(c, "grants.list")
        await refused(c, "grants.list", 403, "POLICY_FORBIDDEN")
    async with enforce_tenant.client(**{**BOT, "X-Loom-Namespace": other_ns}) as other:
        await ok(other, "grants.list")
        await ok(other, "grants.list")


async def test_the_ledger_rows_of_refused_calls_do_not_count_as_calls_made(enforce_tenant: Tenant) -> None:
    """A refused call is recorded (ok=false); the default outcome counts successful calls only."""
    async with enforce_tenant.client(**BOT) as c:
        await ok(c, "policy.set", **one_list_per_hour(condition={**one_list_per_hour()["condition"], "cmp": "gte", "value": 2}))
        await ok(c, "grants.list")
        await ok(c, "grants.list")
        for _ in range(3):
            err = await refused(c, "grants.list", 403, "POLICY_FORBIDDEN")
            assert err["detail"]["rules"][0]["leaves"][0]["observed"] == 2.0


async def test_calls_made_before_a_rule_existed_count_from_the_table(enforce_stack: Instance, enforce_tenant: Tenant) -> None:
    async with enforce_tenant.client(**BOT) as c:
        await ok(c, "grants.list")
        await eventually(lambda: _landed(enforce_stack, enforce_tenant))
        await ok(c, "policy.set", **one_list_per_hour())  # the window is built now, from the table
        err = await refused(c, "grants.list", 403, "POLICY_FORBIDDEN")
    assert err["detail"]["rules"][0]["leaves"][0]["observed"] == 1.0


async def test_calls_not_yet_in_the_table_when_a_rule_is_set_still_count(enforce_stack: Instance, enforce_tenant: Tenant) -> None:
    """The window is built from the table plus the replica's ring of recent rows."""
    async with enforce_tenant.client(**BOT) as c, ledger_held(enforce_stack):
        await ok(c, "grants.list")
        await ok(c, "policy.set", **one_list_per_hour())
        assert await ledger_rows(enforce_stack, enforce_tenant, "grants.list") == 0
        err = await refused(c, "grants.list", 403, "POLICY_FORBIDDEN")
    assert err["detail"]["rules"][0]["leaves"][0]["observed"] == 1.0


async def _landed(inst: Instance, tenant: Tenant) -> bool:
    await inst.runtime.ledger.flush()
    return await ledger_rows(inst, tenant, "grants.list") >= 1

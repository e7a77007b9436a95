"""The spec's read-before-delete policy (spec 003, History policies), run as written against the
memory ops Loom serves: memory.get and memory.delete name the key `memory_key`, so the rule's
`args_equal: {"memory_key": "$args.memory_key"}` compares the delete's key with the read's."""

from __future__ import annotations

from typing import Any

from loom import Agent
from loom_runner.embedded import Instance

from tests.conftest import Tenant, call
from tests.policy.conftest import enforce_stack, enforce_tenant, eventually  # noqa: F401


def spec_rule() -> dict[str, Any]:
    """The spec's example's condition, word for word."""
    return {
        "op": "formerly",
        "within": "1h",
        "operation": "memory.get",
        "args_equal": {"memory_key": "$args.memory_key"},
    }


async def test_the_specs_read_before_delete_rule_governs_the_real_memory_ops(enforce_stack: Instance, enforce_tenant: Tenant) -> None:  # noqa: F811
    t = enforce_tenant
    async with Agent(org=t.org, namespace=t.namespace, agent="admin", api_key=t.token, base_url=t.base_url) as admin:
        await admin.policy.set(
            "read-before-delete",
            effect="require",
            actions=["memory.delete"],
            condition=spec_rule(),
            description="An agent deletes only what it has just looked at.",
        )
    async with t.client(**{"X-Loom-Agent": "cleanup-bot", "X-Loom-Namespace": t.namespace}) as bot:
        for key in ("notes/old", "notes/new"):
            r = await call(bot, "memory.set", memory_key=key, value=f"the {key} note")
            assert r.status_code == 200, r.text

        # No read of notes/old yet: the delete is refused and nothing is deleted.
        r = await call(bot, "memory.delete", memory_key="notes/old")
        assert r.status_code == 403, r.text
        assert r.json()["error"]["code"] == "POLICY_FORBIDDEN"
        # The spec's dry run says the same, in the verdict's spec'd shape.
        async with Agent(org=t.org, namespace=t.namespace, agent="admin", api_key=t.token, base_url=t.base_url) as agent:
            verdict = await agent.policy.check(operation="memory.delete", agent="cleanup-bot", args={"memory_key": "notes/old"})
        assert set(verdict) >= {"decision", "would_enforce", "mode", "write_shaped", "determining_rules", "rules", "latency_ms"}
        assert verdict["decision"] == "deny" and verdict["determining_rules"] == ["read-before-delete"], verdict
        assert verdict["write_shaped"] is True and verdict["would_enforce"] is True

        # Nothing was deleted; this memory.get is the read the rule asks for.
        assert (await call(bot, "memory.get", memory_key="notes/old")).json()["status"] == "active"

        # The delete of the same key now goes through.
        async def deleted() -> dict[str, Any] | None:
            r = await call(bot, "memory.delete", memory_key="notes/old")
            return r.json() if r.status_code == 200 else None

        assert (await eventually(deleted))["deleted"] is True

        # After the read, the dry run of the same key's delete allows it.
        async def allowed() -> dict[str, Any] | None:
            async with Agent(org=t.org, namespace=t.namespace, agent="admin", api_key=t.token, base_url=t.base_url) as agent:
                v = await agent.policy.check(operation="memory.delete", agent="cleanup-bot", args={"memory_key": "notes/old"})
            return v if v["decision"] == "allow" else None

        await eventually(allowed)

        # A read of one key does not open another's delete.
        r = await call(bot, "memory.delete", memory_key="notes/new")
        assert r.status_code == 403 and r.json()["error"]["code"] == "POLICY_FORBIDDEN", r.text

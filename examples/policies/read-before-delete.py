"""A history policy, and what the gate would decide: `.venv/bin/python examples/policies/read-before-delete.py`."""

import asyncio

from loom import Agent


async def main() -> None:
    async with Agent.from_env("admin") as agent:
        out = await agent.policy.set(
            "read-before-delete",
            effect="require",
            actions=["memory.delete"],
            condition={"op": "formerly", "within": "1h", "operation": "memory.get"},
            description="An agent deletes only after it has read memory in the last hour.",
        )
        # The mode the rule is applied in, and why it may refuse nothing (policy mode off or shadow).
        print(out["mode_in_effect"], out["warnings"])
        verdict = await agent.policy.check(operation="memory.delete", agent="cleanup-bot", args={})
        # verdict: {decision, would_enforce, mode, write_shaped, determining_rules, errors, rules, latency_ms}
        print(verdict["decision"], verdict["mode"])


asyncio.run(main())

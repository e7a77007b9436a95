"""docs/decisions.md, pins-and-supersede: `.venv/bin/python examples/decisions/pins-and-supersede.py`."""

import asyncio

from loom import Agent, ConflictError


async def main() -> None:
    async with Agent.from_env("docs") as agent:
        rec = await agent.decision.record(category="vendor", scenario="transactional email", outcome="Postmark")
        await agent.ops.memory.pin(memory_key=rec["memory_key"])
        try:
            await agent.decision.record(category="vendor", scenario="transactional email", outcome="SES")
            raise AssertionError("refused")
        except ConflictError as err:
            assert err.code == "PINNED_CONFLICT"
        again = await agent.decision.record(category="vendor", scenario="transactional email", outcome="Postmark")
        assert again["restated"] is True
        await agent.ops.memory.unpin(memory_key=rec["memory_key"])
        changed = await agent.decision.record(category="vendor", scenario="transactional email", outcome="SES")
        assert changed["superseded_prior"] is True
        history = await agent.ops.memory.history(memory_key=rec["memory_key"])
        assert [r["status"] for r in history["records"]] == ["active", "superseded"]


asyncio.run(main())

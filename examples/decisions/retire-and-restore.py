"""docs/decisions.md, retire-and-restore: `.venv/bin/python examples/decisions/retire-and-restore.py`."""

import asyncio

from loom import Agent


async def main() -> None:
    async with Agent.from_env("docs") as agent:
        rec = await agent.decision.record(category="infra", scenario="region for the primary store", outcome="eu-west-1")
        out = await agent.ops.memory.delete(memory_key=rec["memory_key"])
        assert out["retired_record"] is True
        assert await agent.decision.precedents("which region holds our main database?") == []
        await agent.ops.memory.restore(memory_key=rec["memory_key"])
        assert (await agent.ops.memory.get(memory_key=rec["memory_key"]))["status"] == "active"
        assert await agent.decision.precedents("which region holds our main database?") == []
        await agent.decision.record(category="infra", scenario="region for the primary store", outcome="eu-west-1")
        assert len(await agent.decision.precedents("which region holds our main database?")) == 1


asyncio.run(main())

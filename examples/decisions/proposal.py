"""docs/decisions.md, proposal: `.venv/bin/python examples/decisions/proposal.py`."""

import asyncio

from loom import Agent


async def main() -> None:
    async with Agent.from_env("docs") as agent:
        rec = await agent.decision.record(category="build", scenario="wheel builds", outcome="hosted runners", stage="proposed")
        assert rec["statement"] == "wheel builds. Proposed hosted runners."
        row = await agent.ops.memory.get(memory_key=rec["memory_key"])
        assert "decision:proposed" in row["tags"]
        await agent.decision.outcome(rec["memory_key"], "builds take 6 minutes", success=True)
        assert (await agent.decision.precedents("where are wheels built?"))[0]["stage"] == "decided"


asyncio.run(main())

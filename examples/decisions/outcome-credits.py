"""docs/decisions.md, outcome-credits: `.venv/bin/python examples/decisions/outcome-credits.py`."""

import asyncio
import os

from loom import Agent


async def main() -> None:
    agent_key = os.environ["LOOM_TOKEN"]
    async with Agent(
        org=os.environ.get("LOOM_ORG", "acme"),
        namespace=os.environ.get("LOOM_NAMESPACE", "private"),
        agent="docs",
        api_key=agent_key,
    ) as agent:
        run = Agent(org=agent.org, namespace=agent.namespace, agent="planner", api_key=agent_key, base_url=agent.base_url, run_id="run-7")
        async with run:
            note = await run.decision.record(category="notes", scenario="replay window", outcome="replays read 30 days")
            await run.ops.memory.get(memory_key=note["memory_key"])
            rec = await run.decision.record(
                category="storage", scenario="transcript retention", outcome="30 days", memories_used=[note["memory_key"]]
            )
        done = await agent.decision.outcome(rec["memory_key"], "no replay gaps", success=True)
        assert done["credited"] == [note["memory_key"]]
        assert (await agent.ops.memory.get(memory_key=note["memory_key"]))["credits"] == 1
        failed = await agent.decision.outcome(rec["memory_key"], "replays failed past day 20", success=False)
        assert failed["uncredited"] == failed["charged"] == [note["memory_key"]]
        row = await agent.ops.memory.get(memory_key=note["memory_key"])
        assert (row.get("credits", 0), row["charges"]) == (0, 1)


asyncio.run(main())

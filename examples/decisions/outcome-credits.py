"""docs/decisions.md, outcome-credits: `.venv/bin/python examples/decisions/outcome-credits.py`."""

import asyncio

from loom import Agent


async def main() -> None:
    async with Agent.from_env("docs") as agent:
        async with Agent.from_env("planner", run_id="run-7") as run:
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

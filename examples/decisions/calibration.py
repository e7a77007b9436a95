"""docs/decisions.md, calibration: `.venv/bin/python examples/decisions/calibration.py`."""

import asyncio

from loom import Agent


async def main() -> None:
    async with Agent.from_env("docs") as agent:
        for i, ok in enumerate([True, False, False]):
            rec = await agent.decision.record(category="vendor", scenario=f"pick {i}", outcome="A", confidence=0.9)
            await agent.decision.outcome(rec["memory_key"], "done", success=ok)
        [row] = await agent.decision.calibration(category="vendor")
        assert (row["count"], row["successes"]) == (3, 1)
        assert abs(row["brier"] - (0.01 + 0.81 + 0.81) / 3) < 1e-9


asyncio.run(main())

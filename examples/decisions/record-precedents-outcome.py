"""docs/decisions.md, record-precedents-outcome: `.venv/bin/python examples/decisions/record-precedents-outcome.py`."""

import asyncio

from loom import Agent


async def main() -> None:
    async with Agent.from_env("docs") as agent:
        rec = await agent.decision.record(
            category="storage",
            scenario="retention for raw transcripts in the support namespace",
            reasoning="Replay needs 30 days; legal hold is handled by export, not by retention.",
            outcome="keep transcripts 30 days",
            alternatives=["keep forever", "7 days"],
            confidence=0.8,
            influenced_by=["policy/legal/hold"],
        )
        prior = await agent.decision.precedents("how long do we keep transcripts?", category="storage")
        await agent.decision.outcome(rec["memory_key"], "no replay gaps in the quarter", success=True)

        assert rec["memory_key"] == "decision/storage/retention-for-raw-transcripts-in-the-support-namespace"
        assert prior[0]["memory_key"] == rec["memory_key"] and prior[0]["stage"] == "decided"
        row = await agent.ops.memory.get(memory_key=rec["memory_key"])
        assert row["value"] == (
            "retention for raw transcripts in the support namespace. Decided keep transcripts 30 days because "
            "Replay needs 30 days; legal hold is handled by export, not by retention. "
            "Rejected: keep forever; 7 days. Realized: no replay gaps in the quarter."
        )


asyncio.run(main())

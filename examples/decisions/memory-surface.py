"""docs/decisions.md, memory-surface: `.venv/bin/python examples/decisions/memory-surface.py`."""

import asyncio

from loom import Agent


async def main() -> None:
    async with Agent.from_env("docs") as agent:
        out = await agent.ops.memory.set(memory_key="notes/ledger", value="Flushes are batched in loom_core.chain.ledger.")
        assert out["files"] == ["loom_core/chain/ledger.py"] and out["created"] is True
        again = await agent.ops.memory.set(memory_key="notes/ledger", value="Flushes are batched in loom_core.chain.ledger.")
        assert again["restated"] is True
        await agent.decision.record(
            category="perf",
            scenario="ledger flushes",
            outcome="batch every second",
            reasoning="one insert per row is too slow",
            files=["core/loom_core/chain/ledger.py"],
        )
        block = await agent.ops.memory.for_file(path="core/loom_core/chain/ledger.py")
        assert block["block"].startswith("Before editing core/loom_core/chain/ledger.py, read (2 rows):")
        pack = await agent.ops.context.pack(token_budget=200)
        assert (
            pack["block"].split("\n")[1]
            == "- ledger flushes: batch every second — because one insert per row is too slow (#decision/perf/ledger-flushes)"
        )


asyncio.run(main())

"""docs/decisions.md, chain: `.venv/bin/python examples/decisions/chain.py`."""

import asyncio

from loom import Agent


async def main() -> None:
    async with Agent.from_env("docs") as agent:
        await agent.decision.record(category="arch", scenario="event bus", outcome="NATS", caused_by=["incident/12"])
        await agent.decision.record(
            category="arch", scenario="task inbox", outcome="JetStream consumers", caused_by=["decision/arch/event-bus"]
        )
        chain = await agent.decision.chain("decision/arch/task-inbox", direction="upstream")
        assert [(n["memory_key"], n["hops"]) for n in chain["nodes"]] == [
            ("decision/arch/task-inbox", 0),
            ("decision/arch/event-bus", 1),
            ("incident/12", 2),
        ]


asyncio.run(main())

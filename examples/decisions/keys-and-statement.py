"""docs/decisions.md, keys-and-statement: `.venv/bin/python examples/decisions/keys-and-statement.py`."""

import asyncio
import os

from loom import Agent, LoomError


async def main() -> None:
    async with Agent(
        org=os.environ.get("LOOM_ORG", "acme"),
        namespace=os.environ.get("LOOM_NAMESPACE", "private"),
        agent="docs",
        api_key=os.environ["LOOM_TOKEN"],
    ) as agent:
        rec = await agent.decision.record(category="保存", scenario="生ログの保存期間", outcome="三十日", reasoning="三十日")
        assert rec["memory_key"] == "decision/保存/生ログの保存期間"
        assert rec["statement"] == "生ログの保存期間. Decided 三十日."
        try:
            await agent.decision.record(category="storage", scenario="?!", outcome="x")
            raise AssertionError("refused")
        except LoomError as err:
            assert (err.status, err.code) == (400, "MISSING_IDENTITY_FIELD")


asyncio.run(main())

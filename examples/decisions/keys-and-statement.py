"""docs/decisions.md, keys-and-statement: `.venv/bin/python examples/decisions/keys-and-statement.py`."""

import asyncio

from loom import Agent, LoomError


async def main() -> None:
    async with Agent.from_env("docs") as agent:
        rec = await agent.decision.record(category="保存", scenario="生ログの保存期間", outcome="三十日", reasoning="三十日")
        assert rec["memory_key"] == "decision/保存/生ログの保存期間"
        assert rec["statement"] == "生ログの保存期間. Decided 三十日."
        try:
            await agent.decision.record(category="storage", scenario="?!", outcome="x")
            raise AssertionError("refused")
        except LoomError as err:
            assert (err.status, err.code) == (400, "MISSING_IDENTITY_FIELD")


asyncio.run(main())

# example-needs: the assistant configured (LibreChat, docs/operations/assistant.md)
"""The assistant's answer as it comes, through the SDK: `.venv/bin/python examples/assistant/sdk-stream.py`."""

import asyncio
import os

from loom import Agent


async def main() -> None:
    async with Agent(
        org=os.environ.get("LOOM_ORG", "acme"),
        namespace=os.environ.get("LOOM_NAMESPACE", "private"),
        agent="asker",
        api_key=os.environ["LOOM_TOKEN"],
    ) as agent:
        async with agent.assistant.stream("Who are the admins here?") as stream:
            async for text in stream:  # the text; loom.step and loom.text_done are skipped
                print(text, end="")
            answer = await stream.final()
        print()
        print(answer.support, [c.ref for c in answer.citations or [] if c.verified])
        for step in answer.steps or []:
            print("read:", step.text)


asyncio.run(main())

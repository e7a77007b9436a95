# example-needs: the assistant configured (LibreChat, docs/operations/assistant.md)
"""The assistant's answer as events, through the SDK: `.venv/bin/python examples/assistant/sdk-stream.py`."""

import asyncio
import os

from loom import Agent
from loom.assistant import Done, Steps, TextDelta


async def main() -> None:
    async with Agent(
        org=os.environ.get("LOOM_ORG", "acme"),
        namespace=os.environ.get("LOOM_NAMESPACE", "private"),
        agent="asker",
        api_key=os.environ["LOOM_TOKEN"],
    ) as agent:
        async for event in agent.assistant.stream("Who are the admins here?"):
            if isinstance(event, TextDelta):
                print(event.text, end="")
            elif isinstance(event, Steps):
                print("working:", event.steps[-1].text)
            elif isinstance(event, Done):
                print(event.answer.support, [c.ref for c in event.answer.citations if c.verified])


asyncio.run(main())

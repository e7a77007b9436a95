# example-needs: the assistant configured (LibreChat, docs/operations/assistant.md)
"""The assistant's answer as it comes, through the SDK: `.venv/bin/python examples/assistant/sdk-stream.py`."""

import asyncio

from loom import Agent


async def main() -> None:
    async with Agent.from_env("asker") as agent:
        async with agent.assistant.stream("Who are the admins here?") as stream:
            async for text in stream:  # the text; loom.step and loom.text_done are skipped
                print(text, end="")
            answer = await stream.final()
        print()
        print(answer.support, [c["ref"] for c in answer.citations or [] if c["verified"]])
        for step in answer.steps or []:
            print("read:", step.text)


asyncio.run(main())

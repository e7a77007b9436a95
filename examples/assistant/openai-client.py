# example-needs: the assistant configured (LibreChat, docs/operations/assistant.md) and the openai package
"""The assistant through any OpenAI-compatible client: `.venv/bin/python examples/assistant/openai-client.py`."""

import asyncio
import os

from openai import AsyncOpenAI


async def main() -> None:
    base = os.environ.get("LOOM_URL", "http://127.0.0.1:8080")
    client = AsyncOpenAI(base_url=f"{base}/v1/assistant", api_key=os.environ["LOOM_TOKEN"])
    stream = await client.chat.completions.create(
        model="loom", messages=[{"role": "user", "content": "Which inboxes have stale tasks?"}], stream=True
    )
    async for chunk in stream:
        for choice in chunk.choices:  # Loom's own events carry no choices and are skipped here
            print(choice.delta.content or "", end="")


asyncio.run(main())

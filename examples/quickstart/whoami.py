"""Who the token says you are, through the Python SDK: `.venv/bin/python examples/quickstart/whoami.py`."""

import asyncio
import os

from loom import Agent


async def main() -> None:
    async with Agent(
        org=os.environ.get("LOOM_ORG", "acme"),
        namespace=os.environ.get("LOOM_NAMESPACE", "private"),
        agent="me",
        api_key=os.environ["LOOM_TOKEN"],
        base_url=os.environ.get("LOOM_URL", "http://127.0.0.1:8080"),
    ) as a:
        print(await a.ops.auth.whoami())


asyncio.run(main())

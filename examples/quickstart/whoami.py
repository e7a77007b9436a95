"""Who the token says you are, through the Python SDK: `.venv/bin/python examples/quickstart/whoami.py`."""

import asyncio

from loom import Agent


async def main() -> None:
    async with Agent.from_env("me") as a:
        print(await a.ops.auth.whoami())


asyncio.run(main())

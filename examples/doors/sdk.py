"""The Python SDK: `.venv/bin/python examples/doors/sdk.py`."""

import asyncio

from loom import Agent, LoomError, NotFoundError


async def main() -> None:
    async with Agent.from_env("sdk-example") as a:
        me = await a.ops.auth.whoami()
        print(me["subject"], me["role"])
        try:
            await a.ops.task.get(task_id="nosuchtask0000")  # well formed, names no task
        except LoomError as exc:
            print(exc.code, exc.retryable)  # RESOURCE_NOT_FOUND False
            assert isinstance(exc, NotFoundError)


asyncio.run(main())

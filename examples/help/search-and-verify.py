"""Search the docs, read a section, verify citations: `.venv/bin/python examples/help/search-and-verify.py`."""

import asyncio

from loom import Agent


async def main() -> None:
    async with Agent.from_env("reader") as a:
        found = await a.ops.help.search(query="what does TASK_FENCE_STALE mean", limit=3)
        top = found["hits"][0]
        print(top["citation"])  # [help:reference/errors.md § Error codes > TASK_FENCE_STALE]
        section = await a.ops.help.get(page=top["page"], anchor=top["anchor"])
        print(section["text"])
        checked = await a.ops.help.verify(citations=[top["citation"], "[help:tasks.md § No such section]"])
        print([(r["verified"], r["reason"]) for r in checked["results"]])  # [(True, ''), (False, 'no_such_section')]


asyncio.run(main())

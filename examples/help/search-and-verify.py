"""Search the docs, read a section, verify citations: `.venv/bin/python examples/help/search-and-verify.py`."""

import asyncio
import os

from loom import Agent


async def main() -> None:
    async with Agent(
        org=os.environ.get("LOOM_ORG", "acme"),
        namespace=os.environ.get("LOOM_NAMESPACE", "private"),
        agent="reader",
        api_key=os.environ["LOOM_TOKEN"],
    ) as a:
        found = await a.ops.help.search(query="what does TASK_FENCE_STALE mean", limit=3)
        top = found["hits"][0]
        print(top["citation"])  # [help:reference/errors.md § Error codes > TASK_FENCE_STALE]
        section = await a.ops.help.get(page=top["page"], anchor=top["anchor"])
        print(section["text"])
        checked = await a.ops.help.verify(citations=[top["citation"], "[help:tasks.md § No such section]"])
        print([(r["verified"], r["reason"]) for r in checked["results"]])  # [(True, ''), (False, 'no_such_section')]


asyncio.run(main())

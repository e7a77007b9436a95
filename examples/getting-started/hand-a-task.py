"""Hand a task between two agents: `.venv/bin/python examples/getting-started/hand-a-task.py`."""

import asyncio

from loom import Agent


async def main() -> None:
    # Every agent below reads LOOM_URL, LOOM_TOKEN, LOOM_ORG and LOOM_NAMESPACE from the environment.
    # An admin registers the `coder` inbox in the namespace (once).
    async with Agent.from_env("admin") as admin:
        await admin.tasks.register_inbox("coder", owner_agent="coder")

    # The planner posts a task: a writer of the inbox's own namespace is trusted, so it lands in todo.
    async with Agent.from_env("planner") as planner:
        out = await planner.tasks.create(
            "coder",
            kind="review",
            title="Review the getting-started page",
            brief={"objective": "check that every command runs"},
        )
        task_id = out["task"]["task_id"]
        print(out["task"]["status"])  # todo

    # The coder pulls its inbox: the task is claimed under a lease, with a fence for every later write.
    async with Agent.from_env("coder") as coder:
        pulled = await coder.tasks.pull("coder", wait_seconds=5)
        task = pulled["tasks"][0]
        await coder.tasks.complete(task["task_id"], fence=task["fence"], outcome={"verdict": "every command runs"})

    # The planner follows its tasks with a cursor over their events.
    async with Agent.from_env("planner") as planner:
        updates = await planner.tasks.updates(since_seq=0, wait_seconds=5)
        done = [ev for ev in updates["events"] if ev["task_id"] == task_id and ev["kind"] == "done"]
        print(done[0]["data"]["outcome"])  # {'verdict': 'every command runs'}


asyncio.run(main())

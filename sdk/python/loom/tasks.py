"""``agent.tasks``: the task inbox (spec 003, "Task inbox").

Register an inbox and set trust (an admin of the owner namespace)::

    await a.tasks.register_inbox("private-bot", owner_agent="private-bot", posters=["sa:public-bot"])
    await a.tasks.set_policy("private-bot", poster="sa:public-bot", kind="security_finding", mode="review")

Post a task, and follow its outcome with a cursor (a sender)::

    out = await a.tasks.create("private-bot", kind="security_finding", title="…", brief={…}, idempotency_key="f-77")
    upd = await a.tasks.updates(since_seq=cursor, wait_seconds=30)

Pull, work, finish (the owner)::

    async for task in a.tasks.stream("private-bot", kinds=["security_finding"]):
        await a.tasks.complete(task["task_id"], fence=task["fence"], outcome={...})

The one-op methods are generated (``TaskInboxHelpers``: each an op's method under the spec's
name, its leading arguments positional); this module adds the loops, which no single op is.
Times may be given as ``datetime`` objects (a naive one is taken as UTC) or RFC 3339 strings.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Unpack

from ._ops import Task, TaskEvent, TaskInboxHelpers, TaskPullOptions, TaskWatchArgs

__all__ = ["TasksClient"]

LONG_POLL_SECONDS = 30  # the most a pull or watch waits server-side


class TasksClient(TaskInboxHelpers):
    """The task inbox ops, and the loops over ``task.pull`` and ``task.watch``, as ``agent.tasks``."""

    async def stream(self, inbox: str, **pull: Unpack[TaskPullOptions]) -> AsyncIterator[Task]:
        """Claimed tasks of ``inbox``, one at a time, for as long as the loop runs.

        Long-polls ``task.pull`` with ``pull`` (its other arguments; ``wait_seconds`` defaults
        to 30) and yields every task it claims, each with the ``fence`` its owner writes
        present; a create wakes a waiting pull at once. Break out of the loop (or cancel it) to stop.
        """
        pull.setdefault("wait_seconds", LONG_POLL_SECONDS)
        while True:
            out = await self.pull(inbox, **pull)
            for task in out["tasks"]:
                yield task

    async def follow(self, **watch: Unpack[TaskWatchArgs]) -> AsyncIterator[TaskEvent]:
        """One task's or one inbox's events from ``since_seq`` on, for as long as the loop runs.

        Long-polls ``task.watch`` with ``watch`` (its arguments: ``task_id`` or ``inbox``;
        ``wait_seconds`` defaults to 30) and yields each event; each carries its ``seq``, the
        cursor to resume from (``since_seq=event["seq"]``). Break out of the loop (or cancel
        it) to stop.
        """
        watch.setdefault("wait_seconds", LONG_POLL_SECONDS)
        while True:
            out = await self.watch(**watch)
            for event in out["events"]:
                yield event
            watch["since_seq"] = int(out["next_seq"] or watch.get("since_seq", 0))

"""The plane end to end over REST: register, post, pull, complete, read."""

from __future__ import annotations

from tests.tasks.conftest import Org, register


async def test_post_pull_complete_over_rest(org: Org) -> None:
    admin = await org.admin()
    await register(admin)
    owner = await org.owner()
    out = await owner("task.create", inbox="private-bot", kind="chore", title="tidy", brief={"a": 1})
    assert out["created"] is True
    task = out["task"]
    assert task["status"] == "todo"
    pulled = await owner("task.pull", inbox="private-bot")
    assert [t["task_id"] for t in pulled["tasks"]] == [task["task_id"]]
    got = pulled["tasks"][0]
    assert got["fence"] > 0 and got["status"] == "in_progress"
    done = await owner("task.complete", task_id=got["task_id"], fence=got["fence"], outcome={"ok": True})
    assert done["task"]["status"] == "done"
    read = await owner("task.get", task_id=got["task_id"])
    assert read["task"]["status"] == "done" and read["task"]["outcome"] == {"ok": True}

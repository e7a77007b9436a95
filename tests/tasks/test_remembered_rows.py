"""A replica decides its holder's fenced writes on the row it last wrote (no read first); when
another replica moved the task since, the compare-and-set at the remembered revision fails and
the write is decided again on the truth: a stale fence is still refused, a current one stands."""

from __future__ import annotations

from loom_runner.embedded import Instance

from tests.tasks.conftest import Org, register


async def test_stale_fence_is_refused_after_another_replica_moved_the_task(org: Org, tasks_b: Instance) -> None:
    await register(await org.admin())
    on_a, on_b = await org.owner(), await org.owner(via=tasks_b)
    t = (await on_a("task.create", inbox="private-bot", kind="chore", title="t"))["task"]
    first = (await on_a("task.pull", inbox="private-bot"))["tasks"][0]
    assert first["task_id"] == t["task_id"]
    # Replica B moves the task on: blocked, back to todo, claimed again under a new fence.
    await on_b("task.block", task_id=t["task_id"], fence=first["fence"], blocked_on="sender", reason="need the repro")
    await on_b("task.unblock", task_id=t["task_id"], reason="got it")
    second = (await on_b("task.pull", inbox="private-bot"))["tasks"][0]
    assert second["fence"] != first["fence"]
    # Replica A still remembers the first claim's row; the old fence is refused all the same.
    err = await on_a.refused(409, "TASK_FENCE_STALE", "task.complete", task_id=t["task_id"], fence=first["fence"])
    assert err["detail"]["fence"] == first["fence"]
    done = (await on_a("task.complete", task_id=t["task_id"], fence=second["fence"]))["task"]
    assert done["status"] == "done"


async def test_complete_stands_after_a_heartbeat_on_another_replica(org: Org, tasks_b: Instance) -> None:
    await register(await org.admin())
    on_a, on_b = await org.owner(), await org.owner(via=tasks_b)
    t = (await on_a("task.create", inbox="private-bot", kind="chore", title="t"))["task"]
    got = (await on_a("task.pull", inbox="private-bot"))["tasks"][0]
    await on_b("task.heartbeat", task_id=t["task_id"], fence=got["fence"], lease_seconds=120)
    # A's remembered revision is behind the heartbeat's: the write reads the truth and stands.
    done = (await on_a("task.complete", task_id=t["task_id"], fence=got["fence"]))["task"]
    assert (done["status"], done["version"]) == ("done", 3)
    again = await on_a.refused(409, "TASK_TERMINAL", "task.complete", task_id=t["task_id"], fence=got["fence"])
    assert again["detail"]["task_id"] == t["task_id"]

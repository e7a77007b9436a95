"""The projector runs on one replica at a time (consumers/leased.py), so a task's events reach
LOOM_TASK_EVENTS in revision order even while two replicas serve its writes."""

from __future__ import annotations

import uuid

from loom_runner.embedded import Instance
from loom_tasks.consumers.leased import Leased

from tests.tasks.conftest import Org, eventually, register


class Recorder:
    def __init__(self) -> None:
        self.running = False

    async def start(self) -> None:
        self.running = True

    async def stop(self) -> None:
        self.running = False


async def test_one_replica_runs_a_leased_consumer_and_another_takes_over_when_it_stops(tasks_a: Instance) -> None:
    key = f"test.leased.{uuid.uuid4().hex[:8]}"
    first, second = Recorder(), Recorder()
    a, b = Leased(first, tasks_a.runtime.leases, key, ttl=1.0), Leased(second, tasks_a.runtime.leases, key, ttl=1.0)
    await a.start()
    await b.start()
    try:
        assert (first.running, second.running) == (True, False)
        await a.stop()  # releases the lease: the stand-by takes over at its next round
        assert not first.running

        async def taken_over() -> bool:
            return second.running

        await eventually(taken_over)
    finally:
        await a.stop()
        await b.stop()


async def test_each_tasks_events_keep_their_order_across_two_replicas(org: Org, tasks_b: Instance) -> None:
    admin = await org.admin()
    await register(admin, posters=["sa:public-bot"])
    poster = await org.outsider()
    owners = [await org.owner(), await org.owner(via=tasks_b)]
    ids = [(await poster("task.create", inbox="private-bot", kind="chore", title=f"t{i}"))["task"]["task_id"] for i in range(20)]
    for i, task_id in enumerate(ids):  # each task's moves alternate between the two replicas
        await owners[i % 2]("task.accept", task_id=task_id)
        got = (await owners[(i + 1) % 2]("task.claim", task_id=task_id))["task"]
        await owners[i % 2]("task.complete", task_id=task_id, fence=got["fence"], outcome={})
    events = (await poster("task.updates", since_seq=0))["events"]
    for task_id in ids:
        assert [e["kind"] for e in events if e["task_id"] == task_id] == ["created", "accepted", "claimed", "done"]

"""The lease sweep: expired leases, max_attempts, resume_at, triage escalation, the cluster
lease (never two sweepers at once), and the reconcile of lease rows out of step."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from loom_runner.embedded import Instance
from loom_tasks import keys as K
from loom_tasks.consumers import sweep as sweep_mod
from loom_tasks.consumers.sweep import Sweeper
from loom_tasks.plane import TasksPlane

from tests.tasks.conftest import Api, Org, eventually, register


def plane(inst: Instance) -> TasksPlane:
    p = next(p for p in inst.planes if p.name == "tasks")
    assert isinstance(p, TasksPlane)
    return p


async def status(api: Api, task_id: str) -> dict[str, Any]:
    return dict((await api("task.get", task_id=task_id))["task"])


async def test_a_worker_killed_mid_lease_loses_the_task_then_it_blocks_after_max_attempts(org: Org) -> None:
    admin = await org.admin()
    await register(admin, max_attempts=2)
    owner = await org.owner()
    t = (await owner("task.create", inbox="private-bot", kind="chore", title="t"))["task"]
    first = (await owner("task.pull", inbox="private-bot", lease_seconds=1))["tasks"][0]
    # The worker dies: no heartbeat, no finish. After its lease the task is todo again.

    async def back_to_todo() -> bool:
        return (await status(owner, t["task_id"]))["status"] == "todo"

    await eventually(back_to_todo, within=10)
    s = await status(owner, t["task_id"])
    assert s["attempts"] == 1 and "lease expired" in s["reason"]
    await owner.refused(409, "TASK_FENCE_STALE", "task.complete", task_id=t["task_id"], fence=first["fence"])
    second = (await owner("task.pull", inbox="private-bot", lease_seconds=1))["tasks"][0]
    assert second["fence"] > first["fence"]

    async def blocked() -> bool:
        return (await status(owner, t["task_id"]))["status"] == "blocked"

    await eventually(blocked, within=10)
    s = await status(owner, t["task_id"])
    assert (s["blocked_on"], s["attempts"]) == ("human", 2)
    kinds = [e["kind"] for e in (await owner("task.history", task_id=t["task_id"]))["events"]]
    assert kinds == ["created", "claimed", "released", "claimed", "blocked"]


async def test_an_expired_lease_wakes_a_waiting_pull(org: Org, tasks_b: Instance) -> None:
    admin = await org.admin()
    await register(admin)
    owner = await org.owner()
    other = await org.owner(via=tasks_b)
    t = (await owner("task.create", inbox="private-bot", kind="chore", title="t"))["task"]
    await owner("task.pull", inbox="private-bot", lease_seconds=1)
    got = (await other("task.pull", inbox="private-bot", wait_seconds=15))["tasks"]
    assert [g["task_id"] for g in got] == [t["task_id"]]


async def test_a_late_write_from_the_expired_holder_is_stale_once_the_sweep_moved_the_task(org: Org) -> None:
    admin = await org.admin()
    await register(admin)
    owner = await org.owner()
    t = (await owner("task.create", inbox="private-bot", kind="chore", title="t"))["task"]
    got = (await owner("task.pull", inbox="private-bot", lease_seconds=1))["tasks"][0]

    async def released() -> bool:
        return (await status(owner, t["task_id"]))["status"] == "todo"

    await eventually(released, within=10)
    for op, args in [("task.heartbeat", {}), ("task.complete", {}), ("task.fail", {"reason": "late"})]:
        await owner.refused(409, "TASK_FENCE_STALE", op, task_id=t["task_id"], fence=got["fence"], **args)


async def test_unanswered_triage_escalates_once(org: Org) -> None:
    admin = await org.admin()
    await register(admin, posters=["sa:public-bot"], triage_escalate_after_seconds=1)
    owner, public = await org.owner(), await org.outsider()
    t = (await public("task.create", inbox="private-bot", kind="chore", title="t"))["task"]

    async def escalated() -> bool:
        return bool((await status(owner, t["task_id"]))["escalated_time"])

    await eventually(escalated, within=10)
    await asyncio.sleep(0.8)  # several more sweeps
    events = [e["kind"] for e in (await owner("task.history", task_id=t["task_id"]))["events"]]
    assert events.count("escalated") == 1
    assert (await status(owner, t["task_id"]))["status"] == "triage"


class RecordingSweeper(Sweeper):
    """A real sweeper on its own cluster-lease key whose passes only record when they ran."""

    def __init__(self, inst: Instance, key: str, log: list[tuple[str, float, float]]) -> None:
        p = plane(inst)
        super().__init__(p.engine, p.tasks, p.keys, p.directory, inst.runtime.leases, interval=0.05, reconcile_interval=3600, grace=60)
        self.lease_key = key
        self.log = log

    async def sweep_once(self, now: float | None = None) -> sweep_mod.SweepReport:
        started = time.monotonic()
        await asyncio.sleep(0.02)
        self.log.append((self.holder, started, time.monotonic()))
        return sweep_mod.SweepReport()

    async def reconcile_once(self, grace: float | None = None) -> sweep_mod.ReconcileReport:
        return sweep_mod.ReconcileReport()


async def test_two_replicas_never_sweep_at_once_and_one_takes_over(tasks_a: Instance, tasks_b: Instance) -> None:
    key = f"tasks.sweep.test-{uuid.uuid4().hex[:8]}"
    log: list[tuple[str, float, float]] = []
    a, b = RecordingSweeper(tasks_a, key, log), RecordingSweeper(tasks_b, key, log)
    await a.start()
    await b.start()
    try:
        await asyncio.sleep(1.0)
        holders = {h for h, _, _ in log}
        assert len(holders) == 1 and len(log) >= 5
        first = holders.pop()
        spans = sorted((s, e) for _, s, e in log)
        assert all(spans[i][1] <= spans[i + 1][0] for i in range(len(spans) - 1))
        # The holder goes away: the other replica takes the lease over.
        gone, stays = (a, b) if a.holder == first else (b, a)
        await gone.stop()
        cut = time.monotonic()
        await eventually(lambda: _ran_after(log, stays.holder, cut), within=10)
    finally:
        await a.stop()
        await b.stop()
    assert {h for h, s, _ in log if s > cut} == {stays.holder}


async def _ran_after(log: list[tuple[str, float, float]], holder: str, t: float) -> bool:
    return any(h == holder and s > t for h, s, _ in log)


# --- reconcile ---------------------------------------------------------------------------------


async def test_reconcile_writes_a_missing_lease_row_so_the_task_becomes_claimable(org: Org, tasks_a: Instance) -> None:
    admin = await org.admin()
    await register(admin)
    owner = await org.owner()
    t = (await owner("task.create", inbox="private-bot", kind="chore", title="t"))["task"]
    keys = plane(tasks_a).keys
    st = await keys.get(org.name, t["task_id"])
    assert st is not None
    await keys.delete(org.name, t["task_id"], last=st.revision)  # a create cut off before its lease row
    assert (await owner("task.pull", inbox="private-bot"))["tasks"] == []
    report = await plane(tasks_a).sweeper.reconcile_once(grace=0)
    assert report.created >= 1
    assert (await owner("task.pull", inbox="private-bot", wait_seconds=5))["tasks"][0]["task_id"] == t["task_id"]


async def test_reconcile_puts_back_a_lease_row_ahead_of_its_task(org: Org, tasks_a: Instance) -> None:
    admin = await org.admin()
    await register(admin)
    owner = await org.owner()
    t = (await owner("task.create", inbox="private-bot", kind="chore", title="t"))["task"]
    keys = plane(tasks_a).keys
    st = await keys.get(org.name, t["task_id"])
    assert st is not None
    # A claim cut off after winning its lease row: held, a version ahead, already expired.
    await keys.update(org.name, t["task_id"], K.held(st.v + 1, "sa:ghost", "ghost", time.time() - 1, 1), last=st.revision)
    assert (await owner("task.pull", inbox="private-bot"))["tasks"] == []
    report = await plane(tasks_a).sweeper.reconcile_once(grace=0)
    assert report.restamped >= 1
    got = (await owner("task.pull", inbox="private-bot", wait_seconds=5))["tasks"]
    assert [g["task_id"] for g in got] == [t["task_id"]]
    assert got[0]["version"] > st.v + 1  # versions only grow


async def test_reconcile_removes_a_finished_tasks_lease_row(org: Org, tasks_a: Instance) -> None:
    admin = await org.admin()
    await register(admin)
    owner = await org.owner()
    t = (await owner("task.create", inbox="private-bot", kind="chore", title="t"))["task"]
    got = (await owner("task.pull", inbox="private-bot"))["tasks"][0]
    await owner("task.complete", task_id=t["task_id"], fence=got["fence"])
    keys = plane(tasks_a).keys
    assert (await keys.get(org.name, t["task_id"])) is not None
    await plane(tasks_a).sweeper.reconcile_once(grace=0)
    assert (await keys.get(org.name, t["task_id"])) is None
    # The task is still finished, and still answers as such.
    await owner.refused(409, "TASK_TERMINAL", "task.complete", task_id=t["task_id"], fence=got["fence"])
    assert (await status(owner, t["task_id"]))["status"] == "done"

"""The queue-depth gauge on /metrics: unfinished tasks per inbox and state, with a bounded label
set (the deepest inboxes labelled, the rest summed under "(other)")."""

from __future__ import annotations

import httpx
from loom_runner.embedded import Instance
from loom_tasks.depth import NAME, OTHER, QueueDepth, bounded
from loom_tasks.store import TaskStore
from prometheus_client.parser import text_string_to_metric_families

from tests.tasks.conftest import Org, eventually, register


def test_only_the_deepest_inboxes_are_labelled_and_the_rest_summed() -> None:
    counts = {
        ("o", "big", "todo"): 5,
        ("o", "big", "blocked"): 1,
        ("o", "mid", "todo"): 3,
        ("o", "small", "todo"): 1,
        ("o", "small", "triage"): 2,
        ("p", "tiny", "triage"): 1,
    }
    assert bounded(counts, 2) == {
        ("o", "big", "todo"): 5,
        ("o", "big", "blocked"): 1,
        ("o", "mid", "todo"): 3,  # mid (3) ties small (3): org and name decide
        (OTHER, OTHER, "todo"): 1,
        (OTHER, OTHER, "triage"): 3,
    }
    assert bounded(counts, 0) == {(OTHER, OTHER, "todo"): 9, (OTHER, OTHER, "blocked"): 1, (OTHER, OTHER, "triage"): 3}
    assert sum(bounded(counts, 1).values()) == sum(counts.values())


async def scrape(inst: Instance) -> dict[tuple[str, str, str], float]:
    async with httpx.AsyncClient(base_url=inst.base_url) as c:
        r = await c.get("/metrics")
    assert r.status_code == 200
    out: dict[tuple[str, str, str], float] = {}
    for family in text_string_to_metric_families(r.text):
        if family.name == NAME:
            for s in family.samples:
                out[(s.labels["org"], s.labels["inbox"], s.labels["state"])] = s.value
    return out


async def test_metrics_serve_the_depth_of_each_inbox_and_state(org: Org, tasks_a: Instance) -> None:
    admin = await org.admin()
    await register(admin, inbox="work", posters=["sa:public-bot"])
    await register(admin, inbox="quiet")
    owner = await org.owner()
    public = await org.outsider()
    for i in range(3):
        await owner("task.create", inbox="work", kind="chore", title=f"todo {i}")
    held = (await owner("task.pull", inbox="work"))["tasks"][0]
    await public("task.create", inbox="work", kind="chore", title="review me")
    done = (await owner("task.create", inbox="quiet", kind="chore", title="finished"))["task"]
    got = (await owner("task.claim", task_id=done["task_id"]))["task"]
    await owner("task.complete", task_id=done["task_id"], fence=got["fence"])
    assert held["status"] == "in_progress"
    depth = QueueDepth(TaskStore(tasks_a.runtime.store), lambda: True, interval=0, max_inboxes=1_000_000)
    want = {(org.name, "work", "todo"): 2.0, (org.name, "work", "in_progress"): 1.0, (org.name, "work", "triage"): 1.0}

    async def served() -> bool:
        # Counted from the projection (it follows the writes) and served by /metrics; finished
        # tasks are no queue, so the quiet inbox has no series.
        await depth.refresh()
        mine = {k: v for k, v in (await scrape(tasks_a)).items() if k[0] == org.name}
        return mine == want

    await eventually(served, within=15)
    await depth.stop()


async def test_the_label_set_stays_bounded_however_many_inboxes(org: Org, tasks_a: Instance) -> None:
    admin = await org.admin()
    owner = await org.owner()
    for i in range(4):
        await register(admin, inbox=f"box-{i}")
        await owner("task.create", inbox=f"box-{i}", kind="chore", title="t")
    depth = QueueDepth(TaskStore(tasks_a.runtime.store), lambda: True, interval=0, max_inboxes=2)

    async def bounded_on_metrics() -> bool:
        await depth.refresh()
        series = await scrape(tasks_a)
        inboxes = {(o, i) for o, i, _ in series}
        return bool(series) and len(inboxes - {(OTHER, OTHER)}) <= 2 and (OTHER, OTHER) in inboxes

    await eventually(bounded_on_metrics, within=15)
    await depth.stop()

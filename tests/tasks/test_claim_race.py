"""Pulls on two replicas take the same candidates (every replica's queue holds every row) and
race to claim them as one atomic batch each. The loser's batch is refused whole; it then reads
all its candidates in one request and claims those still open as one batch again: each task is
claimed once, and no claim is tried on a task the winner holds."""

from __future__ import annotations

import asyncio
import time

import pytest
from loom_runner.embedded import Instance
from loom_tasks.domain.model import Actor
from loom_tasks.service import wake
from loom_tasks.service.engine import Committed

from tests.tasks.conftest import Org, eventually, register, tasks_plane


async def test_a_refused_claim_batch_claims_what_is_still_open_as_one_batch(org: Org, tasks_b: Instance) -> None:
    await register(await org.admin())
    on_a, on_b = await org.owner(), await org.owner(via=tasks_b)
    created = (await on_a("task.create_many", tasks=[{"inbox": "private-bot", "kind": "chore", "title": f"t{i}"} for i in range(5)]))[
        "results"
    ]
    ids = [r["task"]["task_id"] for r in created]
    engine = tasks_plane(org.inst).engine
    # Replica A's candidates, as its queue held them: each todo, at its create's revision.
    read = await engine.truth.read_many([(org.name, task_id) for task_id in ids])
    candidates = [row for task_id in ids if (row := read[(org.name, task_id)].row) is not None]
    assert [(row.status, bool(row.rev)) for row in candidates] == [("todo", True)] * 5
    # Replica B's pull wins two of them first.
    for task_id in ids[1:3]:
        await on_b("task.claim", task_id=task_id)
    refused, written = engine.batches_refused, engine.batches_written
    results = await engine.claim_many(candidates, Actor("sa:private-bot", "private-bot", owner=True), 60, time.time())
    won = [got.row.task_id if isinstance(got, Committed) else got for got in results]
    assert won == [ids[0], None, None, ids[3], ids[4]]
    # One batch refused, then one batch of the three still open: no claim each.
    assert (engine.batches_refused - refused, engine.batches_written - written) == (1, 1)
    for task_id in ids:
        task = (await on_a("task.get", task_id=task_id))["task"]
        assert task["status"] == "in_progress"


async def test_a_batch_created_where_a_pull_waits_is_left_to_that_pull(
    org: Org, tasks_b: Instance, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pulls wait on both replicas; a batch created on A is announced to B as A's pulls' to
    claim, so B's pull does not race for it (no claim batch refused) during the grace."""
    monkeypatch.setattr(wake, "REMOTE_GRACE_SECONDS", 60.0)  # a slow machine's claim still lands inside it
    await register(await org.admin())
    on_a, on_b = await org.owner(), await org.owner(via=tasks_b)
    hub_a, hub_b = tasks_plane(org.inst).hub, tasks_plane(tasks_b).hub
    # No store query while the batch is made: a query that reads the batch's rows from the
    # projection before the wake-up reaches B hands B rows it does not know are promised (the
    # safety net's race: one claim batch refused, each task still claimed once; CI saw it once
    # under load). The pulls' first queries are awaited below; the polls come after the test.
    for plane in (tasks_plane(org.inst), tasks_plane(tasks_b)):
        monkeypatch.setattr(plane.deps, "settings", plane.deps.settings.model_copy(update={"task_pull_poll_seconds": 60.0}))
        monkeypatch.setattr(plane.hub, "poll_seconds", 60.0)
    engines = [tasks_plane(org.inst).engine, tasks_plane(tasks_b).engine]
    refused = [e.batches_refused for e in engines]
    pulls = [asyncio.create_task(api("task.pull", inbox="private-bot", max_tasks=10, wait_seconds=2)) for api in (on_a, on_b)]

    async def both_waiting() -> bool:
        return all((q := hub.queues.get((org.name, "private-bot"))) is not None and q.wanted and q.loaded_at for hub in (hub_a, hub_b))

    await eventually(both_waiting)
    created = (await on_a("task.create_many", tasks=[{"inbox": "private-bot", "kind": "chore", "title": f"t{i}"} for i in range(5)]))[
        "results"
    ]
    got_a, got_b = [[t["task_id"] for t in (await p)["tasks"]] for p in pulls]
    assert sorted(got_a) == sorted(r["task"]["task_id"] for r in created)
    assert got_b == []
    assert [e.batches_refused for e in engines] == refused

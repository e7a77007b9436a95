"""Real concurrency on two replicas: many workers pulling one inbox (each task completed exactly
once, never two owners of one fence), racing idempotent creates, and a cursor reader following
events two replicas write."""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from typing import Any

import pytest
from loom_runner.embedded import Instance

from tests.tasks.conftest import Api, Org, register

TASKS = 500
WORKERS = 20


@pytest.mark.slow  # 500 lifecycles by twenty workers: the suite's largest in-process load
async def test_twenty_workers_on_two_replicas_complete_each_of_500_tasks_exactly_once(
    org: Org, tasks_a: Instance, tasks_b: Instance
) -> None:
    admin = await org.admin()
    await register(admin, default_lease_seconds=300)
    posters = [await org.owner(via=tasks_a), await org.owner(via=tasks_b)]
    workers = [await org.owner(via=(tasks_a, tasks_b)[i % 2], agent=f"worker-{i}") for i in range(WORKERS)]

    created: list[str] = []

    async def post(i: int) -> None:
        out = await posters[i % 2]("task.create", inbox="private-bot", kind="chore", title=f"t{i}", priority=random.randint(1, 5))
        created.append(out["task"]["task_id"])

    claims: list[tuple[str, int, int]] = []  # (task_id, fence, worker)
    completions: list[tuple[str, int]] = []
    refusals: list[str] = []
    all_posted = asyncio.Event()

    async def work(i: int, api: Api) -> None:
        while True:
            got = (await api("task.pull", inbox="private-bot", wait_seconds=1))["tasks"]
            if not got:
                if all_posted.is_set() and len(completions) >= TASKS:
                    return
                if all_posted.is_set() and len(claims) >= TASKS:
                    return
                continue
            for t in got:
                claims.append((t["task_id"], t["fence"], i))
                r = await api.raw("task.complete", task_id=t["task_id"], fence=t["fence"], outcome={"worker": i})
                if r.status_code == 200:
                    completions.append((t["task_id"], i))
                else:
                    refusals.append(r.text)

    async def post_all() -> None:
        # Posted while the workers pull, in waves, half through each replica.
        for start in range(0, TASKS, 50):
            await asyncio.gather(*(post(i) for i in range(start, start + 50)))
        all_posted.set()

    started = time.monotonic()
    await asyncio.wait_for(asyncio.gather(post_all(), *(work(i, w) for i, w in enumerate(workers))), timeout=240)
    elapsed = time.monotonic() - started

    assert len(created) == TASKS and len(set(created)) == TASKS
    assert refusals == []
    per_task = Counter(t for t, _ in completions)
    assert set(per_task) == set(created) and set(per_task.values()) == {1}, "a task completed twice or never"
    fences = Counter(f for _, f, _ in claims)
    assert set(fences.values()) == {1}, "two claims shared a fence"
    assert len(claims) == TASKS, "a task was claimed twice"
    assert len({w for _, _, w in claims}) > 1
    counts = (await admin("task.counts", inbox="private-bot"))["counts"]
    assert counts == {"done": TASKS}
    print(f"\n{TASKS} tasks, {WORKERS} workers on 2 replicas: {elapsed:.1f} s, {TASKS / elapsed:.0f} lifecycles/s over REST")


async def test_fifty_concurrent_creates_with_one_key_store_one_task(org: Org, tasks_b: Instance) -> None:
    admin = await org.admin()
    await register(admin)
    owners = [await org.owner(), await org.owner(via=tasks_b)]
    results = await asyncio.gather(
        *(owners[i % 2]("task.create", inbox="private-bot", kind="chore", title="race", idempotency_key="one-key") for i in range(50))
    )
    assert len({r["task"]["task_id"] for r in results}) == 1
    assert sum(1 for r in results if r["created"]) == 1
    assert len((await owners[0]("task.list", inbox="private-bot"))["tasks"]) == 1
    history = (await owners[0]("task.history", task_id=results[0]["task"]["task_id"]))["events"]
    assert [e["kind"] for e in history] == ["created"]


@pytest.mark.slow  # 60 concurrent lifecycles on two replicas, read back page by page
async def test_a_cursor_reader_sees_every_event_of_two_writing_replicas_once(org: Org, tasks_a: Instance, tasks_b: Instance) -> None:
    admin = await org.admin()
    await register(admin, posters=["sa:public-bot"])
    await admin("inbox.policy_set", inbox="private-bot", poster="sa:public-bot", mode="auto")
    senders = [await org.outsider(via=tasks_a), await org.outsider(via=tasks_b)]
    owners = [await org.owner(via=tasks_a), await org.owner(via=tasks_b)]
    readers = [await org.outsider(via=tasks_a), await org.outsider(via=tasks_b)]
    n = 60
    writing = True
    seen: list[dict[str, Any]] = []
    cursor = 0

    async def read() -> None:
        nonlocal cursor
        i = 0
        while True:
            upd = await readers[i % 2]("task.updates", since_seq=cursor, wait_seconds=1, limit=7)
            i += 1
            seen.extend(upd["events"])
            if upd["events"]:
                assert upd["next_seq"] >= upd["events"][-1]["seq"]
                cursor = upd["next_seq"]
            elif not writing:
                return

    async def one(i: int) -> None:
        t = (await senders[i % 2]("task.create", inbox="private-bot", kind="chore", title=f"e{i}"))["task"]
        got = (await owners[(i + 1) % 2]("task.claim", task_id=t["task_id"]))["task"]
        if i % 3 == 0:
            await owners[i % 2]("task.fail", task_id=t["task_id"], fence=got["fence"], reason="no")
        else:
            await owners[i % 2]("task.complete", task_id=t["task_id"], fence=got["fence"])

    reader = asyncio.create_task(read())
    await asyncio.gather(*(one(i) for i in range(n)))
    writing = False
    await asyncio.wait_for(reader, 30)

    ids = [e["event_id"] for e in seen]
    assert len(ids) == len(set(ids)), "an event was delivered twice"
    seqs = [e["seq"] for e in seen]
    assert seqs == sorted(seqs)
    assert len(seen) == 3 * n  # created, claimed, done|failed for each task
    # A replay from the start reads exactly the same events.
    replay: list[dict[str, Any]] = []
    since = 0
    while True:
        upd = await readers[0]("task.updates", since_seq=since, limit=1000)
        if not upd["events"]:
            break
        replay.extend(upd["events"])
        since = upd["next_seq"]
    assert [e["event_id"] for e in replay] == ids

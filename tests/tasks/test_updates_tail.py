"""task.updates and task.watch share one reader of new events per replica (consumers/tail.py):
many waiting calls, one consumer on the server, each call handed only its own events; a call
cancelled mid-wait leaves nothing behind, and an idle tail closes its consumer."""

from __future__ import annotations

import asyncio

from loom_core.bus.task_subjects import org_filter
from loom_runner.embedded import Instance
from loom_tasks.consumers.tail import EventTail
from loom_tasks.events import STREAM
from loom_tasks.service.watching import read_events

from tests.tasks.conftest import Org, eventually, register, tasks_plane

CALLERS = 12


async def _projected() -> bool:
    return True  # these reads follow no write of their own


async def _consumers(inst: Instance) -> set[str]:
    return {c.name for c in await inst.runtime.bus.js.consumers_info(STREAM)}


async def test_many_waiting_updates_share_one_consumer_and_each_gets_its_own_events(org: Org, tasks_a: Instance) -> None:
    admin = await org.admin()
    names = [f"poster-{i}" for i in range(CALLERS)]
    await register(admin, posters=[f"sa:{n}" for n in names])
    posters = [await org.outsider(name=n) for n in names]
    cursors = [(await p("task.updates"))["next_seq"] for p in posters]
    tail = tasks_plane(tasks_a).deps.tail
    before = await _consumers(tasks_a)
    waiting = [asyncio.create_task(p("task.updates", since_seq=c, wait_seconds=30)) for p, c in zip(posters, cursors, strict=True)]

    async def all_waiting() -> bool:
        return sum(w.pattern == org_filter(org.name).split(".") for w in tail.waiters) >= CALLERS

    await eventually(all_waiting, within=30)
    after = await _consumers(tasks_a)
    assert tail.name in after
    assert after - before <= {tail.name}  # one consumer for every waiting call, not one each
    created = [(await p("task.create", inbox="private-bot", kind="chore", title=n))["task"] for p, n in zip(posters, names, strict=True)]
    answers = await asyncio.wait_for(asyncio.gather(*waiting), timeout=30)
    for answer, task, cursor in zip(answers, created, cursors, strict=True):
        # each caller gets its own task's event (and nobody else's), past its cursor
        assert [(e["kind"], e["task_id"]) for e in answer["events"]] == [("created", task["task_id"])]
        assert answer["events"][0]["seq"] > cursor and answer["next_seq"] >= answer["events"][0]["seq"]
    assert await _consumers(tasks_a) - before <= {tail.name}


async def test_a_cancelled_wait_leaves_nothing_behind_and_an_idle_tail_closes(org: Org, tasks_a: Instance) -> None:
    bus = tasks_a.runtime.bus
    tail = EventTail(bus, idle_seconds=0.4)
    before = await _consumers(tasks_a)
    call = asyncio.create_task(read_events(bus.js, tail, _projected, org_filter(org.name), 1 << 40, 30, 10, lambda e: True))

    async def waiting() -> bool:
        return bool(tail.waiters) and bool(tail.name)  # registered, and the tail's consumer made

    await eventually(waiting)
    assert await _consumers(tasks_a) - before == {tail.name}
    call.cancel()
    await asyncio.gather(call, return_exceptions=True)
    assert not tail.waiters

    async def closed() -> bool:
        return tail.name not in await _consumers(tasks_a)

    await eventually(closed, within=10)  # no call waited for its idle time: the consumer is gone
    # the next wait opens it again, and it still hands events over
    owner = await org.owner()
    await register(await org.admin())
    seq = (await owner("task.updates"))["next_seq"]
    again = asyncio.create_task(read_events(bus.js, tail, _projected, org_filter(org.name), seq, 30, 10, lambda e: True))
    await eventually(waiting)
    t = (await owner("task.create", inbox="private-bot", kind="chore", title="after reopening"))["task"]
    events, _ = await asyncio.wait_for(again, 30)
    assert [(e["kind"], e["task_id"]) for e in events][:1] == [("created", t["task_id"])]
    await tail.stop()
    assert tail.name not in await _consumers(tasks_a)


async def test_a_tail_whose_consumer_is_lost_opens_a_new_one_while_calls_wait(org: Org, tasks_a: Instance) -> None:
    bus = tasks_a.runtime.bus
    tail = EventTail(bus, idle_seconds=0.8)
    owner = await org.owner()
    await register(await org.admin())
    seq = (await owner("task.updates"))["next_seq"]
    call = asyncio.create_task(read_events(bus.js, tail, _projected, org_filter(org.name), seq, 30, 10, lambda e: True))

    async def waiting() -> bool:
        return bool(tail.waiters) and bool(tail.name)  # registered, and the tail's consumer made

    await eventually(waiting)
    lost = tail.name
    await bus.js.delete_consumer(STREAM, lost)  # what a NATS node that lost it leaves

    async def reopened() -> bool:
        return tail.name != lost and tail.name in await _consumers(tasks_a)

    await eventually(reopened, within=10)
    t = (await owner("task.create", inbox="private-bot", kind="chore", title="after the loss"))["task"]
    events, _ = await asyncio.wait_for(call, 30)
    assert [(e["kind"], e["task_id"]) for e in events][:1] == [("created", t["task_id"])]
    await tail.stop()

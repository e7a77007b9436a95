"""Each replica's core NATS readers (consumers/pushes.py: the wake-ups from nats-py's callback, the
change notices on the runtime's FastStream broker): pull wake-ups and the directory's change
notices reach the other replicas."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from loom_core import fastjson
from loom_runner.embedded import Instance
from loom_tasks.consumers.layout import CONFIG, WAKE
from loom_tasks.domain.model import TaskRow
from loom_tasks.service.wake import WakeHub

from tests.tasks.conftest import Org, eventually, register, tasks_plane


async def test_a_policy_change_on_one_replica_applies_on_another_that_caches_for_an_hour(
    org: Org, tasks_b: Instance, make_instance: Callable[..., Awaitable[Instance]]
) -> None:
    # The slow replica keeps inboxes and policies for an hour: only the change notice can drop them.
    slow = await make_instance(task_config_cache_ttl_seconds=3600.0, task_lease_sweep_enabled=False, task_webhook_deliver_enabled=False)
    admin = await org.admin(via=tasks_b)
    await register(admin, posters=["sa:public-bot"])
    public = await org.outsider(via=slow)
    assert (await public("task.create", inbox="private-bot", kind="chore", title="t"))["task"]["status"] == "triage"
    await admin("inbox.policy_set", inbox="private-bot", poster="sa:public-bot", mode="auto")

    async def applied() -> bool:
        return (await public("task.create", inbox="private-bot", kind="chore", title="t"))["task"]["status"] == "todo"

    await eventually(applied, within=10)


async def test_each_replica_reads_wake_ups_and_change_notices_on_the_broker(tasks_a: Instance) -> None:
    running = tasks_plane(tasks_a).pushes._running
    assert sorted(c.consumer.name for c in running) == sorted([CONFIG.name, WAKE.name])
    assert CONFIG.stream is None and WAKE.stream is None and CONFIG.ack is None and WAKE.ack is None


async def _nothing(org: str, inbox: str, kinds: Sequence[str], limit: int) -> list[TaskRow]:
    return []


async def test_a_wake_up_from_another_replica_drops_a_claimed_task_but_the_hubs_own_is_skipped() -> None:
    hub, other = WakeHub(None, _nothing, 1.0), WakeHub(None, _nothing, 1.0)
    q = hub.queue("acme", "bot")
    for tid in ("t1", "t2"):
        q.offer(TaskRow(org="acme", task_id=tid, inbox="bot", namespace="ns", kind="chore", version=1))
    gone = [{"op": "gone", "task_id": "t1", "version": 5}]
    hub.apply("loom.task_wake.acme.bot", fastjson.dumps({"src": hub._mark, "ops": gone}))
    assert "t1" in q.rows  # its own: applied when sent, skipped unread
    hub.apply("loom.task_wake.acme.other", fastjson.dumps({"src": other._mark, "ops": gone}))
    assert "t1" in q.rows  # another inbox's
    hub.apply("loom.task_wake.acme.bot", b"not json")
    hub.apply("loom.task_wake.acme.bot", fastjson.dumps({"src": other._mark, "ops": gone}))
    assert set(q.rows) == {"t2"}


async def test_a_wake_up_sent_alone_lets_a_pull_woken_here_claim_before_the_write_answers_but_a_batchs_do_not(
    tasks_a: Instance,
) -> None:
    # The write's caller goes on (builds its answer) only after one turn of the loop, in which
    # the pull woken here runs and nats-py's flusher sends the wake-up; a batch's wake-ups wait
    # for the batch, so its writes take no turn each.
    bus = tasks_a.runtime.bus
    hub = WakeHub(bus, _nothing, 60.0)
    q = hub.queue("acme", "bot")
    sub = await bus.nc.subscribe("loom.task_wake.acme.bot")
    order: list[str] = []

    async def pull() -> None:
        await q.wait(10)
        order.append("pull woken")

    def row(task_id: str) -> TaskRow:
        return TaskRow(org="acme", task_id=task_id, inbox="bot", namespace="ns", kind="chore", version=1)

    woken = asyncio.create_task(pull())
    await asyncio.sleep(0)
    await hub.ready(row("t1"), 7)
    order.append("write answers")
    assert order == ["pull woken", "write answers"]
    sent = fastjson.loads((await sub.next_msg(timeout=10)).data)["ops"]
    assert [(op["op"], op["row"]["task_id"], op["rev"]) for op in sent] == [("ready", "t1", 7)]

    order.clear()
    woken = asyncio.create_task(pull())
    await asyncio.sleep(0)
    async with hub.together():
        await hub.ready(row("t2"), 8)
        await hub.ready(row("t3"), 9)
        order.append("batch written")
    await woken
    assert order == ["batch written", "pull woken"]
    sent = fastjson.loads((await sub.next_msg(timeout=10)).data)["ops"]
    assert [op["row"]["task_id"] for op in sent] == ["t2", "t3"]
    await sub.unsubscribe()

"""NATS task events arrive in transition order per task: a subscriber (nats-py, core NATS, as an
agent subscribes) over many lifecycles run at once never reads a task's `progress` before its
`claimed`, nor any event before the one the transition before it made."""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict

import nats
from loom_core.bus import NatsServer
from loom_runner.embedded import Instance

from tests.tasks.conftest import Org, eventually, register

LIFECYCLES = 60
ORDER = ["created", "claimed", "progress", "progress", "done"]


async def test_events_reach_a_subscriber_in_transition_order_over_concurrent_lifecycles(
    org: Org, nats_server: NatsServer, tasks_b: Instance
) -> None:
    admin = await org.admin()
    await register(admin)
    # Two replicas work the inbox: half the calls land on each.
    owners = [await org.owner(), await org.owner(via=tasks_b)]
    seen: dict[str, list[str]] = defaultdict(list)
    nc = await nats.connect(nats_server.url)
    try:

        async def got(msg: nats.aio.msg.Msg) -> None:
            e = json.loads(msg.data)
            seen[e["task_id"]].append(e["kind"])

        sub = await nc.subscribe(f"loom.tasks.{org.name}.{org.private}.>", cb=got)
        await nc.flush()

        async def lifecycle(i: int) -> str:
            owner = owners[i % 2]
            # A note waits (bounded) for the task's earlier events; on a busy machine it may be
            # refused 503 `projection_behind`, retryable: retried as the SDKs do.
            t = (await owner.retrying("task.create", inbox="private-bot", kind="chore", title=f"t{i}"))["task"]
            held = (await owner.retrying("task.claim", task_id=t["task_id"]))["task"]
            # Straight after the claim, from the other replica too: the note must still follow it.
            await owners[(i + 1) % 2].retrying("task.progress", task_id=t["task_id"], fence=held["fence"], note="started")
            await owner.retrying("task.progress", task_id=t["task_id"], fence=held["fence"], note="half", percent=50)
            await owner.retrying("task.complete", task_id=t["task_id"], fence=held["fence"], outcome={"i": i})
            return str(t["task_id"])

        ids = await asyncio.gather(*(lifecycle(i) for i in range(LIFECYCLES)))

        async def all_seen() -> bool:
            return all(len(seen[i]) >= len(ORDER) for i in ids)

        await eventually(all_seen, within=30)
        await sub.unsubscribe()
    finally:
        await nc.close()
    out_of_order = {i: seen[i] for i in ids if seen[i] != ORDER}
    assert not out_of_order, out_of_order

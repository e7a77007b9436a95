"""Working over REST: pulls (order, not_before, kinds, triage, long poll and wake-ups), claims,
fences on every owner write, heartbeats, the finishing moves."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

import pytest
from loom_core import fastjson
from loom_runner.embedded import Instance
from loom_tasks.events import wake_subject

from tests.tasks.conftest import Api, Org, eventually, register, sweep_passes


def iso(seconds_from_now: float) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds_from_now)).isoformat().replace("+00:00", "Z")


async def inbox_with_owner(org: Org, **inbox_args: object) -> tuple[Api, Api]:
    admin = await org.admin()
    await register(admin, **inbox_args)
    return admin, await org.owner()


async def claimed(owner: Api, **create: object) -> dict:
    t = (await owner("task.create", inbox="private-bot", **{"kind": "chore", "title": "t", **create}))["task"]
    got = (await owner("task.pull", inbox="private-bot"))["tasks"]
    assert [g["task_id"] for g in got] == [t["task_id"]]
    return dict(got[0])


async def test_pull_takes_priority_then_deadline_then_age(org: Org) -> None:
    _, owner = await inbox_with_owner(org)
    ids = {}
    for name, args in [
        ("old-p3", {"priority": 3}),
        ("p3-late-deadline", {"priority": 3, "deadline": iso(7200)}),
        ("p1", {"priority": 1}),
        ("p3-soon-deadline", {"priority": 3, "deadline": iso(600)}),
        ("p5", {"priority": 5}),
    ]:
        ids[(await owner("task.create", inbox="private-bot", kind="chore", title=name, **args))["task"]["task_id"]] = name
    order = []
    for _ in range(5):
        order.append(ids[(await owner("task.pull", inbox="private-bot"))["tasks"][0]["task_id"]])
    assert order == ["p1", "p3-soon-deadline", "p3-late-deadline", "old-p3", "p5"]


async def test_not_before_hides_a_todo_task_from_pull_until_then(org: Org) -> None:
    _, owner = await inbox_with_owner(org)
    not_before = iso(1.5)
    t = (await owner("task.create", inbox="private-bot", kind="chore", title="later", not_before=not_before))["task"]
    assert t["status"] == "todo"
    assert (await owner("task.pull", inbox="private-bot"))["tasks"] == []
    # The long poll wakes for the task once its time has come (well inside its 10 s wait), not before.
    got = (await owner("task.pull", inbox="private-bot", wait_seconds=10))["tasks"]
    assert [g["task_id"] for g in got] == [t["task_id"]]
    assert datetime.now(UTC) >= datetime.fromisoformat(not_before)


async def test_pull_filters_by_kind(org: Org) -> None:
    _, owner = await inbox_with_owner(org)
    await owner("task.create", inbox="private-bot", kind="chore", title="a", priority=1)
    b = (await owner("task.create", inbox="private-bot", kind="review", title="b"))["task"]
    got = (await owner("task.pull", inbox="private-bot", kinds=["review"]))["tasks"]
    assert [g["task_id"] for g in got] == [b["task_id"]]


async def test_pull_status_triage_lists_review_items_unclaimed(org: Org) -> None:
    _admin, owner = await inbox_with_owner(org, posters=["sa:public-bot"])
    public = await org.outsider()
    t = (await public("task.create", inbox="private-bot", kind="chore", title="please"))["task"]
    got = (await owner("task.pull", inbox="private-bot", status="triage"))["tasks"]
    assert [g["task_id"] for g in got] == [t["task_id"]]
    assert got[0]["status"] == "triage" and got[0]["fence"] == 0
    assert (await owner("task.get", task_id=t["task_id"]))["task"]["status"] == "triage"
    assert (await owner("task.pull", inbox="private-bot"))["tasks"] == []


async def test_pull_max_tasks_claims_several_with_distinct_fences(org: Org) -> None:
    _, owner = await inbox_with_owner(org)
    for i in range(4):
        await owner("task.create", inbox="private-bot", kind="chore", title=f"t{i}")
    got = (await owner("task.pull", inbox="private-bot", max_tasks=3))["tasks"]
    assert len(got) == 3 and len({g["fence"] for g in got}) == 3


async def test_pull_needs_writer_on_the_owner_namespace(org: Org) -> None:
    await inbox_with_owner(org)
    viewer = await org.member("user:viewer", {org.private: "viewer"})
    await viewer.refused(403, "AUTH_INSUFFICIENT", "task.pull", inbox="private-bot")
    stranger = await org.member("sa:stranger", {org.public: "writer"})
    await stranger.refused(404, "RESOURCE_NOT_FOUND", "task.pull", inbox="private-bot", namespace=org.public)


async def test_wait_seconds_over_thirty_is_refused(org: Org) -> None:
    _, owner = await inbox_with_owner(org)
    err = await owner.refused(422, "VALIDATION_FAILED", "task.pull", inbox="private-bot", wait_seconds=31)
    assert err["detail"]["field"] == "wait_seconds"


async def test_long_poll_pull_times_out_empty(org: Org) -> None:
    _, owner = await inbox_with_owner(org)
    started = time.monotonic()
    assert (await owner("task.pull", inbox="private-bot", wait_seconds=1))["tasks"] == []
    assert time.monotonic() - started >= 0.9


@pytest.mark.parametrize("where", ["same replica", "other replica"])
async def test_a_create_wakes_a_waiting_pull(
    org: Org, tasks_b: Instance, make_instance: Callable[..., Awaitable[Instance]], where: str
) -> None:
    # A replica that re-reads the store only every 60 s: only a wake-up can hand it the task
    # before the pull's 30 s wait is over.
    slow = await make_instance(task_pull_poll_seconds=60.0, task_lease_sweep_enabled=False, task_webhook_deliver_enabled=False)
    await inbox_with_owner(org)
    waiter = await org.owner(via=slow)
    poster = await org.owner(via=tasks_b) if where == "other replica" else waiter
    await waiter("task.pull", inbox="private-bot")  # the slow replica now follows the inbox
    waiting = asyncio.create_task(waiter("task.pull", inbox="private-bot", wait_seconds=30))
    t = (await poster("task.create", inbox="private-bot", kind="chore", title="wake"))["task"]
    got = (await asyncio.wait_for(waiting, timeout=20))["tasks"]
    assert [g["task_id"] for g in got] == [t["task_id"]]


async def test_pulls_waiting_on_two_replicas_for_one_created_elsewhere_claim_it_once(
    org: Org, tasks_b: Instance, make_instance: Callable[..., Awaitable[Instance]]
) -> None:
    # Both woken by the same wake-up, both claim the row it named at its revision: one
    # compare-and-set stands, the other pull finds nothing and waits on (its store query 60 s away).
    slow = [
        await make_instance(task_pull_poll_seconds=60.0, task_lease_sweep_enabled=False, task_webhook_deliver_enabled=False)
        for _ in range(2)
    ]
    await inbox_with_owner(org)
    waiters = [await org.owner(via=inst) for inst in slow]
    for w in waiters:
        await w("task.pull", inbox="private-bot")  # each replica now follows the inbox
    waiting = [asyncio.create_task(w("task.pull", inbox="private-bot", wait_seconds=3)) for w in waiters]
    t = (await (await org.owner(via=tasks_b))("task.create", inbox="private-bot", kind="chore", title="wake"))["task"]
    got = [g for body in await asyncio.gather(*waiting) for g in body["tasks"]]
    assert [(g["task_id"], g["status"]) for g in got] == [(t["task_id"], "in_progress")]


async def test_a_batchs_wake_ups_leave_as_one_message_and_a_pull_woken_elsewhere_gets_the_batch(
    org: Org, tasks_b: Instance, make_instance: Callable[..., Awaitable[Instance]]
) -> None:
    # A wake-up leaves as soon as its write is answered, but a batch's leave together: the pull
    # woken on the slow replica (its store query 60 s away) finds all five in its first wake-up.
    slow = await make_instance(task_pull_poll_seconds=60.0, task_lease_sweep_enabled=False, task_webhook_deliver_enabled=False)
    await inbox_with_owner(org)
    waiter = await org.owner(via=slow)
    await waiter("task.pull", inbox="private-bot")
    sub = await tasks_b.runtime.bus.nc.subscribe(wake_subject(org.name, "private-bot"))
    waiting = asyncio.create_task(waiter("task.pull", inbox="private-bot", wait_seconds=30, max_tasks=5))
    poster = await org.owner(via=tasks_b)
    made = await poster("task.create_many", tasks=[{"inbox": "private-bot", "kind": "chore", "title": f"t{i}"} for i in range(5)])
    ids = sorted(r["task"]["task_id"] for r in made["results"])
    first = fastjson.loads((await sub.next_msg(timeout=10)).data)["ops"]
    assert sorted(op["row"]["task_id"] for op in first if op["op"] == "ready") == ids
    got = (await asyncio.wait_for(waiting, timeout=20))["tasks"]
    assert sorted(g["task_id"] for g in got) == ids
    await sub.unsubscribe()


async def test_claim_takes_a_named_todo_task_once(org: Org) -> None:
    _, owner = await inbox_with_owner(org)
    t = (await owner("task.create", inbox="private-bot", kind="chore", title="t"))["task"]
    got = (await owner("task.claim", task_id=t["task_id"], lease_seconds=60))["task"]
    assert got["status"] == "in_progress" and got["fence"] > 0
    await owner.refused(409, "PRECONDITION_FAILED", "task.claim", task_id=t["task_id"])
    assert (await owner("task.pull", inbox="private-bot"))["tasks"] == []


async def test_claim_with_stale_fence_is_refused(org: Org) -> None:
    _, owner = await inbox_with_owner(org)
    got = await claimed(owner)
    err = await owner.refused(409, "TASK_FENCE_STALE", "task.complete", task_id=got["task_id"], fence=got["fence"] - 1)
    assert err["detail"]["fence"] == got["fence"] - 1


async def test_every_owner_write_with_a_stale_fence_is_409(org: Org) -> None:
    _, owner = await inbox_with_owner(org)
    got = await claimed(owner)
    tid, stale = got["task_id"], got["fence"] + 1000
    for op, args in [
        ("task.heartbeat", {}),
        ("task.progress", {"note": "n"}),
        ("task.complete", {"outcome": {}}),
        ("task.fail", {"reason": "r"}),
        ("task.defer", {"resume_at": iso(60), "reason": "r"}),
        ("task.block", {"blocked_on": "human", "reason": "r"}),
    ]:
        await owner.refused(409, "TASK_FENCE_STALE", op, task_id=tid, fence=stale, **args)
    # The real fence still works.
    assert (await owner("task.complete", task_id=tid, fence=got["fence"]))["task"]["status"] == "done"


async def test_a_fence_from_before_a_wont_do_and_reopen_is_stale(org: Org) -> None:
    _, owner = await inbox_with_owner(org)
    first = await claimed(owner)
    await owner("task.wont_do", task_id=first["task_id"], reason="changed my mind")
    await owner("task.reopen", task_id=first["task_id"], reason="back")
    second = (await owner("task.pull", inbox="private-bot"))["tasks"][0]
    assert second["fence"] > first["fence"]
    await owner.refused(409, "TASK_FENCE_STALE", "task.complete", task_id=first["task_id"], fence=first["fence"])
    assert (await owner("task.complete", task_id=first["task_id"], fence=second["fence"]))["task"]["status"] == "done"


async def test_finished_task_answers_task_terminal(org: Org) -> None:
    _, owner = await inbox_with_owner(org)
    got = await claimed(owner)
    await owner("task.complete", task_id=got["task_id"], fence=got["fence"], outcome={"ok": True})
    await owner.refused(409, "TASK_TERMINAL", "task.complete", task_id=got["task_id"], fence=got["fence"])
    await owner.refused(409, "TASK_TERMINAL", "task.fail", task_id=got["task_id"], fence=got["fence"], reason="x")
    await owner.refused(409, "TASK_TERMINAL", "task.wont_do", task_id=got["task_id"], reason="x")
    await owner.refused(409, "TASK_TERMINAL", "task.cancel", task_id=got["task_id"], reason="x")
    await owner.refused(409, "TASK_TERMINAL", "task.update", task_id=got["task_id"], if_match_version=99, title="x")


async def test_heartbeat_extends_the_lease(org: Org) -> None:
    _, owner = await inbox_with_owner(org)
    t = (await owner("task.create", inbox="private-bot", kind="chore", title="t"))["task"]
    got = (await owner("task.pull", inbox="private-bot", lease_seconds=60))["tasks"][0]
    hb = await owner("task.heartbeat", task_id=t["task_id"], fence=got["fence"], lease_seconds=600)
    assert hb["fence"] == got["fence"]
    assert hb["lease_expires_time"] > got["lease_expires_time"]
    assert (await owner("task.get", task_id=t["task_id"]))["task"]["lease_expires_time"] == hb["lease_expires_time"]


async def test_heartbeats_keep_a_short_lease_alive_past_its_expiry(org: Org) -> None:
    _, owner = await inbox_with_owner(org)
    t = (await owner("task.create", inbox="private-bot", kind="chore", title="t"))["task"]
    got = (await owner("task.pull", inbox="private-bot", lease_seconds=1))["tasks"][0]
    first_expiry = time.time() + 1
    await owner("task.heartbeat", task_id=t["task_id"], fence=got["fence"], lease_seconds=60)

    async def past_first_expiry() -> bool:
        return time.time() > first_expiry

    await eventually(past_first_expiry)
    await sweep_passes(2)  # the sweep looked at it after the claim's own lease ran out
    assert (await owner("task.get", task_id=t["task_id"]))["task"]["status"] == "in_progress"
    assert (await owner("task.complete", task_id=t["task_id"], fence=got["fence"]))["task"]["status"] == "done"


async def test_fail_needs_a_reason_and_ends_failed(org: Org) -> None:
    _, owner = await inbox_with_owner(org)
    got = await claimed(owner)
    await owner.refused(422, "VALIDATION_FAILED", "task.fail", task_id=got["task_id"], fence=got["fence"])
    out = (await owner("task.fail", task_id=got["task_id"], fence=got["fence"], reason="boom"))["task"]
    assert out["status"] == "failed" and out["reason"] == "boom"


async def test_defer_returns_at_resume_at(org: Org) -> None:
    _, owner = await inbox_with_owner(org)
    got = await claimed(owner)
    out = (await owner("task.defer", task_id=got["task_id"], fence=got["fence"], resume_at=iso(1.0), reason="wait"))["task"]
    assert out["status"] == "deferred" and out["defers"] == 1
    back = (await owner("task.pull", inbox="private-bot", wait_seconds=10))["tasks"]
    assert [b["task_id"] for b in back] == [got["task_id"]]


async def test_defer_needs_a_reason(org: Org) -> None:
    _, owner = await inbox_with_owner(org)
    got = await claimed(owner)
    err = await owner.refused(422, "VALIDATION_FAILED", "task.defer", task_id=got["task_id"], fence=got["fence"], resume_at=iso(60))
    assert err["detail"]["field"] == "reason"
    assert (await owner("task.get", task_id=got["task_id"]))["task"]["status"] == "in_progress"


async def test_max_defers_blocks_the_task_on_a_person(org: Org) -> None:
    _, owner = await inbox_with_owner(org, max_defers=2)
    got = await claimed(owner)
    await owner("task.defer", task_id=got["task_id"], fence=got["fence"], resume_at=iso(3600), reason="later")
    await owner("task.resume", task_id=got["task_id"])
    again = (await owner("task.pull", inbox="private-bot"))["tasks"][0]
    out = (await owner("task.defer", task_id=got["task_id"], fence=again["fence"], resume_at=iso(3600), reason="later"))["task"]
    assert (out["status"], out["blocked_on"], out["defers"]) == ("blocked", "human", 2)


async def test_block_records_who_it_waits_on(org: Org) -> None:
    _, owner = await inbox_with_owner(org)
    got = await claimed(owner)
    await owner.refused(422, "VALIDATION_FAILED", "task.block", task_id=got["task_id"], fence=got["fence"], blocked_on="nobody", reason="x")
    out = (await owner("task.block", task_id=got["task_id"], fence=got["fence"], blocked_on="sender", reason="need the repro"))["task"]
    assert (out["status"], out["blocked_on"]) == ("blocked", "sender")
    back = (await owner("task.unblock", task_id=got["task_id"], reason="got it"))["task"]
    assert back["status"] == "todo"


async def test_progress_is_a_note_and_no_state_change(org: Org) -> None:
    _, owner = await inbox_with_owner(org)
    got = await claimed(owner)
    before = (await owner("task.get", task_id=got["task_id"]))["task"]
    out = await owner("task.progress", task_id=got["task_id"], fence=got["fence"], note="half way", percent=50)
    after = (await owner("task.get", task_id=got["task_id"]))["task"]
    assert out["event_id"] and after["version"] == before["version"] and after["status"] == "in_progress"
    hist = (await owner("task.history", task_id=got["task_id"]))["events"]
    assert any(e["kind"] == "progress" and e["data"] == {"note": "half way", "percent": 50} for e in hist)


async def test_owner_writes_need_writer_on_the_owner_namespace(org: Org) -> None:
    _, owner = await inbox_with_owner(org)
    got = await claimed(owner)
    viewer = await org.member("user:viewer", {org.private: "viewer", org.public: "writer"}, namespace=org.public)
    await viewer.refused(403, "AUTH_INSUFFICIENT", "task.complete", task_id=got["task_id"], fence=got["fence"])


async def test_the_lease_holder_reads_its_fence_in_get_and_list_and_nobody_else_does(org: Org) -> None:
    # A dashboard reloaded after Start reads the fence it must present (task.get / task.list);
    # the same subject under another agent label, and any other caller, read 0.
    admin, owner = await inbox_with_owner(org)
    t = (await owner("task.create", inbox="private-bot", kind="chore", title="hold me"))["task"]
    fence = (await owner("task.claim", task_id=t["task_id"], lease_seconds=86400))["task"]["fence"]
    assert fence > 0
    assert (await owner("task.get", task_id=t["task_id"]))["task"]["fence"] == fence
    listed = (await owner("task.list", inbox="private-bot", status=["in_progress"]))["tasks"]
    assert [(x["task_id"], x["fence"]) for x in listed] == [(t["task_id"], fence)]
    relabelled = await org.owner(agent="other-label")
    assert (await relabelled("task.get", task_id=t["task_id"]))["task"]["fence"] == 0
    assert (await admin("task.get", task_id=t["task_id"]))["task"]["fence"] == 0
    done = await owner("task.complete", task_id=t["task_id"], fence=fence, outcome={})
    assert done["task"]["status"] == "done"
    assert (await owner("task.get", task_id=t["task_id"]))["task"]["fence"] == 0

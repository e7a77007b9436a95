"""Reading over REST: get, list (filters, paging), counts, history, and the updates cursor."""

from __future__ import annotations

import asyncio
import time

from loom_runner.embedded import Instance

from tests.tasks.conftest import Org, register


async def test_list_filters_and_pages(org: Org) -> None:
    admin = await org.admin()
    await register(admin, posters=["sa:public-bot"])
    owner, public = await org.owner(), await org.outsider()
    mine = []
    for i in range(7):
        mine.append(
            (await owner("task.create", inbox="private-bot", kind="chore" if i % 2 else "review", title=f"t{i}"))["task"]["task_id"]
        )
    theirs = (await public("task.create", inbox="private-bot", kind="chore", title="p"))["task"]["task_id"]
    seen: list[str] = []
    token = ""
    while True:
        page = await owner("task.list", inbox="private-bot", limit=3, page_token=token)
        seen += [t["task_id"] for t in page["tasks"]]
        token = page["next_page_token"]
        if not token:
            break
    assert seen == list(reversed([*mine, theirs]))  # newest first, each once
    reviews = await owner("task.list", inbox="private-bot", kind=["review"])
    assert len(reviews["tasks"]) == 4
    triage = await owner("task.list", inbox="private-bot", status=["triage"])
    assert [t["task_id"] for t in triage["tasks"]] == [theirs]
    by_poster = await owner("task.list", inbox="private-bot", poster="sa:public-bot")
    assert [t["task_id"] for t in by_poster["tasks"]] == [theirs]
    await owner.refused(422, "VALIDATION_FAILED", "task.list", status=["nope"])
    await owner.refused(422, "VALIDATION_FAILED", "task.list", page_token="garbage!")


async def test_a_poster_lists_and_reads_its_own_tasks_without_reading_the_inbox(org: Org) -> None:
    admin = await org.admin()
    await register(admin, posters=["sa:public-bot"])
    public = await org.outsider()
    t = (await public("task.create", inbox="private-bot", kind="chore", title="p"))["task"]
    assert [x["task_id"] for x in (await public("task.list", mine=True))["tasks"]] == [t["task_id"]]
    assert (await public("task.get", task_id=t["task_id"]))["task"]["status"] == "triage"
    assert (await public("task.history", task_id=t["task_id"]))["events"][0]["kind"] == "created"
    await public.refused(404, "RESOURCE_NOT_FOUND", "task.list", inbox="private-bot")


async def test_counts_by_status(org: Org) -> None:
    admin = await org.admin()
    await register(admin)
    owner = await org.owner()
    for _ in range(3):
        await owner("task.create", inbox="private-bot", kind="chore", title="t")
    got = (await owner("task.pull", inbox="private-bot"))["tasks"][0]
    await owner("task.complete", task_id=got["task_id"], fence=got["fence"])
    out = await owner("task.counts", inbox="private-bot")
    assert out["counts"] == {"todo": 2, "done": 1} and out["total"] == 3
    assert (await owner("task.counts"))["counts"] == {"todo": 2, "done": 1}


async def test_history_is_the_tasks_events_in_order(org: Org) -> None:
    admin = await org.admin()
    await register(admin)
    owner = await org.owner()
    t = (await owner("task.create", inbox="private-bot", kind="chore", title="t"))["task"]
    got = (await owner("task.pull", inbox="private-bot"))["tasks"][0]
    await owner("task.complete", task_id=t["task_id"], fence=got["fence"], outcome={"url": "x"})
    events = (await owner("task.history", task_id=t["task_id"]))["events"]
    assert [e["kind"] for e in events] == ["created", "claimed", "done"]
    assert [e["version"] for e in events] == [1, 2, 3]
    assert events[-1]["data"] == {"outcome": {"url": "x"}} and events[1]["actor_agent"] == "private-bot"


async def test_updates_returns_the_senders_own_events_with_a_cursor(org: Org) -> None:
    admin = await org.admin()
    await register(admin, posters=["sa:public-bot"])
    owner, public = await org.owner(), await org.outsider()
    await owner("task.create", inbox="private-bot", kind="chore", title="not the sender's")
    t = (await public("task.create", inbox="private-bot", kind="chore", title="mine"))["task"]
    await owner("task.accept", task_id=t["task_id"])
    got = (await owner("task.pull", inbox="private-bot", kinds=["chore"], max_tasks=2))["tasks"]
    for g in got:
        await owner("task.complete", task_id=g["task_id"], fence=g["fence"], outcome={"by": "owner"})
    upd = await public("task.updates", since_seq=0)
    kinds = [e["kind"] for e in upd["events"]]
    assert kinds == ["created", "accepted", "claimed", "done"]
    assert all(e["task_id"] == t["task_id"] for e in upd["events"])
    seqs = [e["seq"] for e in upd["events"]]
    assert seqs == sorted(seqs) and upd["next_seq"] >= seqs[-1]
    assert upd["events"][-1]["data"] == {"outcome": {"by": "owner"}}
    # Replaying from an old cursor returns the same events; from the new one, none.
    again = await public("task.updates", since_seq=seqs[0])
    assert [e["seq"] for e in again["events"]] == seqs[1:]
    assert (await public("task.updates", since_seq=upd["next_seq"]))["events"] == []


async def test_updates_long_poll_wakes_on_the_next_event(org: Org) -> None:
    admin = await org.admin()
    await register(admin, posters=["sa:public-bot"])
    owner, public = await org.owner(), await org.outsider()
    t = (await public("task.create", inbox="private-bot", kind="chore", title="mine"))["task"]
    first = await public("task.updates", since_seq=0)
    cursor = first["next_seq"]
    waiting = asyncio.create_task(public("task.updates", since_seq=cursor, wait_seconds=30))
    await owner("task.accept", task_id=t["task_id"])
    # The long poll answers with the event, well before its own 30 s wait is over.
    upd = await asyncio.wait_for(waiting, timeout=20)
    assert [e["kind"] for e in upd["events"]] == ["accepted"]


async def test_updates_wait_times_out_empty(org: Org) -> None:
    public = await org.outsider()
    first = await public("task.updates")
    started = time.monotonic()
    out = await public("task.updates", since_seq=first["next_seq"], wait_seconds=1)
    assert out["events"] == [] and time.monotonic() - started >= 0.9


async def test_a_read_right_after_a_write_on_another_replica_sees_it(org: Org, tasks_b: Instance) -> None:
    admin = await org.admin()
    await register(admin)
    writer, reader = await org.owner(via=tasks_b), await org.owner()
    for i in range(5):
        t = (await writer("task.create", inbox="private-bot", kind="chore", title=f"t{i}"))["task"]
        # task.list and task.counts read the projection, which waits for the write first.
        assert t["task_id"] in {x["task_id"] for x in (await reader("task.list", inbox="private-bot"))["tasks"]}
        assert (await reader("task.counts", inbox="private-bot"))["counts"]["todo"] == i + 1
        assert [e["kind"] for e in (await reader("task.history", task_id=t["task_id"]))["events"]] == ["created"]


async def test_task_get_tells_the_fence_to_the_leases_holder_alone(org: Org) -> None:
    """A page reloaded after Start reads its fence back and still finishes the task; another
    agent label of the same subject, or another subject, reads fence 0."""
    admin = await org.admin()
    await register(admin)
    ui = await org.owner(agent="loom-ui")
    t = (await ui("task.create", inbox="private-bot", kind="chore", title="t"))["task"]
    assert (await ui("task.get", task_id=t["task_id"]))["task"]["fence"] == 0  # todo: no lease yet
    claimed = (await ui("task.claim", task_id=t["task_id"], lease_seconds=86400))["task"]
    assert claimed["fence"] > 0
    again = (await ui("task.get", task_id=t["task_id"]))["task"]
    assert again["status"] == "in_progress" and again["fence"] == claimed["fence"]
    other_label = await org.owner(agent="another-bot")
    assert (await other_label("task.get", task_id=t["task_id"]))["task"]["fence"] == 0
    assert (await admin("task.get", task_id=t["task_id"]))["task"]["fence"] == 0
    done = (await ui("task.complete", task_id=t["task_id"], fence=again["fence"]))["task"]
    assert done["status"] == "done"
    assert (await ui("task.get", task_id=t["task_id"]))["task"]["fence"] == 0  # finished: no lease

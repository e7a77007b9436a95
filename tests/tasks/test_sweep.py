"""The lease sweep: expired leases, max_attempts, resume_at, triage escalation, the cluster
lease (never two sweepers at once), and finished tasks leaving NATS for the projection."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from loom_runner.embedded import Instance
from loom_tasks.consumers import sweep as sweep_mod
from loom_tasks.consumers.sweep import DueIndex, Sweeper
from loom_tasks.plane import TasksPlane

from tests.tasks.conftest import Api, Org, eventually, register, retire, sweep_passes


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
    await sweep_passes(3)  # several more sweeps
    events = [e["kind"] for e in (await owner("task.history", task_id=t["task_id"]))["events"]]
    assert events.count("escalated") == 1
    assert (await status(owner, t["task_id"]))["status"] == "triage"


class RecordingSweeper(Sweeper):
    """A real sweeper on its own cluster-lease key whose passes only record when they ran."""

    def __init__(self, inst: Instance, key: str, log: list[tuple[str, float, float]]) -> None:
        p = plane(inst)
        super().__init__(
            p.engine, p.truth, inst.runtime.bus, p.directory, inst.runtime.leases, interval=0.05, retention=900.0, tombstone_ttl=3600.0
        )
        self.lease_key = key
        self.log = log

    async def sweep_once(self, now: float | None = None) -> sweep_mod.SweepReport:
        started = time.monotonic()
        await asyncio.sleep(0.02)
        self.log.append((self.holder, started, time.monotonic()))
        return sweep_mod.SweepReport()


async def test_two_replicas_never_sweep_at_once_and_one_takes_over(tasks_a: Instance, tasks_b: Instance) -> None:
    key = f"tasks.sweep.test-{uuid.uuid4().hex[:8]}"
    log: list[tuple[str, float, float]] = []
    a, b = RecordingSweeper(tasks_a, key, log), RecordingSweeper(tasks_b, key, log)
    await a.start()
    await b.start()
    try:
        await eventually(lambda: _passes(log, 5), within=10)
        holders = {h for h, _, _ in log}
        assert len(holders) == 1
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


async def _passes(log: list[tuple[str, float, float]], n: int) -> bool:
    return len(log) >= n


async def _ran_after(log: list[tuple[str, float, float]], holder: str, t: float) -> bool:
    return any(h == holder and s > t for h, s, _ in log)


# --- leaving NATS -------------------------------------------------------------------------------


async def test_a_finished_task_leaves_nats_and_is_served_from_the_projection(org: Org) -> None:
    admin = await org.admin()
    await register(admin)
    owner = await org.owner()
    t = (await owner("task.create", inbox="private-bot", kind="chore", title="t"))["task"]
    got = (await owner("task.pull", inbox="private-bot"))["tasks"][0]
    await owner("task.complete", task_id=t["task_id"], fence=got["fence"], outcome={"ok": True})
    await retire(org, t["task_id"])
    # Gone from NATS; every read still answers it, and it still refuses to change.
    assert (await status(owner, t["task_id"]))["status"] == "done"
    assert (await status(owner, t["task_id"]))["outcome"] == {"ok": True}
    await owner.refused(409, "TASK_TERMINAL", "task.complete", task_id=t["task_id"], fence=got["fence"])
    kinds = [e["kind"] for e in (await owner("task.history", task_id=t["task_id"]))["events"]]
    assert kinds == ["created", "claimed", "done"]


async def test_a_cancelled_task_that_left_nats_can_be_reopened(org: Org) -> None:
    admin = await org.admin()
    await register(admin)
    owner = await org.owner()
    t = (await owner("task.create", inbox="private-bot", kind="chore", title="t"))["task"]
    await owner("task.cancel", task_id=t["task_id"], reason="not now")
    await retire(org, t["task_id"])
    out = (await owner("task.reopen", task_id=t["task_id"], reason="now"))["task"]
    assert out["status"] == "todo"
    assert (await owner("task.pull", inbox="private-bot", wait_seconds=5))["tasks"][0]["task_id"] == t["task_id"]


async def test_a_pass_retires_every_finished_task_due_not_one_batch_of_them(org: Org, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pass goes on, BATCH at a time, while finished tasks are due: one batch a pass retired fewer
    tasks a second than a busy server finishes, and the rest piled up in NATS and in the index.
    Only a task with an idempotency_key keeps its tombstone for the idempotency window."""
    from loom_core.bus import kv
    from loom_tasks.events import PROJECTOR_DURABLE, ack_floor
    from loom_tasks.store import truth

    admin = await org.admin()
    await register(admin)
    owner = await org.owner()
    keyed = (await owner("task.create", inbox="private-bot", kind="chore", title="keyed", idempotency_key=uuid.uuid4().hex))["task"]
    ids = [keyed["task_id"]]
    ids += [(await owner("task.create", inbox="private-bot", kind="chore", title=f"t{n}"))["task"]["task_id"] for n in range(11)]
    for task_id in ids:
        await owner("task.cancel", task_id=task_id, reason="not needed")
    p, rt = plane(org.inst), org.inst.runtime
    s = Sweeper(p.engine, p.truth, rt.bus, p.directory, rt.leases, interval=600.0, retention=0.0, tombstone_ttl=3600.0)
    newest = 0
    for task_id in ids:
        st = await p.truth.read(org.name, task_id)
        assert st is not None and st.row is not None and st.row.terminal
        s.index.offer(org.name, task_id, st.rev, sweep_mod.due_at(st.row, s.retention))
        newest = max(newest, st.rev)

    async def projected() -> bool:
        return await ack_floor(rt.bus.js, truth.STREAM, PROJECTOR_DURABLE) >= newest

    await eventually(projected, within=15)
    monkeypatch.setattr(sweep_mod, "BATCH", 5)
    report = await s.sweep_once()
    assert (report.retired, report.errors) == (12, 0)
    ttls = []
    for task_id in ids:
        st = await p.truth.read(org.name, task_id)
        assert st is not None and st.row is None
        ttls.append((await rt.bus.js.get_last_msg(truth.STREAM, truth.subject(org.name, task_id))).headers[kv.MSG_TTL])
    assert ttls == ["3600"] + ["60"] * 11
    assert len(s.index) == 0 and s.index.take(now=time.time() + 10**6, limit=100) == []


async def test_tombstones_go_as_one_atomic_batch_and_a_task_changed_since_refuses_it_whole(org: Org) -> None:
    from loom_core.bus import kv

    admin = await org.admin()
    await register(admin)
    owner = await org.owner()
    ids = [(await owner("task.create", inbox="private-bot", kind="chore", title=f"t{n}"))["task"]["task_id"] for n in range(3)]
    for task_id in ids:
        await owner("task.cancel", task_id=task_id, reason="not needed")
    truth = plane(org.inst).truth
    revs = [st.rev for st in (await truth.read_many([(org.name, task_id) for task_id in ids])).values()]
    with pytest.raises(kv.BatchRefused):
        await truth.tombstone_many([(org.name, ids[0], revs[0], 60.0), (org.name, ids[1], revs[1] - 1, 60.0)])
    assert all(st.row is not None for st in (await truth.read_many([(org.name, task_id) for task_id in ids])).values())
    stored = await truth.tombstone_many([(org.name, task_id, rev, 60.0) for task_id, rev in zip(ids, revs, strict=True)])
    assert stored == list(range(stored[0], stored[0] + 3))
    assert all(st.row is None for st in (await truth.read_many([(org.name, task_id) for task_id in ids])).values())


async def test_a_task_without_an_idempotency_key_leaves_nats_altogether_and_can_still_be_reopened(
    org: Org, monkeypatch: pytest.MonkeyPatch
) -> None:
    admin = await org.admin()
    await register(admin)
    owner = await org.owner()
    t = (await owner("task.create", inbox="private-bot", kind="chore", title="t"))["task"]
    await owner("task.cancel", task_id=t["task_id"], reason="not now")
    monkeypatch.setattr(sweep_mod, "KEYLESS_TOMBSTONE_SECONDS", 1.0)
    await retire(org, t["task_id"])
    p = plane(org.inst)

    async def emptied() -> bool:
        return await p.truth.read(org.name, t["task_id"]) is None

    await eventually(emptied, within=15)
    assert (await status(owner, t["task_id"]))["status"] == "cancelled"
    out = (await owner("task.reopen", task_id=t["task_id"], reason="now"))["task"]
    assert out["status"] == "todo"
    assert (await owner("task.pull", inbox="private-bot", wait_seconds=5))["tasks"][0]["task_id"] == t["task_id"]


def test_the_due_index_hands_out_the_oldest_due_first_and_skips_replaced_entries() -> None:
    idx = DueIndex()
    for n in range(1000):
        idx.offer("o", f"t{n}", rev=n + 1, due=float(n))
    idx.offer("o", "t0", rev=5000, due=None)  # t0 finished, nothing due any more
    idx.offer("o", "t1", rev=5001, due=10_000.0)  # t1's lease renewed
    first = idx.take(now=600.0, limit=100)
    assert [t for _, t, _ in first] == [f"t{n}" for n in range(2, 102)]
    second = idx.take(now=600.0, limit=1000)
    assert [t for _, t, _ in second] == [f"t{n}" for n in range(102, 601)]
    assert idx.take(now=600.0, limit=10) == []


def test_the_due_index_forgets_replaced_entries_before_they_are_due() -> None:
    """A claim's lease entry is replaced by the task's completion long before the lease is due: the
    heap is rebuilt from the live entries, so it does not grow with the writes it has seen."""
    idx = DueIndex()
    for n in range(20_000):
        idx.offer("o", f"t{n}", rev=1, due=1_000.0 + n)  # claimed: due when the lease ends
        idx.offer("o", f"t{n}", rev=2, due=None if n % 2 else 5.0)  # completed: odd ones done, even ones retire at 5
    assert len(idx) == 10_000
    assert len(idx._heap) <= 2 * len(idx) + DueIndex.SLACK
    assert [t for _, t, _ in idx.take(now=10.0, limit=20_000)] == sorted(f"t{n}" for n in range(0, 20_000, 2))
    assert idx.take(now=10**9, limit=10) == []


# --- the watch follows the lease ----------------------------------------------------------------


def _sweeper(inst: Instance, key: str, feed: Callable[[], bool] | None = None) -> Sweeper:
    p = plane(inst)
    return Sweeper(
        p.engine,
        p.truth,
        inst.runtime.bus,
        p.directory,
        inst.runtime.leases,
        interval=0.1,
        retention=900.0,
        tombstone_ttl=3600.0,
        lease_key=key,
        feed=feed,
    )


async def test_only_the_sweep_lease_holder_watches_and_a_handover_still_releases_an_expired_lease(org: Org, tasks_b: Instance) -> None:
    """Two sweepers share a lease key (the plane's own sweepers paused): only the holder watches the
    state; when it stops, the other takes the lease, starts its watch (which replays each task's
    last write), catches up, and releases a lease that expired before it ever watched."""
    admin = await org.admin()
    await register(admin)
    owner = await org.owner()
    own = [plane(org.inst).sweeper, plane(tasks_b).sweeper]
    for s in own:
        await s.stop()
    key = f"tasks.sweep.test-{uuid.uuid4().hex[:8]}"
    a, b = _sweeper(org.inst, key), _sweeper(tasks_b, key)
    try:
        await a.start()
        await asyncio.wait_for(a.caught_up.wait(), 30)
        await b.start()
        passes = a.passes
        await eventually(lambda: _more(a, passes, 3), within=10)
        assert (a.watching, b.watching, b.watches) == (True, False, 0)  # the stand-by decodes nothing

        await owner("task.create", inbox="private-bot", kind="chore", title="handed over")
        got = (await owner("task.pull", inbox="private-bot", lease_seconds=1))["tasks"][0]
        await a.stop()  # before the task's lease expires: the other sweeper must release it
        assert not a.watching

        async def released() -> bool:
            return (await status(owner, got["task_id"]))["status"] == "todo"

        await eventually(released, within=20)

        # Other replicas' sweepers in the session (their own lease key) may release it first; the
        # stand-by must take over all the same: its lease waits out the stopped holder's TTL.
        async def taken_over() -> bool:
            return b.watching

        await eventually(taken_over, within=20)
        assert (b.watching, b.watches) == (True, 1)
    finally:
        await a.stop()
        await b.stop()
        for s in own:
            await s.start()


async def _more(s: Sweeper, passes: int, n: int) -> bool:
    return s.passes >= passes + n


async def test_a_sweep_watch_whose_consumer_is_gone_is_replaced_index_and_all(tasks_a: Instance) -> None:
    from loom_tasks.store import truth

    s = _sweeper(tasks_a, f"tasks.sweep.test-{uuid.uuid4().hex[:8]}")
    await s.start()
    try:
        await asyncio.wait_for(s.caught_up.wait(), 30)
        assert s.watches == 1
        await tasks_a.runtime.bus.js.delete_consumer(truth.STREAM, s._watch_name)  # as a lost NATS node would

        async def rewatched() -> bool:
            return s.watches == 2 and s.caught_up.is_set()

        await eventually(rewatched, within=20)
    finally:
        await s.stop()


async def test_a_fed_sweeper_replays_once_then_lives_on_the_feed_and_follows_it_to_another_replica(org: Org, tasks_b: Instance) -> None:
    """The plane's sweeper is fed by the projector (`feed`: the projector runs here): its watch
    only replays each task's last write, then its consumer is deleted and the index takes the
    projector's states; when the projector moves, the lease moves with it."""
    from loom_tasks.store import truth
    from nats.js.errors import NotFoundError

    admin = await org.admin()
    await register(admin)
    owner = await org.owner()
    projects = {"a": True, "b": False}
    key = f"tasks.sweep.test-{uuid.uuid4().hex[:8]}"
    a, b = _sweeper(org.inst, key, feed=lambda: projects["a"]), _sweeper(tasks_b, key, feed=lambda: projects["b"])
    try:
        await a.start()
        await b.start()
        await asyncio.wait_for(a.caught_up.wait(), 30)

        async def replay_ended(s: Sweeper) -> bool:
            return s.caught_up.is_set() and s._watch is None

        # A deadline, not a speed claim: on a loaded machine the replay's end took over 10 s once.
        await eventually(lambda: replay_ended(a), within=30)
        with pytest.raises(NotFoundError):
            await org.inst.runtime.bus.js.consumer_info(truth.STREAM, a._watch_name)
        assert (a.watching, b.watching, b.watches) == (True, False, 0)

        # Written after the replay: the index has it from the feed only.
        t = (await owner("task.create", inbox="private-bot", kind="chore", title="fed"))["task"]
        await owner("task.pull", inbox="private-bot", lease_seconds=600)
        st = await plane(org.inst).truth.read(org.name, t["task_id"])
        assert st is not None and st.row is not None and st.row.status == "in_progress"
        assert (org.name, t["task_id"]) not in a.index._rev
        a.offer_states([(org.name, t["task_id"], st.rev, st.row)])
        assert a.index._rev[(org.name, t["task_id"])] == st.rev
        a.offer_states([(org.name, t["task_id"], st.rev - 1, None)])  # an older state changes nothing
        assert a.index._rev[(org.name, t["task_id"])] == st.rev

        # The projector moves to b: a lets the sweep lease go, b takes it and replays (the task with it).
        projects["a"], projects["b"] = False, True

        async def moved() -> bool:
            return not a.watching and await replay_ended(b)

        await eventually(moved, within=30)
        assert b.index._rev[(org.name, t["task_id"])] == st.rev
        a.offer_states([(org.name, "another", 1, st.row)])  # a no longer keeps an index
        assert len(a.index) == 0
    finally:
        await a.stop()
        await b.stop()


def test_the_projector_tells_its_taps_each_tasks_newest_state_a_tombstone_included() -> None:
    from loom_tasks.consumers.projector import Projector
    from loom_tasks.domain.model import TaskRow
    from loom_tasks.store.truth import State

    heard: list[Any] = []
    projector = Projector.__new__(Projector)
    projector.taps = [heard.extend]
    row = TaskRow.__new__(TaskRow)
    newest = {("o", "t1"): State(row, 5), ("o", "t2"): State(row, 7)}
    projector._tell_taps(newest, [("o", "t1", 9), ("o", "t2", 6), ("o", "t3", 2)])
    assert sorted(heard, key=lambda s: s[1]) == [("o", "t1", 9, None), ("o", "t2", 7, row), ("o", "t3", 2, None)]

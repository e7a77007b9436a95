"""The tasks plane's consumers on the runtime's FastStream broker: the projector's batches
(one handler call per fetch, applied in place, acked after)."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from types import SimpleNamespace
from typing import Any

import pytest
from loom_core.bus import Bus, NatsServer
from loom_core.errors import ErrorCode, Unavailable
from loom_tasks.consumers.projector import batch_token
from loom_tasks.store.tasks import TaskStore

from tests.tasks.conftest import Org, eventually, register


async def test_a_failed_projection_write_is_retried_in_place_and_a_read_sees_it_at_once(org: Org, monkeypatch: pytest.MonkeyPatch) -> None:
    admin = await org.admin()
    await register(admin)
    owner = await org.owner()
    real = TaskStore.write
    failed = 0

    async def flaky(self: TaskStore, rows: Any, events: Any, token: str) -> None:
        nonlocal failed
        if failed < 2:
            failed += 1
            raise Unavailable(ErrorCode.BACKEND_UNAVAILABLE, "the store is failing over")
        await real(self, rows, events, token)

    monkeypatch.setattr(TaskStore, "write", flaky)
    task = (await owner("task.create", inbox="private-bot", kind="chore", title="after a failure"))["task"]
    # The batch comes back within the read's wait (3 s), not after the consumer's ack wait (10 s).
    listed = await owner("task.list", inbox="private-bot")
    assert failed == 2
    assert [t["task_id"] for t in listed["tasks"]] == [task["task_id"]]


def _msg(seq: int, data: bytes, subject: str = "loom.task_state.o.t") -> Any:
    """A delivered message as the projector reads it: its subject, data and ack subject."""
    return SimpleNamespace(
        reply=f"$JS.ACK.LOOM_TASK_STATE.loom-task-projector.1.{seq}.{seq}.1764547200000000000.0", subject=subject, data=data
    )


def test_the_projection_dedup_token_is_the_batchs_exact_writes() -> None:
    a = [_msg(1, b"x"), _msg(3, b"y"), _msg(5, b"z")]
    same_range_other_writes = [_msg(1, b"x"), _msg(4, b"y"), _msg(5, b"z")]
    restarted_stream = [_msg(1, b"other"), _msg(3, b"y"), _msg(5, b"z")]
    assert batch_token(a) == batch_token(list(reversed(a)))  # a redelivered batch is dropped
    assert batch_token(a) != batch_token(same_range_other_writes)
    assert batch_token(a) != batch_token(restarted_stream)


async def test_a_read_refuses_with_a_retryable_503_while_the_projection_lacks_the_callers_writes(
    org: Org, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The projector stalls (as while its consumer has no leader after a NATS node died): a read
    past the read-your-writes bound answers 503 BACKEND_UNAVAILABLE, retryable, not a list
    lacking the caller's acknowledged write; once the projector moves again the read has it."""
    import asyncio

    from loom_tasks.service import reading

    admin = await org.admin()
    await register(admin)
    owner = await org.owner()
    real = TaskStore.write
    stalled = asyncio.Event()
    release = asyncio.Event()

    async def stalling(self: TaskStore, rows: Any, events: Any, token: str) -> None:
        stalled.set()
        await release.wait()
        await real(self, rows, events, token)

    monkeypatch.setattr(TaskStore, "write", stalling)
    monkeypatch.setattr(reading, "READ_WAIT_SECONDS", 0.3)
    try:
        task = (await owner("task.create", inbox="private-bot", kind="chore", title="while stalled"))["task"]
        await asyncio.wait_for(stalled.wait(), 10)
        err = await owner.refused(503, "BACKEND_UNAVAILABLE", "task.list", inbox="private-bot")
        assert err["retryable"] is True and err["detail"]["reason"] == "projection_behind"
    finally:
        release.set()
    monkeypatch.setattr(reading, "READ_WAIT_SECONDS", 3.0)
    listed = await owner("task.list", inbox="private-bot")
    assert [t["task_id"] for t in listed["tasks"]] == [task["task_id"]]


class FakeProjection:
    """Stands in for the ClickHouse projection of a second projector on its own durable: records
    each applied batch; `fail` failed attempts first; `gate` holds an attempt until set."""

    def __init__(self, fail: int = 0) -> None:
        self.fail = fail
        self.attempts: list[set[str]] = []
        self.applied: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = []
        self.gate: asyncio.Event | None = None
        self.attempted = asyncio.Event()
        self.changed = asyncio.Event()

    async def write(self, rows: Any, events: Any, token: str) -> None:
        self.attempts.append({r["task_id"] for r in rows})
        self.attempted.set()
        if self.gate is not None:
            await self.gate.wait()
        if self.fail > 0:
            self.fail -= 1
            raise Unavailable(ErrorCode.BACKEND_UNAVAILABLE, "the store is failing over")
        self.applied.append((list(rows), list(events)))
        self.changed.set()


class NoPublish:
    async def publish_all(self, events: list[dict[str, Any]], wait: float = 5.0) -> list[int]:
        return list(range(len(events)))


async def _side_projector(
    org: Org, projection: FakeProjection, linger: float = 0.0, *, durable: str = "", bus: Bus | None = None, ack_wait: float | None = None
) -> tuple[Any, str]:
    """A second projector on its own durable (or `durable`, when another runs on it already)
    over this org's writes, with a 60 s fetch timeout (a fetch loop that waited for a full batch
    or its timeout would hold a lone write 60 s)."""
    from loom_tasks.consumers.layout import PROJECTOR
    from loom_tasks.consumers.projector import Projector

    durable = durable or f"test-proj-{uuid.uuid4().hex[:8]}"
    config = _side_config(org, durable, ack_wait)
    consumer = dataclasses.replace(
        PROJECTOR, name=durable, durable=durable, config=config, subject=config.filter_subject, pull_timeout_seconds=60.0
    )
    projector = Projector(bus or org.inst.runtime.bus, projection, NoPublish(), consumer=consumer, linger=linger)  # type: ignore[arg-type]
    await projector.start()
    return projector, durable


def _side_config(org: Org, durable: str, ack_wait: float | None = None) -> Any:
    """The projector's consumer config on durable `durable`, over this org's writes from now on."""
    from loom_tasks.consumers.layout import PROJECTOR
    from loom_tasks.store import truth
    from nats.js.api import DeliverPolicy

    assert PROJECTOR.config is not None
    return dataclasses.replace(
        PROJECTOR.config,
        durable_name=durable,
        deliver_policy=DeliverPolicy.NEW,
        filter_subject=f"{truth.PREFIX}.{org.name}.>",
        ack_wait=ack_wait if ack_wait is not None else PROJECTOR.config.ack_wait,
    )


async def _acked(org: Org, durable: str) -> tuple[int, int]:
    from loom_tasks.store import truth

    info = await org.inst.runtime.bus.js.consumer_info(truth.STREAM, durable)
    return int(info.ack_floor.stream_seq or 0), int(info.num_ack_pending or 0)


async def test_a_trickle_of_writes_waits_out_the_linger_unacked_and_a_read_here_ends_it(org: Org) -> None:
    admin = await org.admin()
    await register(admin)
    owner = await org.owner()
    projection = FakeProjection()
    projector, durable = await _side_projector(org, projection, linger=3600.0)
    try:
        first = (await owner("task.create", inbox="private-bot", kind="chore", title="first"))["task"]
        # The first write of a quiet spell is inserted at once.
        await asyncio.wait_for(projection.changed.wait(), 10)
        second = (await owner("task.create", inbox="private-bot", kind="chore", title="second"))["task"]

        async def held() -> bool:
            return (await _acked(org, durable))[1] == 1

        # The next one is delivered and lingers: not inserted, so not acked.
        await eventually(held)
        assert [[r["task_id"] for r in rows] for rows, _ in projection.applied] == [[first["task_id"]]]
        projection.changed.clear()
        projector.hurry()  # what a read-your-writes wait on this replica does
        await asyncio.wait_for(projection.changed.wait(), 10)
        assert [[r["task_id"] for r in rows] for rows, _ in projection.applied] == [[first["task_id"]], [second["task_id"]]]

        async def acked() -> bool:
            return (await _acked(org, durable))[1] == 0

        await eventually(acked)
    finally:
        await projector.stop()


def test_a_burst_and_its_tail_go_at_once_and_a_trickle_lingers() -> None:
    from loom_tasks.consumers.projector import PROMPT_WRITES, prompt

    assert prompt(1000, 0, full=1000) and prompt(PROMPT_WRITES, 0, full=1000)
    assert prompt(3, PROMPT_WRITES + 1, full=1000)  # the rest of a burst
    assert not prompt(3, 1, full=1000) and not prompt(PROMPT_WRITES - 1, PROMPT_WRITES - 1, full=1000)
    assert prompt(50, 0, full=50)  # a consumer whose fetches are smaller: full is large


async def test_a_fetch_of_many_writes_is_projected_at_once_while_a_trickle_would_linger(org: Org) -> None:
    """The end of a burst: the last fetches hold a few hundred writes each, and each waited out a
    linger before its insert (0.4 s of the projection's 0.5 s catch-up after a batched run)."""
    from loom_tasks.consumers.projector import PROMPT_WRITES, Projector

    admin = await org.admin()
    await register(admin)
    owner = await org.owner()
    projection = FakeProjection()
    first, _ = await _side_projector(org, projection, linger=3600.0)
    await first.stop()  # the durable keeps its place: the writes below wait for the next holder
    for start in range(0, PROMPT_WRITES + 50, 100):
        items = [{"inbox": "private-bot", "kind": "chore", "title": f"t{i}"} for i in range(start, min(start + 100, PROMPT_WRITES + 50))]
        assert all("task" in r for r in (await owner("task.create_many", tasks=items))["results"])
    projector = Projector(org.inst.runtime.bus, projection, NoPublish(), consumer=first.consumer, linger=3600.0)  # type: ignore[arg-type]
    projector.pacer.mark()  # an insert has just begun: a fetch of a few writes would wait an hour
    await projector.start()
    try:
        await asyncio.wait_for(projection.changed.wait(), 10)
        assert len(projection.applied[0][0]) >= PROMPT_WRITES
    finally:
        await projector.stop()


async def test_a_lone_write_is_projected_at_once_and_acked_only_after_it_is_applied(org: Org) -> None:
    admin = await org.admin()
    await register(admin)
    owner = await org.owner()
    projection = FakeProjection()
    projection.gate = asyncio.Event()
    projector, durable = await _side_projector(org, projection)
    try:
        task = (await owner("task.create", inbox="private-bot", kind="chore", title="lone"))["task"]
        await asyncio.wait_for(projection.attempted.wait(), 10)  # not the fetch's 60 s
        floor, pending = await _acked(org, durable)
        assert pending == 1 and not projection.applied  # held by its apply: not acked
        projection.gate.set()
        await asyncio.wait_for(projection.changed.wait(), 10)
        rows, history = projection.applied[0]
        assert [r["task_id"] for r in rows] == [task["task_id"]]
        assert [(e["task_id"], e["kind"]) for e in history] == [(task["task_id"], "created")]

        async def acked() -> bool:
            return (await _acked(org, durable))[1] == 0

        await eventually(acked)
        assert (await _acked(org, durable))[0] > floor
    finally:
        await projector.stop()


async def test_a_failed_batch_is_retried_whole_before_anything_newer_is_applied(org: Org) -> None:
    admin = await org.admin()
    await register(admin)
    owner = await org.owner()
    projection = FakeProjection(fail=3)
    projector, _ = await _side_projector(org, projection)
    try:
        first = (await owner("task.create", inbox="private-bot", kind="chore", title="first"))["task"]["task_id"]
        await asyncio.wait_for(projection.attempted.wait(), 10)
        second = (await owner("task.create", inbox="private-bot", kind="chore", title="second"))["task"]["task_id"]

        async def both() -> bool:
            return {r["task_id"] for rows, _ in projection.applied for r in rows} == {first, second}

        await eventually(both)
        assert projection.attempts[:4] == [{first}] * 4  # the failed batch, whole, until it applied
        assert first in {r["task_id"] for r in projection.applied[0][0]}
    finally:
        await projector.stop()


async def test_a_projector_that_stops_while_its_batch_fails_leaves_it_unacked(org: Org) -> None:
    admin = await org.admin()
    await register(admin)
    owner = await org.owner()
    projection = FakeProjection(fail=1_000_000)
    projector, durable = await _side_projector(org, projection)
    try:
        floor, _ = await _acked(org, durable)
        await owner("task.create", inbox="private-bot", kind="chore", title="never applied")
        await asyncio.wait_for(projection.attempted.wait(), 10)
    finally:
        await projector.stop()
    assert not projection.applied
    assert (await _acked(org, durable))[0] == floor


async def test_start_deletes_the_retired_durables(org: Org) -> None:
    from loom_tasks.consumers.layout import RETIRED, retire_consumers
    from loom_tasks.events import EARLIER_PROJECTOR_DURABLE, HISTORY_DURABLE
    from nats.js.api import ConsumerConfig
    from nats.js.errors import NotFoundError

    js = org.inst.runtime.bus.js
    assert {durable for _, durable in RETIRED} == {HISTORY_DURABLE, EARLIER_PROJECTOR_DURABLE}
    for stream, durable in RETIRED:
        await js.add_consumer(stream, ConsumerConfig(durable_name=durable))
    await retire_consumers(org.inst.runtime.bus)
    for stream, durable in RETIRED:
        with pytest.raises(NotFoundError):
            await js.consumer_info(stream, durable)
    await retire_consumers(org.inst.runtime.bus)  # absent: nothing to do


async def test_the_projectors_durable_starts_where_the_earlier_one_left_off(org: Org, monkeypatch: pytest.MonkeyPatch) -> None:
    """An upgrade: the earlier durable (each write acked) has applied up to its ack floor; the
    new one (one ack a fetch) is created to deliver what comes after, not the stream again."""
    from loom_tasks.consumers import layout
    from loom_tasks.store import truth
    from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

    js = org.inst.runtime.bus.js
    earlier, durable = f"test-earlier-{uuid.uuid4().hex[:8]}", f"test-ack-all-{uuid.uuid4().hex[:8]}"
    monkeypatch.setattr(layout, "EARLIER_PROJECTOR_DURABLE", earlier)
    monkeypatch.setattr(layout, "PROJECTOR_DURABLE", durable)
    assert layout.PROJECTOR.config is not None
    monkeypatch.setattr(
        layout,
        "PROJECTOR",
        dataclasses.replace(layout.PROJECTOR, config=dataclasses.replace(layout.PROJECTOR.config, durable_name=durable)),
    )
    floor = int((await js.stream_info(truth.STREAM)).state.last_seq or 0)
    await js.add_consumer(
        truth.STREAM, ConsumerConfig(durable_name=earlier, deliver_policy=DeliverPolicy.NEW, ack_policy=AckPolicy.EXPLICIT)
    )
    try:
        await layout.ensure_projector(org.inst.runtime.bus)
        info = await js.consumer_info(truth.STREAM, durable)
        assert info.config.ack_policy == AckPolicy.ALL
        assert int(info.ack_floor.stream_seq or 0) == floor  # delivers from floor + 1 on
        await layout.ensure_projector(org.inst.runtime.bus)  # there: left as it is
        assert (await js.consumer_info(truth.STREAM, durable)).created == info.created
    finally:
        for name in (earlier, durable):
            await js.delete_consumer(truth.STREAM, name)


async def test_a_fetch_is_acked_with_one_ack(org: Org) -> None:
    admin = await org.admin()
    await register(admin)
    owner = await org.owner()
    projection = FakeProjection()
    projector, durable = await _side_projector(org, projection)
    acks: list[str] = []
    nc = org.inst.runtime.bus.nc

    async def ack(msg: Any) -> None:
        acks.append(msg.subject)

    sub = await nc.subscribe(f"$JS.ACK.*.{durable}.>", cb=ack)
    try:
        items = [{"inbox": "private-bot", "kind": "chore", "title": f"t{i}"} for i in range(20)]
        created = {r["task"]["task_id"] for r in (await owner("task.create_many", tasks=items))["results"]}

        async def applied_and_acked() -> bool:
            return {r["task_id"] for rows, _ in projection.applied for r in rows} == created and (await _acked(org, durable))[1] == 0

        await eventually(applied_and_acked)
        assert 1 <= len(acks) <= len(projection.applied) < len(created)  # one ack a fetch, not one a write
    finally:
        await sub.unsubscribe()
        await projector.stop()


async def test_a_holder_killed_mid_fetch_loses_no_write_to_the_next_holders_acks(org: Org, nats_server: NatsServer) -> None:
    """A replica dies while it applies a fetch (no ack, no nak: the writes stay delivered to it
    until the consumer's ack wait). The next holder's first ack acks everything at or below it
    (AckPolicy ALL), so it first applies the writes after the ack floor it did not get."""
    from loom_core.bus import connect_bus

    admin = await org.admin()
    await register(admin)
    owner = await org.owner()
    dead_bus = await connect_bus(nats_server.url, name="dying-replica")
    held = FakeProjection()
    held.gate = asyncio.Event()  # never set: it dies applying
    dying, durable = await _side_projector(org, held, bus=dead_bus)
    projection = FakeProjection()
    try:
        lost = (await owner("task.create", inbox="private-bot", kind="chore", title="held by the dying replica"))["task"]["task_id"]
        await asyncio.wait_for(held.attempted.wait(), 10)
        await dead_bus.nc.close()  # killed: what it was handed stays pending on the consumer
        assert (await _acked(org, durable))[1] == 1
        taker, _ = await _side_projector(org, projection, durable=durable)
        try:
            newer = (await owner("task.create", inbox="private-bot", kind="chore", title="after the takeover"))["task"]["task_id"]

            async def acked() -> bool:
                return (await _acked(org, durable))[1] == 0 and bool(projection.applied)

            await eventually(acked)
            applied = [r["task_id"] for rows, _ in projection.applied for r in rows]
            assert applied[: applied.index(newer) + 1] == [lost, newer]  # the dead holder's first, in stream order
        finally:
            await taker.stop()
    finally:
        held.gate.set()
        await dying.stop()


async def test_a_takeover_applies_a_dead_holders_writes_that_come_back_after_its_first_fetch(
    org: Org, nats_server: NatsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A holder that died held two fetches, handed to it at different times, so they come back
    (their ack wait over) at different times. The next holder's first fetch holds only the first;
    its next one, a newer write, must not be acked (AckPolicy ALL) before the write still held by
    the dead holder is applied. (By delivery numbers the newer fetch followed the first, and its
    ack lost the held write: tests/tasks/test_chaos.py failed so, a hundred tasks at a time.)"""
    import nats
    from loom_tasks.consumers import batches
    from loom_tasks.store import truth

    monkeypatch.setattr(batches, "HELD_ELSEWHERE_SECONDS", 0.2)
    ack_wait = 3.0
    admin = await org.admin()
    await register(admin)
    owner = await org.owner()
    durable = f"test-proj-{uuid.uuid4().hex[:8]}"
    js = org.inst.runtime.bus.js
    await js.add_consumer(truth.STREAM, _side_config(org, durable, ack_wait))

    async def create(title: str) -> str:
        return str((await owner("task.create", inbox="private-bot", kind="chore", title=title))["task"]["task_id"])

    dead = await nats.connect(nats_server.url, name="dying-replica")
    try:
        held = await dead.jetstream().pull_subscribe_bind(durable, truth.STREAM)
        first = await create("handed to the dead holder first")
        await held.fetch(1, timeout=5)
        handed = asyncio.get_running_loop().time()
        await asyncio.sleep(ack_wait / 2)
        second = await create("handed to the dead holder later")
        await held.fetch(1, timeout=5)
    finally:
        await dead.close()  # killed: both stay delivered to it until their ack wait passes
    # The first comes back now; the second not for another ack_wait / 2.
    await asyncio.sleep(max(0.0, handed + ack_wait + 0.1 - asyncio.get_running_loop().time()))
    projection = FakeProjection()
    taker, _ = await _side_projector(org, projection, durable=durable, ack_wait=ack_wait)
    try:

        def applied() -> list[str]:
            return [r["task_id"] for rows, _ in projection.applied for r in rows]

        async def has(task_id: str) -> bool:
            return task_id in applied()

        await eventually(lambda: has(first))
        newer = await create("after the takeover")
        await eventually(lambda: has(newer))
        got = applied()
        assert second in got and got.index(second) < got.index(newer), got  # the held write first, in stream order
        assert (await _acked(org, durable))[1] == 0
    finally:
        await taker.stop()
        await js.delete_consumer(truth.STREAM, durable)

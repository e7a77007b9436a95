"""The tasks plane's consumers on the runtime's FastStream broker: the projector's batches
(one handler call per fetch, applied in place, acked after)."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from types import SimpleNamespace
from typing import Any

import pytest
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


async def _side_projector(org: Org, projection: FakeProjection, linger: float = 0.0) -> tuple[Any, str]:
    """A second projector on its own durable over this org's writes, with a 60 s fetch timeout
    (a fetch loop that waited for a full batch or its timeout would hold a lone write 60 s)."""
    from loom_tasks.consumers.layout import PROJECTOR
    from loom_tasks.consumers.projector import Projector
    from loom_tasks.store import truth
    from nats.js.api import DeliverPolicy

    durable = f"test-proj-{uuid.uuid4().hex[:8]}"
    assert PROJECTOR.config is not None
    config = dataclasses.replace(
        PROJECTOR.config, durable_name=durable, deliver_policy=DeliverPolicy.NEW, filter_subject=f"{truth.PREFIX}.{org.name}.>"
    )
    consumer = dataclasses.replace(
        PROJECTOR, name=durable, durable=durable, config=config, subject=config.filter_subject, pull_timeout_seconds=60.0
    )
    projector = Projector(org.inst.runtime.bus, projection, NoPublish(), consumer=consumer, linger=linger)  # type: ignore[arg-type]
    await projector.start()
    return projector, durable


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


async def test_start_deletes_the_retired_history_writers_durable(org: Org) -> None:
    from loom_tasks.consumers.layout import RETIRED, retire_consumers
    from nats.js.api import ConsumerConfig
    from nats.js.errors import NotFoundError

    js = org.inst.runtime.bus.js
    ((stream, durable),) = RETIRED
    await js.add_consumer(stream, ConsumerConfig(durable_name=durable))
    await retire_consumers(org.inst.runtime.bus)
    with pytest.raises(NotFoundError):
        await js.consumer_info(stream, durable)
    await retire_consumers(org.inst.runtime.bus)  # absent: nothing to do

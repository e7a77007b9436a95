"""The tasks plane's consumers on the runtime's FastStream broker: the projector's batches."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from loom_core.errors import ErrorCode, Unavailable
from loom_tasks.consumers.projector import batch_token
from loom_tasks.store.tasks import TaskStore

from tests.tasks.conftest import Org, register


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
    return SimpleNamespace(metadata=SimpleNamespace(sequence=SimpleNamespace(stream=seq)), subject=subject, data=data)


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

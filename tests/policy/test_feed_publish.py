"""The feed's batches are published in the step that makes them (live_history._run_now): a
publish that does not suspend finishes there with no task; one that does is finished by a task
as the event loop would have run it: the future's result or exception, or a cancellation."""

from __future__ import annotations

import asyncio

import pytest
from loom_policy.service.live_history import _run_now


async def test_a_coroutine_that_never_suspends_runs_in_the_call_with_no_task() -> None:
    ran: list[str] = []

    async def publish() -> None:
        ran.append("sent")

    assert _run_now(publish()) is None
    assert ran == ["sent"]


async def test_a_coroutine_that_suspends_is_finished_by_a_task_with_what_it_waited_for() -> None:
    loop = asyncio.get_running_loop()
    first, second = loop.create_future(), loop.create_future()
    seen: list[object] = []

    async def publish() -> None:
        seen.append(await first)
        await asyncio.sleep(0)  # a bare yield
        try:
            await second
        except ValueError as exc:
            seen.append(str(exc))

    task = _run_now(publish())
    assert task is not None and seen == []
    first.set_result("flushed")
    await asyncio.sleep(0)
    second.set_exception(ValueError("lost"))
    await task
    assert seen == ["flushed", "lost"]


async def test_a_cancelled_task_throws_the_cancellation_into_the_coroutine() -> None:
    waited = asyncio.get_running_loop().create_future()
    cleaned: list[bool] = []

    async def publish() -> None:
        try:
            await waited
        finally:
            cleaned.append(True)

    task = _run_now(publish())
    assert task is not None
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cleaned == [True]

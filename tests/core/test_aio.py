"""`every`, the periodic loop the planes' caches and gauges run in: a failed pass is logged and
the next one retries; cancelling it stops it."""

from __future__ import annotations

import asyncio
import logging

import pytest
from loom_core.aio import cancel_and_wait, every

log = logging.getLogger("tests.aio")


async def test_every_retries_after_a_failed_pass_and_logs_it(caplog: pytest.LogCaptureFixture) -> None:
    passes: list[int] = []
    second = asyncio.Event()

    async def step() -> None:
        passes.append(len(passes))
        if len(passes) == 1:
            raise RuntimeError("first pass fails")
        second.set()

    task = asyncio.create_task(every(0, step, failed="test refresh failed", logger=log))
    with caplog.at_level(logging.WARNING, logger="tests.aio"):
        await second.wait()
    await cancel_and_wait(task)
    assert task.cancelled()
    assert passes[:2] == [0, 1]
    assert [r.getMessage() for r in caplog.records if r.name == "tests.aio"] == ["test refresh failed"]


async def test_every_at_once_runs_the_first_pass_before_the_interval() -> None:
    ran = asyncio.Event()

    async def step() -> None:
        ran.set()

    # An hour's interval: only `at_once` can run the step while the test waits.
    task = asyncio.create_task(every(3600, step, failed="unused", logger=log, at_once=True))
    await ran.wait()
    await cancel_and_wait(task)
    assert task.cancelled()


async def test_every_with_traceback_logs_a_failed_pass_as_an_error_with_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    failed = asyncio.Event()

    async def step() -> None:
        failed.set()
        raise RuntimeError("unexpected")

    task = asyncio.create_task(every(3600, step, failed="lease x: step failed", logger=log, at_once=True, traceback=True))
    with caplog.at_level(logging.WARNING, logger="tests.aio"):
        await failed.wait()
    await cancel_and_wait(task)
    [record] = [r for r in caplog.records if r.name == "tests.aio"]
    assert record.levelno == logging.ERROR and record.exc_info is not None and record.getMessage() == "lease x: step failed"

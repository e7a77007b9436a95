"""Small asyncio helpers shared by the planes' background workers."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable


async def cancel_and_wait(task: asyncio.Task[None] | None, timeout: float = 5.0) -> None:  # noqa: ASYNC109 - a bound, not a caller's deadline
    """Cancel a background worker and wait for it, bounded: a fetch cut off mid-request must
    not hold a shutdown."""
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await asyncio.wait_for(task, timeout)


async def every(
    interval: float,
    step: Callable[[], Awaitable[object]],
    *,
    failed: str,
    logger: logging.Logger,
    at_once: bool = False,
    traceback: bool = False,
) -> None:
    """Run `step` every `interval` seconds until cancelled: the background refresh of a cache,
    a gauge, a ring or a lease. The first pass is one interval in (the caller ran one at start),
    or at once with `at_once`. A pass that fails is logged as `failed` (a warning; an error with
    its traceback with `traceback`, for a failure nobody expects) and the next pass retries, so
    the loop outlives any one failure; cancelling it stops it."""
    if not at_once:
        await asyncio.sleep(interval)
    while True:
        try:
            await step()
        except Exception:  # the next pass retries
            if traceback:
                logger.exception(failed)
            else:
                logger.warning(failed)
        await asyncio.sleep(interval)

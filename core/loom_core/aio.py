"""Small asyncio helpers shared by the planes' background workers."""

from __future__ import annotations

import asyncio
import contextlib


async def cancel_and_wait(task: asyncio.Task[None] | None, timeout: float = 5.0) -> None:  # noqa: ASYNC109 - a bound, not a caller's deadline
    """Cancel a background worker and wait for it, bounded: a fetch cut off mid-request must
    not hold a shutdown."""
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await asyncio.wait_for(task, timeout)

"""Group commit for task rows.

ClickHouse wants batches (a single-row insert costs about as much as a hundred-row one; the
embedded engine runs one statement at a time), and every state change of a task writes one row.
Callers hand their rows to `write` and wait; one flusher at a time takes everything queued and
writes it in one insert. So an idle plane writes at once, and a busy one shares each insert
among all the changes that arrived while the previous one ran (and, right after a flush, during
a short linger). A caller returns only after its rows are in — unless it asked for write-behind
(`wait=False`), which the claim path does: see service/engine.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from loom_core.store import Store

log = logging.getLogger(__name__)


#: Write-behind rows are tried this many times before they are given up to the sweep's reconcile.
BEHIND_ATTEMPTS = 5
#: How long a write-behind row waits for a newer version of its task to replace it.
BEHIND_DELAY_SECONDS = 0.1


@dataclass(slots=True)
class _Pending:
    rows: Sequence[Mapping[str, Any]]
    done: asyncio.Future[None] | None
    due: float = 0.0  # write-behind rows wait until then, in case a newer version replaces them
    attempts: int = 0


class BatchWriter:
    def __init__(
        self, store: Store, table: str, max_rows: int = 500, linger: float = 0.002, behind_delay: float = BEHIND_DELAY_SECONDS
    ) -> None:
        self.store = store
        self.table = table
        self.max_rows = max(1, max_rows)
        self.linger = linger
        self.behind_delay = behind_delay
        self._queue: list[_Pending] = []
        self._flusher: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._last_flush = 0.0
        self.flushes = 0  # for the benchmark's report
        self.rows = 0
        self.superseded = 0

    async def write(self, rows: Sequence[Mapping[str, Any]], *, wait: bool = True) -> None:
        if not rows:
            return
        fut: asyncio.Future[None] | None = asyncio.get_running_loop().create_future() if wait else None
        self._supersede(rows)
        self._queue.append(_Pending(rows, fut, 0.0 if wait else time.monotonic() + self.behind_delay))
        self._wake.set()
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush_all(), name="loom-tasks-batch")
        if fut is not None:
            # Shielded: a caller that gives up does not cancel a write others share.
            await asyncio.shield(fut)

    def _supersede(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Drop queued write-behind rows that these rows replace (the same task at a lower
        version): a ReplacingMergeTree keeps only the newest version anyway, so a claim that is
        finished before its row was due costs no row at all."""
        newer = {(r.get("org"), r.get("task_id")): int(r.get("version") or 0) for r in rows}
        for p in list(self._queue):
            if p.done is None and all(newer.get((r.get("org"), r.get("task_id")), -1) > int(r.get("version") or 0) for r in p.rows):
                self._queue.remove(p)
                self.superseded += len(p.rows)

    async def _flush_all(self) -> None:
        while self._queue:
            now = time.monotonic()
            if not any(p.due <= now for p in self._queue):
                # Only write-behind rows, not due yet: sleep until one is, or a write comes.
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout=max(min(p.due for p in self._queue) - now, 0.0))
                continue
            # Busy (the last flush just ended): linger a moment so the next insert carries more.
            if self.linger and now - self._last_flush < 0.05 and sum(len(p.rows) for p in self._queue) < self.max_rows:
                await asyncio.sleep(self.linger)
                now = time.monotonic()
            batch: list[_Pending] = []
            rows = 0
            for p in list(self._queue):
                if rows >= self.max_rows and batch:
                    break
                if p.due <= now:
                    self._queue.remove(p)
                    batch.append(p)
                    rows += len(p.rows)
            try:
                await self.store.insert(self.table, [r for p in batch for r in p.rows])
                self.flushes += 1
                self.rows += rows
            except Exception as exc:  # noqa: BLE001 - handed to every waiter of this batch
                for p in batch:
                    if p.done is not None:
                        if not p.done.done():
                            p.done.set_exception(exc)
                    elif p.attempts + 1 < BEHIND_ATTEMPTS:
                        p.attempts += 1
                        self._queue.append(p)
                    else:
                        log.warning("task rows written behind were given up; the sweep's reconcile restores them")
                await asyncio.sleep(0.05)
                continue
            finally:
                self._last_flush = time.monotonic()
            for p in batch:
                if p.done is not None and not p.done.done():
                    p.done.set_result(None)

    async def drain(self) -> None:
        """Write everything queued now (write-behind rows included)."""
        for p in self._queue:
            p.due = 0.0
        self._wake.set()
        if self._flusher is not None:
            await asyncio.gather(self._flusher, return_exceptions=True)

"""Group commit for task rows.

ClickHouse wants batches (a single-row insert costs about as much as a hundred-row one), and
every state change of a task writes one row. Callers hand their rows to `write` and wait; one
flusher at a time takes everything queued and writes it in one insert. So an idle plane writes at once, and a busy one shares each insert among all the
changes that arrived while the previous one ran. A caller returns only after its rows are in.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from loom_core.store import Store

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Pending:
    rows: Sequence[Mapping[str, Any]]
    done: asyncio.Future[None]


class BatchWriter:
    def __init__(self, store: Store, table: str, max_rows: int = 500) -> None:
        self.store = store
        self.table = table
        self.max_rows = max(1, max_rows)
        self._queue: list[_Pending] = []
        self._flusher: asyncio.Task[None] | None = None
        self.flushes = 0  # for the benchmark's report

    async def write(self, rows: Sequence[Mapping[str, Any]]) -> None:
        if not rows:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append(_Pending(rows, fut))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush_all(), name="loom-tasks-batch")
        # Shielded: a caller that gives up does not cancel a write others share.
        await asyncio.shield(fut)

    async def _flush_all(self) -> None:
        while self._queue:
            batch: list[_Pending] = []
            rows = 0
            while self._queue and (rows < self.max_rows or not batch):
                p = self._queue.pop(0)
                batch.append(p)
                rows += len(p.rows)
            try:
                await self.store.insert(self.table, [r for p in batch for r in p.rows])
                self.flushes += 1
            except Exception as exc:  # noqa: BLE001 - handed to every waiter of this batch
                for p in batch:
                    if not p.done.done():
                        p.done.set_exception(exc)
                continue
            for p in batch:
                if not p.done.done():
                    p.done.set_result(None)

    async def drain(self) -> None:
        if self._flusher is not None:
            await asyncio.gather(self._flusher, return_exceptions=True)


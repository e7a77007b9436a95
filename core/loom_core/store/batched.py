"""One store insert per table for the rows of concurrent calls (loom_core.batching).

Each call's rows still land in one insert (never split across two), and a call returns once
the insert that carried them has; an insert that fails fails every call it carried. What
changes is only that concurrent callers share the statement: a chDB insert costs about the
same for one row as for a hundred.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..batching import Coalescer
from .base import Store

Row = Mapping[str, Any]


class BatchedInserts:
    def __init__(self, store: Store, max_rows: int = 2000) -> None:
        self.store = store
        self._batches: Coalescer[str, list[Row], None] = Coalescer(self._run, max_size=max_rows, size=len)

    async def insert(self, table: str, rows: Sequence[Row]) -> None:
        if rows:
            await self._batches.submit(table, list(rows))

    async def _run(self, table: str, calls: list[list[Row]]) -> list[None]:
        await self.store.insert(table, [row for rows in calls for row in rows])
        return [None] * len(calls)

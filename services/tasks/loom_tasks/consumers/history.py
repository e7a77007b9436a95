"""task.history's table, written from the event stream.

Every task event is appended to LOOM_TASK_EVENTS (by the projector, from the state write). This
consumer copies the stream into `task_events` in batches: one durable pull consumer on the
runtime's FastStream broker (consumers/layout.py: HISTORY), shared by every replica, so each
event is handed to one replica, which inserts a batch (consumers/batches.py: retried in place
until it lands) and only then acks it. A replica that dies mid-batch leaves its events to be
redelivered; an event inserted twice is read once (readers keep the first row of an event_id).
Keeping this off the ops' path leaves each state change one store insert (its row) instead of two.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from faststream.nats.message import NatsMessage
from loom_core.bus import Bus, Consumer, Consuming
from loom_core.store import Store

from ..domain.validate import parse_time
from ..store.tasks import EVENTS, event_row
from .batches import Batches
from .layout import FETCH, HISTORY

log = logging.getLogger(__name__)

#: Longest a batch stays open for more of its fetch's events (task.history waits for it).
GATHER_SECONDS = 0.1


class HistoryWriter:
    def __init__(self, bus: Bus, store: Store, *, consumer: Consumer = HISTORY) -> None:
        self.bus = bus
        self.store = store
        self.consumer = consumer
        self._gather = Batches("task history writer", self._write, window=GATHER_SECONDS, max_size=FETCH)
        self._consuming: Consuming | None = None
        self.written = 0

    async def start(self) -> None:
        if self._consuming is None:
            self._consuming = await self.bus.consume(self.consumer, self._gather.add)

    async def stop(self) -> None:
        if self._consuming is not None:
            await self._consuming.stop()
            self._consuming = None
        await self._gather.stop()

    async def _write(self, msgs: list[NatsMessage]) -> None:
        rows: list[dict[str, Any]] = []
        for m in msgs:
            try:
                event = json.loads(m.raw_message.data)
                at = parse_time(str(event.get("at") or ""), "at") or time.time()
                rows.append(event_row(event, at))
            except (ValueError, KeyError, TypeError):
                log.warning("task history writer: skipped a malformed event")
        if rows:
            await self.store.insert(EVENTS, rows)
            self.written += len(rows)

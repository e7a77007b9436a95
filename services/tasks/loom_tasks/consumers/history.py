"""task.history's table, written from the event stream.

Every task event is appended to LOOM_TASK_EVENTS by the op that made it (before the op
answers). This consumer copies the stream into `task_events` in batches: one durable JetStream
consumer shared by every replica, so each event is handed to one replica, which inserts a batch
and only then acks it. A replica that dies mid-batch leaves its events to be redelivered; an
event inserted twice is read once (readers keep the first row of an event_id). Keeping this off
the ops' path leaves each state change one store insert (its row) instead of two.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from typing import Any

from loom_core.aio import cancel_and_wait
from loom_core.bus import Bus
from loom_core.store import Store
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.client import JetStreamContext

from ..domain.validate import parse_time
from ..events import HISTORY_DURABLE as DURABLE
from ..events import STREAM, STREAM_SUBJECTS
from ..store.tasks import EVENTS, event_row

log = logging.getLogger(__name__)


FETCH = 1000
#: How long a batch waits for more events before its insert (task.history waits for it).
GATHER_SECONDS = 0.1


class HistoryWriter:
    def __init__(self, bus: Bus, store: Store, *, durable: str = DURABLE) -> None:
        self.bus = bus
        self.store = store
        self.durable = durable
        self._task: asyncio.Task[None] | None = None
        self._sub: JetStreamContext.PullSubscription | None = None
        self.written = 0

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="loom-task-history")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None
        if self._sub is not None:
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()
            self._sub = None

    async def _bind(self) -> JetStreamContext.PullSubscription:
        config = ConsumerConfig(
            durable_name=self.durable,
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=60.0,
            deliver_policy=DeliverPolicy.ALL,
            max_ack_pending=50_000,
            filter_subject=STREAM_SUBJECTS[0],
        )
        return await self.bus.js.pull_subscribe(STREAM_SUBJECTS[0], durable=self.durable, stream=STREAM, config=config)

    async def _run(self) -> None:
        while True:
            try:
                if self._sub is None:
                    self._sub = await self._bind()
                try:
                    msgs = await self._sub.fetch(FETCH, timeout=1.0)
                except TimeoutError:
                    continue
                # Under load events arrive one by one: gather a moment's worth into one insert.
                deadline = time.monotonic() + GATHER_SECONDS
                while len(msgs) < FETCH and (left := deadline - time.monotonic()) > 0.005:
                    try:
                        msgs += await self._sub.fetch(FETCH - len(msgs), timeout=left)
                    except TimeoutError:
                        break
                await self._write(msgs)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - unacked events come back; try again shortly
                if "Timeout" not in type(exc).__name__:
                    log.warning("task history writer: %s", type(exc).__name__)
                    await asyncio.sleep(0.5)

    async def _write(self, msgs: list[Msg]) -> None:
        rows: list[dict[str, Any]] = []
        for m in msgs:
            try:
                event = json.loads(m.data)
                at = parse_time(str(event.get("at") or ""), "at") or time.time()
                rows.append(event_row(event, at))
            except (ValueError, KeyError, TypeError):
                log.warning("task history writer: skipped a malformed event")
        if rows:
            await self.store.insert(EVENTS, rows)
            self.written += len(rows)
        for m in msgs:
            with contextlib.suppress(Exception):
                await m.ack()

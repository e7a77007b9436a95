"""The projector: everything derived from a task's state writes (store/truth.py).

One durable pull consumer on LOOM_TASK_STATE (consumers/layout.py: PROJECTOR), on the runtime's
FastStream broker, shared by every replica: each write is handed to one replica. Each fetch's
writes are one batch (consumers/batches.py); for each batch, in this order:
1. the events the writes carry go to LOOM_TASK_EVENTS (`Nats-Msg-Id` = event_id, so a batch
   redelivered after a crash is stored once inside the duplicate window); one task's events are
   published in revision order;
2. the newest row of each task in the batch goes to the ClickHouse projection (`task_state`),
   its revision as the row version and a digest of the batch's writes as the insert's dedup
   token (batch_token);
3. the writes are acknowledged (each handler returns; the consumer's ack policy acks).
A crash anywhere in between redelivers the batch, and every step is idempotent, so the
projection and the event stream converge to the acknowledged state. Tombstones (a finished
task leaving NATS) change nothing here: the projection already holds the task.

A batch that fails (the event stream or the store not answering while a NATS node fails over)
is retried in place until it applies; nothing newer is fetched meanwhile. Before, the loop
dropped the failed batch and went on fetching newer writes: the dropped writes came back only
after the consumer's ack wait, so the projection (and read-your-writes, which waits 3 s at most)
lacked them for that long, and their events could be published after newer ones of the same task.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from typing import Any

from faststream.nats.message import NatsMessage
from loom_core.bus import Bus, Consumer, Consuming

from ..events import EventPublisher
from ..store import truth
from ..store.tasks import TaskStore, to_store
from .batches import Batches
from .layout import FETCH, PROJECTOR

log = logging.getLogger(__name__)

#: Longest a batch stays open for more of its fetch's writes (the projection's insert is per batch).
GATHER_SECONDS = 0.005


class Projector:
    def __init__(self, bus: Bus, projection: TaskStore, publisher: EventPublisher, *, consumer: Consumer = PROJECTOR) -> None:
        self.bus = bus
        self.projection = projection
        self.publisher = publisher
        self.consumer = consumer
        self._gather = Batches("task projector", self._apply_batch, window=GATHER_SECONDS, max_size=FETCH)
        self._consuming: Consuming | None = None
        self.applied = 0  # writes applied by this replica (the benchmark's report)
        self.batches = 0

    async def start(self) -> None:
        if self._consuming is None:
            self._consuming = await self.bus.consume(self.consumer, self._gather.add)

    async def stop(self) -> None:
        if self._consuming is not None:
            await self._consuming.stop()
            self._consuming = None
        await self._gather.stop()

    async def _apply_batch(self, msgs: list[NatsMessage]) -> None:
        await self.apply([m.raw_message for m in msgs])

    async def apply(self, msgs: list[Any]) -> None:
        """Apply nats-py messages of LOOM_TASK_STATE (events, then the projection); raises when
        either fails (nothing is acknowledged here: the caller acks once this returns)."""
        newest: dict[tuple[str, str], truth.State] = {}
        events: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for m in msgs:
            seq = int(m.metadata.sequence.stream)
            try:
                st = truth.decode(m.data, seq)
            except (ValueError, TypeError):
                log.warning("task projector: skipped a malformed state at %d", seq)
                continue
            if st.row is None:
                continue
            key = (st.row.org, st.row.task_id)
            have = newest.get(key)
            if have is None or have.rev < st.rev:
                newest[key] = st
            if st.event:
                events.setdefault(key, []).append(st.event)

        async def publish(evs: list[dict[str, Any]]) -> None:
            for e in sorted(evs, key=lambda e: int(e.get("version") or 0)):
                await self.publisher.publish(e)

        await asyncio.gather(*(publish(evs) for evs in events.values()))
        rows = [to_store(st.row, st.rev) for st in newest.values() if st.row is not None]
        if rows:
            await self.projection.write(rows, [], batch_token(msgs))
        self.applied += len(msgs)
        self.batches += 1


def batch_token(msgs: list[Any]) -> str:
    """The projection insert's dedup token: a digest of the batch's exact writes (sequence,
    subject and value of each). The sequence range and count alone are not enough: after
    redeliveries two different sets of writes can share them, and a stream that starts again
    (a new NATS deployment, an existing ClickHouse) reuses sequences; either way the second
    insert would be dropped as a duplicate of the first. A digest of the content drops only an
    insert of the very same rows."""
    h = hashlib.blake2b(digest_size=16)
    for m in sorted(msgs, key=lambda m: int(m.metadata.sequence.stream)):
        h.update(f"{int(m.metadata.sequence.stream)}\x00{m.subject}\x00{len(m.data)}\x00".encode())
        h.update(m.data)
    return f"proj-{h.hexdigest()}"

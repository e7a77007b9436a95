"""The projector: everything derived from a task's state writes (store/truth.py).

One durable JetStream consumer on LOOM_TASK_STATE (explicit acks, shared by every replica: each
write is handed to one replica). For each batch of writes, in this order:
1. the events the writes carry go to LOOM_TASK_EVENTS (`Nats-Msg-Id` = event_id, so a batch
   redelivered after a crash is stored once inside the duplicate window); one task's events are
   published in revision order;
2. the newest row of each task in the batch goes to the ClickHouse projection (`task_state`),
   its revision as the row version and the batch's sequence range as the insert's dedup token;
3. the writes are acknowledged.
A crash anywhere in between redelivers the batch, and every step is idempotent, so the
projection and the event stream converge to the acknowledged state. Tombstones (a finished
task leaving NATS) change nothing here: the projection already holds the task.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from loom_core.aio import cancel_and_wait
from loom_core.bus import Bus
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.client import JetStreamContext

from ..events import PROJECTOR_DURABLE, EventPublisher
from ..store import truth
from ..store.tasks import TaskStore, to_store

log = logging.getLogger(__name__)

FETCH = 1000
#: A batch gathers writes this long after its first one (the projection's insert is per batch).
GATHER_SECONDS = 0.005


class Projector:
    def __init__(self, bus: Bus, projection: TaskStore, publisher: EventPublisher, *, durable: str = PROJECTOR_DURABLE) -> None:
        self.bus = bus
        self.projection = projection
        self.publisher = publisher
        self.durable = durable
        self._task: asyncio.Task[None] | None = None
        self._sub: JetStreamContext.PullSubscription | None = None
        self.applied = 0  # writes applied by this replica (the benchmark's report)
        self.batches = 0

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="loom-task-projector")

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
            ack_wait=10.0,  # a dead replica's batch comes back to the others this soon
            deliver_policy=DeliverPolicy.ALL,
            max_ack_pending=50_000,
            filter_subject=truth.SUBJECTS[0],
        )
        return await self.bus.js.pull_subscribe(truth.SUBJECTS[0], durable=self.durable, stream=truth.STREAM, config=config)

    async def _run(self) -> None:
        while True:
            try:
                if self._sub is None:
                    self._sub = await self._bind()
                try:
                    msgs = await self._sub.fetch(FETCH, timeout=1.0)
                except TimeoutError:
                    continue
                deadline = time.monotonic() + GATHER_SECONDS
                while len(msgs) < FETCH and (left := deadline - time.monotonic()) > 0.001:
                    try:
                        msgs += await self._sub.fetch(FETCH - len(msgs), timeout=left)
                    except TimeoutError:
                        break
                await self.apply(msgs)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - unacked writes come back; try again shortly
                if "Timeout" not in type(exc).__name__:
                    log.warning("task projector: %s: %s", type(exc).__name__, exc)
                    await asyncio.sleep(0.2)

    async def apply(self, msgs: list[Msg]) -> None:
        newest: dict[tuple[str, str], truth.State] = {}
        events: dict[tuple[str, str], list[dict[str, Any]]] = {}
        seqs: list[int] = []
        for m in msgs:
            seq = int(m.metadata.sequence.stream)
            seqs.append(seq)
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
            await self.projection.write(rows, [], f"proj-{min(seqs)}-{max(seqs)}-{len(seqs)}")
        for m in msgs:
            with contextlib.suppress(Exception):
                await m.ack()
        self.applied += len(msgs)
        self.batches += 1

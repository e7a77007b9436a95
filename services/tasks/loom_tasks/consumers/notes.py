"""task.history's rows for progress notes, the one kind of task event no state write carries.

Every other event's row is written by the projector with the state write that carries it
(consumers/projector.py). A progress note changes no state, so task.progress publishes its event
to LOOM_TASK_EVENTS itself; this consumer copies those events (and only those: NOTES filters on
`loom.tasks.*.*.*.progress`) into `task_events`. A durable batch consumer (consumers/layout.py:
NOTES) shared by every replica: each fetch is inserted in place, retried until it lands
(consumers/batches.py), and only then acked. A note inserted twice (a redelivery) is read once:
readers keep the first row of an event_id. task.history waits for it as for the projector.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from loom_core.bus import Bus, Consumer

from ..domain.events import from_wire
from ..store.tasks import EventRow, TaskStore
from .batches import BatchConsumer, Written
from .layout import NOTES
from .projector import batch_token, history_row

log = logging.getLogger(__name__)


class NotesWriter(BatchConsumer):
    name = "task notes writer"

    def __init__(self, bus: Bus, projection: TaskStore, *, consumer: Consumer = NOTES) -> None:
        super().__init__(bus, consumer)
        self.projection = projection

    async def apply(self, msgs: Sequence[Written], seqs: list[int]) -> None:
        rows: list[EventRow] = []
        for m in msgs:
            event = from_wire(m.data)
            row = history_row(event) if event is not None else None
            if row is None:
                log.warning("task notes writer: skipped a malformed event")
                continue
            rows.append(row)
        if rows:
            await self.projection.write([], rows, batch_token(msgs, seqs))

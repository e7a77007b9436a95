"""The projector: everything derived from a task's state writes (store/truth.py).

One durable pull consumer on LOOM_TASK_STATE (consumers/layout.py: PROJECTOR), on the runtime's
FastStream broker, run by one replica at a time (consumers/leased.py). It is a batch consumer:
one handler call per fetch, as soon as the consumer has anything ready (core/loom_core/bus/batched.py).
For each fetch:
1. the events the writes carry go to LOOM_TASK_EVENTS (`Nats-Msg-Id` = event_id, so a batch
   redelivered after a crash is stored once inside the duplicate window), pipelined: each round
   sends the next event of every task in the batch and then awaits their acks, so one task's
   events are stored in revision order even when a publish fails;
2. at the same time, one insert each into the ClickHouse projection: the newest row of each task
   in the batch into `task_state` (its revision as the row version) and every event into
   `task.history`'s table `task_events`, each insert deduplicated by a digest of the batch's
   writes (batch_token);
3. once both are done, the fetch is acknowledged, with one ack of its newest write (the consumer's
   AckPolicy is ALL: consumers/batches.py says when that is safe and what a new holder does first).
Before all that, its `taps` are told each task's newest state in the fetch (the sweep's due
index, when the sweep runs on this replica: consumers/sweep.py).
A crash anywhere in between redelivers the batch, and every step is idempotent (an event row
inserted twice by a redelivery in another batch is read once: readers keep the first row of an
event_id), so the projection, the history and the event stream converge to the acknowledged
state. Tombstones (a finished task leaving NATS) change nothing here: the projection already holds the task.

A batch that fails (the event stream or the store not answering while a NATS node fails over)
is retried in place until it applies (consumers/batches.py); nothing newer is fetched meanwhile.
Before, the loop dropped the failed batch and went on fetching newer writes: the dropped writes
came back only after the consumer's ack wait, so the projection (and read-your-writes, which
waits 3 s at most) lacked them for that long, and their events could be published after newer
ones of the same task.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Callable, Sequence
from operator import itemgetter

from loom_core.batching import Pacer
from loom_core.bus import Bus, Consumer
from loom_core.bus.position import stream_seq

from ..domain.events import TaskEvent
from ..domain.model import TaskRow
from ..domain.validate import parse_time
from ..events import EventPublisher
from ..store import truth
from ..store.tasks import EventRow, ProjectedTask, TaskStore, event_row, to_store
from .batches import BatchConsumer, Written
from .layout import PROJECTOR

log = logging.getLogger(__name__)

#: A fetch of at least this many writes, and the one right after it, is inserted at once, lingering
#: or not (`prompt`). The linger spreads an insert's fixed cost over a trickle's writes; a large
#: fetch spreads it already, and at the end of a burst the last fetches (a few hundred writes, then
#: a few dozen) each waited out a linger: 0.4-0.7 s, nearly all of the time a 2,000-task batched run's
#: projection took to catch up after its last complete (docs/benchmarks.md, session 31).
PROMPT_WRITES = 200


def prompt(writes: int, previous: int, full: int) -> bool:
    """A fetch of `writes` writes, after one of `previous`, is inserted without waiting out the
    linger: it is full (`full` writes), large, or the rest of a large one (a burst's tail). Under a
    trickle every fetch is small, and each after the first lingers."""
    large = min(full, PROMPT_WRITES)
    return writes >= large or previous >= large


#: (org, task_id, revision, row; None for a tombstone): a task's newest state in a fetch.
StateSeen = tuple[str, str, int, TaskRow | None]


class Projector(BatchConsumer):
    name = "task projector"

    def __init__(
        self, bus: Bus, projection: TaskStore, publisher: EventPublisher, *, consumer: Consumer = PROJECTOR, linger: float = 0.0
    ) -> None:
        super().__init__(bus, consumer)
        self.projection = projection
        self.publisher = publisher
        #: Least time between the starts of two projection inserts of less than a full fetch
        #: (LOOM_TASK_PROJECTION_LINGER_SECONDS): see `_paced_write`.
        self.pacer = Pacer(linger)
        self._previous_writes = 0  # the last fetch applied (`prompt`)
        self.applied = 0  # writes applied by this replica (the benchmark's report)
        self.batches = 0
        self.applied_seq = 0  # the newest stream sequence this replica has applied (service/admission.py)
        #: Told each fetch's newest state of every task in it, as soon as it is decoded (the
        #: sweep's due index: consumers/sweep.py). A fetch applied again tells them again.
        self.taps: list[Callable[[list[StateSeen]], None]] = []
        #: Told the newest stream sequence applied, after each fetch (service/admission.py).
        self.on_applied: Callable[[int], None] | None = None

    def _tell_taps(self, newest: dict[tuple[str, str], truth.State], tombstones: list[tuple[str, str, int]]) -> None:
        latest: dict[tuple[str, str], StateSeen] = {key: (key[0], key[1], st.rev, st.row) for key, st in newest.items()}
        for org, task_id, rev in tombstones:
            seen = latest.get((org, task_id))
            if seen is None or seen[2] < rev:
                latest[(org, task_id)] = (org, task_id, rev, None)
        states = list(latest.values())
        for tap in self.taps:
            tap(states)

    async def apply(self, msgs: Sequence[Written], seqs: list[int]) -> None:
        """Apply writes of LOOM_TASK_STATE (events, then the projection and the history);
        raises when any step fails (nothing is acknowledged here: the caller acks once this returns)."""
        newest: dict[tuple[str, str], truth.State] = {}
        events: dict[tuple[str, str], list[TaskEvent]] = {}
        tombstones: list[tuple[str, str, int]] = []
        last_seq = max(seqs, default=0)
        for m, seq in zip(msgs, seqs, strict=True):
            try:
                st = truth.decode(m.data, seq)
            except (ValueError, TypeError):
                log.warning("task projector: skipped a malformed state at %d", seq)
                continue
            if st.row is None:
                if self.taps and (ids := truth.split_subject(m.subject)) is not None:
                    tombstones.append((ids[0], ids[1], seq))
                continue
            key = (st.row.org, st.row.task_id)
            have = newest.get(key)
            if have is None or have.rev < st.rev:
                newest[key] = st
            if st.event:
                events.setdefault(key, []).append(st.event)

        if self.taps:
            self._tell_taps(newest, tombstones)
        per_task = [sorted(evs, key=lambda e: int(e.get("version") or 0)) for evs in events.values()]

        async def publish_events() -> None:
            for r in range(max((len(evs) for evs in per_task), default=0)):
                await self.publisher.publish_all([evs[r] for evs in per_task if r < len(evs)])

        rows = [to_store(st.row, st.rev) for st in newest.values() if st.row is not None]
        history = [row for evs in per_task for e in evs if (row := history_row(e)) is not None]
        # The events and the inserts depend on nothing of each other: they run side by side
        # (the insert waits in chDB's thread, the publishes on the NATS server), and the fetch is
        # acknowledged only once both are done. One failing cancels the other; the fetch is
        # then applied again whole (both steps are idempotent).
        async with asyncio.TaskGroup() as both:
            both.create_task(publish_events())
            if rows or history:
                both.create_task(
                    self._paced_write(
                        rows, history, batch_token(msgs, seqs), at_once=prompt(len(msgs), self._previous_writes, self.consumer.pull_batch)
                    )
                )
        self._previous_writes = len(msgs)
        self.applied += len(msgs)
        self.batches += 1
        self.applied_seq = max(self.applied_seq, last_seq)
        if self.on_applied is not None:
            self.on_applied(self.applied_seq)

    async def _paced_write(self, rows: list[ProjectedTask], history: list[EventRow], token: str, *, at_once: bool) -> None:
        """The fetch's projection insert, at most one per `linger` unless `prompt` says it
        goes at once (loom_core.batching.Pacer). A chDB insert costs about the same CPU whatever its size (a
        part written now, merged later: 5-6 ms on this 2-core machine for one row or a hundred),
        so a lone worker's lifecycle, three
        writes in ~20 ms, cost up to six inserts (task_state and task_events each) and half the
        server's CPU. Pacing them, the writes that arrive meanwhile wait on the stream and come
        as the next fetch: one insert pair per `linger` under a steady trickle, none delayed
        when the projector was idle (the first write of a quiet spell is inserted at once). A
        read that waits for the projection (read-your-writes) waits at most about two lingers
        more (none when the read is on the replica running the projector: it calls `hurry`); the
        events are published before the pause, and the fetch is acked after the insert as before."""
        await self.pacer.turn(at_once=at_once or self._stopping)
        try:
            await self.projection.write(rows, history, token)
        except BaseException:  # a failure or a cancellation alike: the fetch's next attempt goes at once, then it propagates
            self.pacer.again()
            raise

    async def stop(self) -> None:
        self.hurry()  # a lingering insert goes now: its fetch is applied and acked before the stop
        await super().stop()

    def hurry(self) -> None:
        """A read on this replica waits for the projection (read-your-writes): the insert pending
        goes now instead of at the end of its linger. A read on another replica waits it out."""
        self.pacer.hurry()


def history_row(event: TaskEvent) -> EventRow | None:
    """An event's row of `task_events`, at the event's own time; None for a malformed event
    (logged and left out: it must not hold the projection back for ever)."""
    try:
        at = parse_time(str(event.get("at") or ""), "at") or time.time()
        return event_row(event, at)
    except Exception:  # noqa: BLE001 - a malformed event (a bad time, a missing field)
        log.warning("task projector: left a malformed event out of the history")
        return None


def batch_token(msgs: Sequence[Written], seqs: list[int] | None = None) -> str:
    """The projection insert's dedup token: a digest of the batch's exact writes (sequence,
    subject and value of each). The sequence range and count alone are not enough: after
    redeliveries two different sets of writes can share them, and a stream that starts again
    (a new NATS deployment, an existing ClickHouse) reuses sequences; either way the second
    insert would be dropped as a duplicate of the first. A digest of the content drops only an
    insert of the very same rows. `seqs`: the messages' stream sequences, in the same order,
    when the caller has read them already."""
    h = hashlib.blake2b(digest_size=16)
    for seq, m in sorted(zip(seqs if seqs is not None else map(stream_seq, msgs), msgs, strict=True), key=itemgetter(0)):
        h.update(f"{seq}\x00{m.subject}\x00{len(m.data)}\x00".encode())
        h.update(m.data)
    return f"proj-{h.hexdigest()}"

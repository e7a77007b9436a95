"""Task events on NATS JetStream: the stream and the publisher.

Subjects. Every task event is published on `loom.tasks.<org>.<namespace>.<inbox>.<kind>`, the
layout core's `loom_core.bus.task_subjects` writes (the one place; the auth callout and the
webhook deliverer read it from there). The kinds: created, accepted, claimed, progress, done,
failed, deferred, blocked, wont_do, cancelled, unblocked, resumed, reopened, updated,
reassigned, released, escalated. A subscriber that may read namespace `ns` of org `acme`
subscribes to `loom.tasks.acme.ns.>` (one inbox: `loom.tasks.acme.ns.<inbox>.*`; done events
of the namespace: `loom.tasks.acme.ns.*.done`).

Stream. LOOM_TASK_EVENTS holds `loom.tasks.>` (limits retention, LOOM_TASK_EVENTS_MAX_AGE_SECONDS).
Its sequence is the task.updates cursor: a sequence is assigned when an event is appended, so
every event at or below a sequence a reader has seen is already in the stream, whichever
replica wrote it; a cursor never skips and a replay from an old cursor reads the same events.
Each event is published with `Nats-Msg-Id: <event_id>`, so a re-published event inside the
duplicate window is stored once. On nats-server 2.12+ the stream allows atomic batches and the
projector's events go in as batches (one answer for up to a thousand events instead of one each);
a batch JetStream refuses (one of its events stored before, when a fetch is applied again) is
published again event by event, where the duplicates are dropped one by one.

Wake-ups (`loom.task_wake.<org>.<inbox>`) and config changes (`loom.task_config.<org>`) are
core NATS subjects outside the stream, and outside what the auth callout lets agents read.
"""

from __future__ import annotations

import asyncio
import logging
import time

from loom_core import fastjson
from loom_core.bus import Bus, jspublish, task_subjects
from loom_core.bus.task_subjects import event_subject
from loom_core.errors import ErrorCode, Unavailable
from nats.js.api import StreamConfig
from nats.js.client import JetStreamContext

from .domain.events import TaskEvent
from .streams import file_stream

log = logging.getLogger(__name__)

STREAM = "LOOM_TASK_EVENTS"
STREAM_SUBJECTS = [task_subjects.ALL]
WAKE_PREFIX = "loom.task_wake"
CONFIG_PREFIX = "loom.task_config"
#: A re-published event (the projector redelivered after a crash) inside this window is stored once.
DUPLICATE_WINDOW_SECONDS = 600.0
#: The durable consumer: task state -> events, the projection and task.history's table (AckPolicy ALL).
PROJECTOR_DURABLE = "loom-task-projector-ack-all"
#: Earlier versions' projector durable (each write acked): deleted at start, after the one above
#: is created where it left off (consumers/layout.py: ensure_projector).
EARLIER_PROJECTOR_DURABLE = "loom-task-projector"
#: task.progress notes (no state write) -> task.history's table.
NOTES_DURABLE = "loom-task-notes"
#: Earlier versions' history writer (events -> task.history's table): deleted at start.
HISTORY_DURABLE = "loom-task-history"


def wake_subject(org: str, inbox: str) -> str:
    return f"{WAKE_PREFIX}.{org}.{inbox}"


def config_subject(org: str) -> str:
    return f"{CONFIG_PREFIX}.{org}"


def stream_config(max_age_seconds: float, replicas: int = 1, *, atomic: bool = False) -> StreamConfig:
    return file_stream(STREAM, STREAM_SUBJECTS, replicas, atomic=atomic, max_age=max_age_seconds, duplicate_window=DUPLICATE_WINDOW_SECONDS)


# Longest a read waits for the projection to apply the writes made before it (read-your-writes).
READ_WAIT_SECONDS = 3.0


async def caught_up(js: JetStreamContext, stream: str, durable: str, wait: float) -> bool:
    """Wait (at most `wait` seconds) until `durable` has acknowledged every message `stream` held
    when called. False on timeout (task reads then refuse with a retryable 503). A bus that does not answer
    (a NATS node failing over) is asked again until the deadline, not taken as caught up."""
    deadline = time.monotonic() + wait
    target: int | None = None
    delay = 0.002
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        try:
            if target is None:
                target = int((await asyncio.wait_for(js.stream_info(stream), min(left, 1.0))).state.last_seq or 0)
            info = await js.consumer_info(stream, durable, timeout=min(left, 1.0))
            if info.ack_floor is not None and int(info.ack_floor.stream_seq or 0) >= target:
                return True
            if not info.num_pending and not info.num_ack_pending:
                return True  # nothing left to apply (the target itself may have been removed)
        except Exception:  # noqa: BLE001 - asked again until the deadline
            delay = max(delay, 0.05)
        await asyncio.sleep(min(delay, max(deadline - time.monotonic(), 0)))
        delay = min(delay * 2, 0.05)


async def ack_floor(js: JetStreamContext, stream: str, durable: str, answer_within: float | None = None) -> int:
    """The stream sequence up to which `durable` has acknowledged everything (the projector's
    applied position); 0 when the bus does not answer (callers then act as if nothing was applied)."""
    try:
        info = await js.consumer_info(stream, durable, timeout=answer_within)
    except Exception:  # noqa: BLE001 - not answering: nothing known to be applied
        return 0
    return int(info.ack_floor.stream_seq or 0) if info.ack_floor is not None else 0


class EventPublisher:
    """Appends events to LOOM_TASK_EVENTS and waits for the stream's ack."""

    def __init__(self, bus: Bus, replicas: int = 1) -> None:
        self.bus = bus
        self.replicas = replicas
        #: The stream takes atomic batches (it says so in its config, read back at start).
        self.atomic = False

    async def ensure_stream(self, max_age_seconds: float) -> None:
        await self.bus.ensure_stream(stream_config(max_age_seconds, self.replicas, atomic=jspublish.server_takes_atomic(self.bus.nc)))
        info = await self.bus.js.stream_info(STREAM)
        self.atomic = bool(info.config.allow_atomic)

    async def publish(self, event: TaskEvent) -> int:
        """The event's stream sequence. Retries briefly; 503 when the stream does not answer."""
        subject = event_subject(event["org"], event["namespace"], event["inbox"], event["kind"])
        body = fastjson.dumps(event)
        headers = {"Nats-Msg-Id": event["event_id"]}
        last: Exception | None = None
        for attempt in range(3):
            try:
                return await jspublish.publish(self.bus.nc, subject, body, headers)
            except Exception as exc:  # noqa: BLE001 - retried, then reported as 503
                last = exc
                await asyncio.sleep(0.05 * (attempt + 1))
        log.warning("task event %s not published: %s", event["event_id"], type(last).__name__)
        raise Unavailable(ErrorCode.BACKEND_UNAVAILABLE, "the event stream did not answer")

    async def publish_all(self, events: list[TaskEvent], wait: float = 5.0) -> list[int]:
        """Publish `events` pipelined: all sent, then all acks awaited (JetStream stores one
        connection's publishes in the order sent). Their stream sequences, in order. Raises when
        any ack fails or does not come within `wait` seconds (the caller sends them again: `Nats-Msg-Id`
        stores a re-published event once); an event sent after one that failed may be stored."""
        messages = [
            (event_subject(e["org"], e["namespace"], e["inbox"], e["kind"]), fastjson.dumps(e), {"Nats-Msg-Id": e["event_id"]})
            for e in events
        ]
        if self.atomic and len(messages) > 1:
            try:
                seqs: list[int] = []
                for at in range(0, len(messages), jspublish.ATOMIC_BATCH_MAX):
                    seqs += await jspublish.publish_atomic(self.bus.nc, messages[at : at + jspublish.ATOMIC_BATCH_MAX], answer_within=wait)
                return seqs
            except jspublish.Rejected as exc:
                # Nothing of the refused batch is stored; one by one, the events stored before are
                # dropped as duplicates and the rest stored.
                log.info("task events: an atomic batch refused (%s), published one by one", exc.err_code)
        return await jspublish.publish_many(self.bus.nc, messages, answer_within=wait)

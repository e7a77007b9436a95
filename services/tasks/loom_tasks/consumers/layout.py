"""The tasks plane's consumers of JetStream on the runtime's FastStream broker, declared in one place.

PROJECTOR is a durable pull consumer (run on one replica at a time, under PROJECTOR_LEASE, so
each task's events are published in order; it also writes task.history's rows) and a batch
consumer (one handler call per fetch, as soon as anything is ready: core/loom_core/bus/batched.py)
whose fetch is acked by its handler once written, with one ack (AckPolicy ALL: an ack acks every
message at or below it; consumers/batches.py retries a failed fetch in place, so the ack comes
only then, or gives the fetch up, handed back, when the consumer stops). NOTES is the same kind
of consumer but shared by every replica, so each of its messages is acked (explicit acks,
NACK_ON_ERROR), over the one kind of event no state write carries (task.progress notes,
published by the op itself): it writes their task.history rows.
SWEEP_WATCH is the sweep lease holder's watch of the tasks' state (the sweep's due index): a
batch pull consumer of its own (a durable name per watch, acking nothing, removed by the server
once unused; consumers/sweep.py starts a new watch, index and all, when it finds it gone).
EVENTS_TAIL is each replica's one reader of new task events for its waiting task.updates and
task.watch calls (consumers/tail.py: opened on the first wait, closed once idle). WAKE and CONFIG are core NATS
subscriptions (no stream, at most once, nothing to ack) every replica holds: the pull wake-ups
(a lost one costs at most LOOM_TASK_PULL_POLL_SECONDS) and the directory's cache drops (a lost
one costs at most LOOM_TASK_CONFIG_CACHE_TTL_SECONDS). The webhook deliverer's durable consumer is
declared with the deliverer (webhooks/_deliverer.py). The streams they read are declared by
their owners (store/truth.py, events.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

from loom_core.bus import AckPolicy, Bus, Consumer, task_subjects
from nats.js.api import AckPolicy as JsAckPolicy
from nats.js.api import ConsumerConfig, DeliverPolicy
from nats.js.errors import BadRequestError, NotFoundError

from ..events import CONFIG_PREFIX, EARLIER_PROJECTOR_DURABLE, HISTORY_DURABLE, NOTES_DURABLE, PROJECTOR_DURABLE, STREAM, WAKE_PREFIX
from ..store import truth

#: Most writes one fetch hands over (one projection insert, one event-table insert).
FETCH = 1000
#: A sweep watch's consumer outlives its last fetch this long (a holder that died leaves none behind).
WATCH_INACTIVE_SECONDS = 30.0


def _durable_batches(
    name: str, subject: str, stream: str, durable: str, ack_wait: float, description: str, *, one_holder: bool = False
) -> Consumer:
    """A durable batch pull consumer whose fetch is acked once its handler returns (after the
    write) and redelivered `ack_wait` seconds after a replica died holding it. Each message is
    acked (NACK_ON_ERROR), or, for a consumer `one_holder` replica at a time runs, the fetch
    with one ack of its newest (AckPolicy ALL; the handler acks: consumers/batches.py)."""
    return Consumer(
        name,
        subject,
        stream=stream,
        durable=durable,
        ack=AckPolicy.MANUAL if one_holder else AckPolicy.NACK_ON_ERROR,
        pull_batch=FETCH,
        pull_timeout_seconds=1.0,
        batch=True,
        config=ConsumerConfig(
            durable_name=durable,
            ack_policy=JsAckPolicy.ALL if one_holder else JsAckPolicy.EXPLICIT,
            ack_wait=ack_wait,
            deliver_policy=DeliverPolicy.ALL,
            max_ack_pending=50_000,
            filter_subject=subject,
        ),
        description=description,
    )


PROJECTOR = _durable_batches(
    "task-projector",
    truth.SUBJECTS[0],
    truth.STREAM,
    PROJECTOR_DURABLE,
    10.0,  # a dead replica's writes come back to the others this soon
    "task state writes -> task.updates events and the ClickHouse projection task_state (acked after both)",
    one_holder=True,
)

NOTES = _durable_batches(
    "task-notes",
    task_subjects.kind_filter("progress"),
    STREAM,
    NOTES_DURABLE,
    30.0,
    "task.progress notes (events with no state write) -> task.history's table task_events (acked after the insert)",
)

#: Durable consumers earlier versions kept, deleted at start (best effort) so none piles up
#: pending messages: (stream, durable). The history writer's rows now come from the projector;
#: the projector's earlier durable acked each write (an ack policy a consumer cannot change).
RETIRED = ((STREAM, HISTORY_DURABLE), (truth.STREAM, EARLIER_PROJECTOR_DURABLE))


def _watch(name: str, subject: str, stream: str, deliver: DeliverPolicy, description: str, **config: Any) -> Consumer:
    """A watch: a batch pull consumer acking nothing (its JetStream consumer's AckPolicy is none),
    under a durable name each opening gives it (`named`), removed by the server once unused."""
    return Consumer(
        name,
        subject,
        stream=stream,
        ack=AckPolicy.MANUAL,
        pull_batch=FETCH,
        pull_timeout_seconds=1.0,
        batch=True,
        deliver_policy=deliver,
        config=ConsumerConfig(
            ack_policy=JsAckPolicy.NONE,
            deliver_policy=deliver,
            inactive_threshold=WATCH_INACTIVE_SECONDS,
            filter_subject=subject,
            **config,
        ),
        description=description,
    )


def named(watch: Consumer, durable: str) -> Consumer:
    """One opening of a watch, under its own durable name."""
    assert watch.config is not None
    return dataclasses.replace(watch, durable=durable, config=dataclasses.replace(watch.config, durable_name=durable))


# The durable name is the sweep's own per watch (consumers/sweep.py).
SWEEP_WATCH = _watch(
    "task-sweep-watch",
    truth.SUBJECTS[0],
    truth.STREAM,
    DeliverPolicy.LAST_PER_SUBJECT,
    "every task's last state write, then each new one -> the sweep lease holder's due index",
)

# The durable name is the tail's own per opening (consumers/tail.py).
EVENTS_TAIL = _watch(
    "task-events-tail",
    task_subjects.ALL,
    STREAM,
    DeliverPolicy.NEW,
    "task events stored from now on -> this replica's waiting task.updates and task.watch calls (one consumer per replica)",
    mem_storage=True,
    num_replicas=1,
)

WAKE = Consumer(
    "task-wake",
    f"{WAKE_PREFIX}.>",
    ack=None,
    description="a task moved into or out of todo (loom.task_wake.<org>.<inbox>) -> this replica's pull queues (service/wake.py)",
)

CONFIG = Consumer(
    "task-config",
    f"{CONFIG_PREFIX}.*",
    ack=None,
    description="an inbox or its policies changed (loom.task_config.<org>) -> this replica's directory cache drops the entries",
)

#: Every consumer above (the AsyncAPI document lists them: asyncapi.py).
CONSUMERS = (PROJECTOR, NOTES, SWEEP_WATCH, EVENTS_TAIL, WAKE, CONFIG)

#: The cluster lease under which one replica at a time runs PROJECTOR (consumers/leased.py).
PROJECTOR_LEASE = "tasks.projector"


async def ensure_projector(bus: Bus) -> None:
    """Create PROJECTOR's durable when absent, starting after the earlier durable's ack floor
    when that one is there (an upgrade: the writes it applied are not applied again), else at
    the stream's start. Before `retire_consumers` deletes the earlier one; a replica that
    creates it first wins (the other's create is refused, and it binds the one there)."""
    assert PROJECTOR.config is not None
    with contextlib.suppress(NotFoundError):
        await bus.js.consumer_info(truth.STREAM, PROJECTOR_DURABLE)
        return
    config = dataclasses.replace(PROJECTOR.config)
    with contextlib.suppress(NotFoundError):
        earlier = await bus.js.consumer_info(truth.STREAM, EARLIER_PROJECTOR_DURABLE)
        floor = int(earlier.ack_floor.stream_seq or 0) if earlier.ack_floor is not None else 0
        config = dataclasses.replace(config, deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=floor + 1)
    with contextlib.suppress(BadRequestError):
        await bus.js.add_consumer(truth.STREAM, config)


async def retire_consumers(bus: Bus) -> None:
    """Delete the RETIRED durables still on their streams (best effort: absent, or the bus not
    answering, is fine; the next start tries again)."""
    for stream, durable in RETIRED:
        with contextlib.suppress(Exception):
            await bus.js.delete_consumer(stream, durable)

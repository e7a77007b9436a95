"""A task's current state: one subject per task on the LOOM_TASK_STATE stream (NATS JetStream).

    loom.task_state.<org>.<task_id>     value: {"row": {...the task...}, "event": {...} | null}

This is the truth. Every transition of a task is ONE compare-and-set publish of its next value
(`Nats-Expected-Last-Subject-Sequence` = the revision read, through `loom_core.bus.kv`); the
write carries the event it makes. The revision (the message's stream sequence) is the write's
compare-and-set token, the fence of a claim (the claim's own revision, filled in on read since
a value cannot carry the revision it is written at) and the projection's row version.
`row.version` counts transitions (heartbeats keep it), so `if_match_version` survives heartbeats.

Everything else is derived from these messages by durable consumers (consumers/projector.py):
the task.updates event (LOOM_TASK_EVENTS, `Nats-Msg-Id` = event_id), the ClickHouse rows.

Retention. The stream keeps the last HISTORY messages of each subject, so the projector may fall
that many writes of one task behind without losing one. A finished task's value is replaced,
after LOOM_TASK_TERMINAL_RETENTION_SECONDS and once the projection holds it, by a tombstone
(a rollup: older messages go) that lives LOOM_TASK_IDEMPOTENCY_WINDOW_SECONDS when the task has an
idempotency_key, a minute when it has none (consumers/sweep.py); readers then read the projection. An idempotent create's task_id is derived from (org, poster, key), so its
create-if-absent write IS the idempotency check: one key stores one task, however slow anything is.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from loom_core import fastjson
from loom_core.bus import Bus, direct, jspublish, kv
from nats.js.api import StreamConfig

from ..domain import model
from ..domain.events import TaskEvent
from ..domain.model import TaskRow
from ..streams import file_stream

STREAM = "LOOM_TASK_STATE"
PREFIX = "loom.task_state"
SUBJECTS = [f"{PREFIX}.>"]
HISTORY = 64

WrongRevision = kv.WrongRevision
TOMBSTONE = b'{"gone":true}'


def subject(org: str, task_id: str) -> str:
    return f"{PREFIX}.{org}.{task_id}"


def split_subject(subj: str) -> tuple[str, str] | None:
    parts = subj.split(".")
    if len(parts) != 4 or f"{parts[0]}.{parts[1]}" != PREFIX:
        return None
    return parts[2], parts[3]


def idempotent_task_id(org: str, poster: str, key: str) -> str:
    """The task_id of a create with an idempotency_key: one per (org, poster, key)."""
    return hashlib.sha256(f"{org}\x00{poster}\x00{key}".encode()).hexdigest()[:24]


def stream_config(replicas: int, *, atomic: bool = False) -> StreamConfig:
    return file_stream(STREAM, SUBJECTS, replicas, atomic=atomic, max_msgs_per_subject=HISTORY, allow_rollup_hdrs=True, allow_msg_ttl=True)


def encode(row: TaskRow, event: TaskEvent | None) -> bytes:
    return kv.dumps({"row": model.stored(row), "event": event})


@dataclass(slots=True)
class State:
    """A task's last message: `row` None for a tombstone (the task lives on in the projection)."""

    row: TaskRow | None
    rev: int
    event: TaskEvent | None = None


def decode(data: bytes | None, rev: int) -> State:
    if not data:
        return State(None, rev)
    d = fastjson.loads(data)
    if not isinstance(d, dict) or not isinstance(d.get("row"), dict):
        return State(None, rev)
    row = model.from_stored(d["row"])
    row.rev = rev
    if row.status == model.IN_PROGRESS and not row.fence:
        row.fence = rev  # the claim's own write: its revision is the fence
    return State(row, rev, d.get("event"))


class TaskTruth:
    def __init__(self, bus: Bus, replicas: int = 1) -> None:
        self.bus = bus
        self.replicas = replicas
        #: The stream takes atomic batches (its config says so, read back at start): `write_many`.
        self.atomic = False

    async def ensure(self) -> None:
        await kv.ensure_stream(self.bus.js, stream_config(self.replicas, atomic=jspublish.server_takes_atomic(self.bus.nc)))
        info = await self.bus.js.stream_info(STREAM)
        self.atomic = bool(info.config.allow_atomic)

    async def read(self, org: str, task_id: str) -> State | None:
        entry = await kv.read(self.bus.js, STREAM, subject(org, task_id))
        if entry is None:
            return None
        return decode(entry.data, entry.revision)

    async def read_many(self, tasks: list[tuple[str, str]]) -> dict[tuple[str, str], State]:
        """Each (org, task_id)'s state, read in one request (at most `direct.MULTI_LAST`); a task
        NATS holds nothing of is left out."""
        got = await direct.read_last(self.bus.js, STREAM, [subject(org, task_id) for org, task_id in tasks])
        return {key: decode(m.data, m.seq) for key in tasks if (m := got.get(subject(*key))) is not None}

    async def write(self, row: TaskRow, event: TaskEvent | None, last: int) -> int:
        """The task's next value at revision `last` (0: a new task). WrongRevision on a race."""
        data = encode(row, event)
        subj = subject(row.org, row.task_id)
        if last:
            return await kv.update_at(self.bus.js, subj, data, last)
        return await kv.create_if_absent(self.bus.js, STREAM, subj, data)

    async def write_many(self, writes: list[tuple[TaskRow, TaskEvent | None, int]]) -> list[int]:
        """Each (row, event, last) as `write` takes it, as one atomic batch (distinct tasks): their
        revisions. `kv.BatchRefused` (nothing written) when a write lost its race, the stream takes
        no batches or there is only one write: the caller writes them one by one."""
        if not self.atomic or len(writes) < 2:
            raise kv.BatchRefused(0)
        return await kv.update_many_at(
            self.bus.js, [(subject(row.org, row.task_id), encode(row, event), last) for row, event, last in writes]
        )

    async def tombstone(self, org: str, task_id: str, last: int, ttl: float) -> int:
        """Replace a finished task's value (and every older message of it) by a tombstone."""
        return await kv.update_at(self.bus.js, subject(org, task_id), TOMBSTONE, last, ttl=ttl, headers={kv.ROLLUP: "sub"})

    async def tombstone_many(self, tasks: list[tuple[str, str, int, float]]) -> list[int]:
        """Each (org, task_id, last, ttl) tombstoned as `tombstone` does, as one atomic batch
        (distinct tasks): one stored write for the lot, where a tombstone each cost an fsync
        each. `kv.BatchRefused` (nothing written) as `write_many`: the caller goes one by one."""
        if not self.atomic or len(tasks) < 2:
            raise kv.BatchRefused(0)
        return await kv.update_many_at(
            self.bus.js,
            [(subject(org, task_id), TOMBSTONE, last) for org, task_id, last, _ in tasks],
            ttls=[ttl for *_, ttl in tasks],
            headers={kv.ROLLUP: "sub"},
        )

    async def last_seq(self) -> int:
        info = await self.bus.js.stream_info(STREAM)
        return int(info.state.last_seq or 0)

"""The ledger: one row per op call in loom.agent_events, written in batches in the background.

Calls append to an in-memory buffer. In embedded mode (one process holds the chDB engine) the
flusher inserts each batch straight into the store, each row encoded once, by the store's
insert. Otherwise it publishes each batch to JetStream (stream LOOM_LEDGER, work queue), and a
durable consumer shared by every replica inserts it with the batch id as ClickHouse's
deduplication token, so a redelivered batch changes nothing. With no bus the flusher inserts
directly.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, NotRequired, cast

from google.protobuf.message import Message
from loom_api.options.v1 import options_pb2
from nats.js.api import ConsumerConfig, RetentionPolicy, StreamConfig

from .. import fastjson
from ..batching import Pacer
from ..bus import Bus
from ..bus.layout import AckPolicy, BusLayout, Consumer
from ..store import Migration, Store
from ..store.caller import CALL_COLUMNS_DDL, CallerRow

log = logging.getLogger(__name__)

TABLE = "{db}.agent_events"
STREAM = "LOOM_LEDGER"
SUBJECT = "loom.ledger.batch"
DURABLE = "ledger-writer"

LAYOUT = BusLayout(
    streams=(StreamConfig(name=STREAM, subjects=[SUBJECT], retention=RetentionPolicy.WORK_QUEUE, max_age=7 * 86400),),
    consumers=(
        Consumer(
            DURABLE,
            SUBJECT,
            stream=STREAM,
            durable=DURABLE,
            ack=AckPolicy.NACK_ON_ERROR,
            pull_batch=50,
            pull_timeout_seconds=1.0,
            config=ConsumerConfig(ack_wait=30, max_ack_pending=1000),
            description="ledger batches from every replica -> loom.agent_events (batch id = insert dedup token)",
        ),
    ),
)


class LedgerCaller(CallerRow):
    """Who called, and how: the columns a call's row and each of a batch op's item rows share."""

    transport: str
    run_id: str
    consumer: str
    token_id: str


class LedgerRow(LedgerCaller):
    """An agent_events row as the ledger records it (`ts` as ClickHouse DateTime64 text)."""

    ts: str
    op: str
    ok: bool
    error_code: str
    latency_ms: float
    args: dict[str, str]
    out_hits: int
    request_id: str
    write_shaped: bool
    # The assistant plane's column (its migration adds it): an observer stamps an answer's spend.
    upstream_cost_usd: NotRequired[float]


MIGRATIONS = [
    Migration(
        "core",
        "agent_events",
        f"""
        CREATE TABLE IF NOT EXISTS {{db}}.agent_events (
            {CALL_COLUMNS_DDL},
            op LowCardinality(String),
            transport LowCardinality(String),
            run_id String,
            consumer LowCardinality(String),
            ok Bool,
            error_code LowCardinality(String),
            latency_ms Float64,
            args Map(String, String),
            out_hits Int64,
            token_id String,
            request_id String,
            write_shaped Bool
        ) ENGINE = MergeTree
        PARTITION BY toYYYYMM(ts)
        ORDER BY (org, namespace, agent, op, ts)
        SETTINGS non_replicated_deduplication_window = 10000""",
    ),
]


_second_cache: list[Any] = [-1, ""]


def _ch_time(ts: float) -> str:
    """ClickHouse DateTime64(6) text for a UNIX time; the formatted second is reused."""
    second = int(ts)
    if _second_cache[0] != second:
        _second_cache[0] = second
        _second_cache[1] = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%d %H:%M:%S")
    return f"{_second_cache[1]}.{int((ts - second) * 1_000_000):06d}"


def digest(value: str | bytes) -> str:
    data = value.encode() if isinstance(value, str) else value
    return "sha256:" + hashlib.sha256(data).hexdigest()[:32]


def ledger_args(msg: Message) -> dict[str, str]:
    """Identifier args in clear, text args as digests, secrets never."""
    out: dict[str, str] = {}
    _flatten(msg, "", out)
    return out


# Per message type, what to do with each field: its options are read once, not per call.
_SKIP, _STRUCT, _TEXT, _MAP, _NESTED, _COUNT, _LIST, _BOOL, _PLAIN = range(9)
_PLANS: dict[str, dict[str, int]] = {}


def _plan(desc: Any) -> dict[str, int]:
    plan = _PLANS.get(desc.full_name)
    if plan is not None:
        return plan
    plan = {}
    for f in desc.fields:
        opts = f.GetOptions()
        fo = opts.Extensions[options_pb2.field] if opts.HasExtension(options_pb2.field) else None
        if fo is not None and fo.secret:
            kind = _SKIP
        elif f.message_type is not None and f.message_type.full_name in (
            "google.protobuf.Struct",
            "google.protobuf.Value",
            "google.protobuf.ListValue",
        ):
            kind = _STRUCT
        elif fo is not None and fo.text:
            kind = _TEXT
        elif f.message_type is not None and f.message_type.GetOptions().map_entry:
            kind = _MAP
        elif f.message_type is not None:
            kind = _COUNT if f.is_repeated else _NESTED
        elif f.is_repeated:
            kind = _LIST
        elif f.type == f.TYPE_BOOL:
            kind = _BOOL
        else:
            kind = _PLAIN
        plan[f.name] = kind
    _PLANS[desc.full_name] = plan
    return plan


def _flatten(msg: Message, prefix: str, out: dict[str, str]) -> None:
    plan = _plan(msg.DESCRIPTOR)
    for f, value in msg.ListFields():
        kind = plan[f.name]
        if kind == _SKIP:
            continue
        name = prefix + f.name
        if kind == _PLAIN:
            out[name] = str(value)
        elif kind == _BOOL:
            out[name] = "true" if value else "false"
        elif kind == _STRUCT:
            from google.protobuf.json_format import MessageToDict

            out[name] = digest(json.dumps(MessageToDict(value), sort_keys=True, separators=(",", ":")))
        elif kind == _TEXT:
            out[name] = digest(json.dumps(list(value)) if f.is_repeated else str(value))
        elif kind == _MAP:
            out[name] = json.dumps(dict(value), sort_keys=True)
        elif kind == _NESTED:
            _flatten(value, name + ".", out)
        elif kind == _COUNT:
            out[name] = f"[{len(value)} items]"
        else:
            out[name] = json.dumps([v if isinstance(v, (str, int, float, bool)) else str(v) for v in value])


# Per message type, the field whose length counts an answer's items ("" for none): found once.
_HITS_FIELD: dict[str, str] = {}


def out_hits_of(msg: Message | None) -> int:
    """Items an answer returned: the length of its first repeated field, else 1 (0 for none)."""
    if msg is None:
        return 0
    desc = msg.DESCRIPTOR
    name = _HITS_FIELD.get(desc.full_name)
    if name is None:
        name = next((f.name for f in desc.fields if f.is_repeated and not (f.message_type and f.message_type.GetOptions().map_entry)), "")
        _HITS_FIELD[desc.full_name] = name
    return len(getattr(msg, name)) if name else 1


#: Rows held while the store or bus cannot take them; past it the oldest tenth is dropped.
MAX_BUFFER = 100_000


class Ledger:
    """Paced like the task projector's inserts, since a chDB insert has a fixed cost (about 5 ms
    of CPU, and about 10 us a row past it): at most one batch per `flush_interval` unless
    `batch_max` rows fill first, so a busy second makes a few big batches, and the first row
    after a quiet interval goes at once. A row is readable at most `flush_interval` (plus its
    insert) after its call, whatever the rate."""

    def __init__(
        self, store: Store, bus: Bus | None, flush_interval: float, batch_max: int, consume: bool = True, direct: bool | None = None
    ) -> None:
        self.store = store
        self.bus = bus
        # Straight into the store: embedded mode (its engine is this process's), or no bus.
        self.direct = is_embedded(store) if direct is None else direct
        #: At most one batch per flush interval unless `batch_max` rows fill first (loom_core.batching).
        self.pacer = Pacer(flush_interval)
        self.batch_max = batch_max
        self.consume = consume
        self._buf: list[LedgerRow] = []
        self._wake = asyncio.Event()  # the first row after the flusher went idle
        self._idle = False  # the flusher waits for a first row
        self._loop_task: asyncio.Task[None] | None = None
        self._stopping = False
        self.observers: list[Callable[[LedgerRow], None]] = []
        self._consuming: Any = None

    async def start(self) -> None:
        if self.bus is not None and not self.direct:
            await LAYOUT.declare(self.bus)
            if self.consume:
                # A durable pull consumer on the runtime's FastStream broker, shared by every
                # replica: each batch is inserted once by whichever replica fetches it.
                self._consuming = await self.bus.consume(LAYOUT.consumer(DURABLE), self._write_batch)
        self._loop_task = asyncio.create_task(self._flush_loop())

    def record(self, row: LedgerRow) -> None:
        buf = self._buf
        if len(buf) >= MAX_BUFFER:
            del buf[: MAX_BUFFER // 10]
            log.warning("ledger: buffer full (the store is unreachable), oldest rows dropped")
        buf.append(row)
        # Observers (the policy gate's recent-history window) see each row as it is recorded,
        # not when its batch lands in the table; one that fails never fails the call.
        for observe in self.observers:
            try:
                observe(row)
            except Exception:  # noqa: BLE001 - an observer is another plane's code; it never fails the call
                log.warning("ledger: an observer failed")
        # The flusher wakes for the first row after it went idle (to write it now, or at the end
        # of the interval) and for a full batch; other rows only append.
        if self._idle:
            self._wake.set()
        if len(buf) >= self.batch_max:
            self.pacer.hurry()

    @property
    def flush_interval(self) -> float:
        return self.pacer.interval

    @flush_interval.setter
    def flush_interval(self, seconds: float) -> None:
        self.pacer.interval = seconds

    def hurry(self) -> None:
        """The rows held go now instead of at the end of the interval."""
        self.pacer.hurry()

    async def flush(self) -> None:
        """Write what is buffered now (used on shutdown and by tests). A batch that fails goes
        back to the front of the buffer, ahead of rows recorded since, for the next write."""
        rows, self._buf = self._buf, []
        if not rows:
            return
        self.pacer.mark()
        try:
            await self._ship(rows)
        except BaseException:  # a failure or a cancellation alike: the rows go back, then it propagates
            self._buf[:0] = rows
            raise

    async def stop(self) -> None:
        """The flusher finishes the write it is in (never cancelled inside one: a chDB insert
        runs on in its thread, so a cancelled batch would be written twice), then what remains
        is written."""
        self._stopping = True
        self._wake.set()
        self.pacer.hurry()
        if self._loop_task is not None:
            await asyncio.gather(self._loop_task, return_exceptions=True)
            self._loop_task = None
        try:
            await self.flush()
        except Exception:  # noqa: BLE001 - best effort on shutdown
            log.warning("ledger: final flush failed; %d rows not written", len(self._buf))
        if self._consuming is not None:
            await self._consuming.stop()
            self._consuming = None

    async def _flush_loop(self) -> None:
        while not self._stopping:
            if not self._buf:
                self._idle = True
                await self._wake.wait()
                self._idle = False
            self._wake.clear()
            # Early only for a full batch or a stop (both hurry the pacer).
            await self.pacer.turn(at_once=len(self._buf) >= self.batch_max or self._stopping)
            try:
                await self.flush()
            except Exception:  # noqa: BLE001 - keep the loop alive; the batch was put back and is retried an interval later
                log.warning("ledger: flush failed")

    async def _ship(self, rows: list[LedgerRow]) -> None:
        batch_id = uuid.uuid4().hex
        if not self.direct and self.bus is not None and self.bus.nc.is_connected:
            try:
                # One row a line, as the table takes it (JSONEachRow; orjson writes no raw
                # newline), the batch id in the header: the consumer inserts the bytes as they are.
                await self.bus.js.publish(SUBJECT, b"\n".join(map(fastjson.dumps, rows)), headers={"Nats-Msg-Id": batch_id})
                return
            except Exception:  # noqa: BLE001 - fall back to a direct write
                log.warning("ledger: publish failed; writing directly")
        if self.direct:
            # Nothing redelivers a direct batch, and a failed insert writes nothing: no
            # deduplication token, which costs a chDB insert about 4 ms of CPU.
            await self.store.insert(TABLE, rows)
        else:
            await self.store.insert(TABLE, rows, dedup_token=batch_id)

    async def _write_batch(self, msg: Any) -> None:
        """The ledger-writer consumer: one published batch into the table, its batch id as the
        insert's deduplication token, so a redelivered batch changes nothing. Raising makes the
        consumer's ack policy (NACK_ON_ERROR) redeliver it."""
        await insert_batch(self.store, msg.body, msg.headers["Nats-Msg-Id"])


async def insert_batch(store: Store, body: bytes, batch_id: str) -> None:
    """One published batch into the table, as its JSON lines. A batch the previous release
    published (`{"id": ..., "rows": [...]}`) may still wait in the stream after an upgrade: its
    rows are taken from the JSON."""
    if body.startswith(b'{"id":'):
        await store.insert(TABLE, fastjson.loads(body)["rows"], dedup_token=batch_id)
    else:
        await store.insert_json_lines(TABLE, body, dedup_token=batch_id)


def is_embedded(store: Store) -> bool:
    """The store's engine is this process's (chDB): its batches go straight in."""
    try:
        from ..store.embedded import EmbeddedStore
    except ImportError:  # pragma: no cover - chDB not installed: a server store
        return False
    return isinstance(store, EmbeddedStore)


def ledger_row(
    *,
    org: str,
    namespace: str,
    subject: str,
    agent: str,
    user: str,
    session: str,
    op: str,
    transport: str,
    run_id: str,
    consumer: str,
    ok: bool,
    error_code: str,
    latency_ms: float,
    args: dict[str, str],
    out_hits: int,
    token_id: str,
    request_id: str,
    write_shaped: bool,
    ts: float | None = None,
) -> LedgerRow:
    caller: LedgerCaller = {
        "org": org,
        "namespace": namespace,
        "subject": subject,
        "agent": agent,
        "user": user,
        "session": session,
        "transport": transport,
        "run_id": run_id,
        "consumer": consumer,
        "token_id": token_id,
    }
    return call_row(caller, op, ok, error_code, latency_ms, args, out_hits, request_id, write_shaped, ts)


def call_row(
    caller: LedgerCaller,
    op: str,
    ok: bool,
    error_code: str,
    latency_ms: float,
    args: dict[str, str],
    out_hits: int,
    request_id: str,
    write_shaped: bool,
    ts: float | None = None,
) -> LedgerRow:
    """`ledger_row` with the caller's columns (org, namespace, subject, agent, user, session,
    transport, run_id, consumer, token_id) as one mapping: the chain's path, which builds them
    once per call, pays no keyword expansion (a third of the row's cost). The row is a copy of
    that mapping with the call's columns set on it, which costs less than unpacking it into a
    new literal; every row made here names its columns in the same order (the store's insert
    sends such rows a column at a time)."""
    row = cast(LedgerRow, caller.copy())  # the call's columns are set next
    row["ts"] = _ch_time(ts if ts is not None else time.time())
    row["op"] = op
    row["ok"] = ok
    row["error_code"] = error_code
    row["latency_ms"] = latency_ms
    row["args"] = args
    row["out_hits"] = out_hits
    row["request_id"] = request_id
    row["write_shaped"] = write_shaped
    return row

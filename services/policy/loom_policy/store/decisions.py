"""policy_decisions: one row per gated call a rule applied to (shadow and enforce), written in
batches in the background so the gate never waits on the store.

Durable the way the ledger is: in a cluster each batch is published to the
LOOM_POLICY_DECISIONS work-queue stream (Nats-Msg-Id = batch id), and the plane's consumer
(consumers/decision_batches.py) inserts it with the batch id as the deduplication token. A
process that dies after a publish loses none of that batch's rows; only rows still in the
buffer (at most one flush interval) are lost with it. Embedded (the store's engine is this
process's, as the ledger's rule: core/loom_core/chain/ledger.py) or with no bus, a flush goes
straight in as one insert, without a deduplication token (nothing redelivers it): a chDB insert
has a fixed cost of several ms of CPU, and a flush of rows with ten rules' outcomes each took
two or more (JetStream's max_payload), each with the token's cost, besides the stream's round
trip and the consumer's delivery on the event loop. The consumer still runs there: it inserts
what other processes publish.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from typing import TypedDict, TypeVar

import orjson
from loom_core import fastjson
from loom_core.bus import Bus
from loom_core.chain.ledger import is_embedded
from loom_core.store import Store, Where, query_as
from loom_core.store.caller import CallerRow

from ..bus import DECISIONS_SUBJECT
from ..domain.timeutil import us_to_ch

log = logging.getLogger(__name__)

R = TypeVar("R")

TABLE = "{db}.policy_decisions"
MAX_BUFFER = 100_000
# Room in a message for the batch's id and the JSON around its rows.
PAYLOAD_HEADROOM = 1024
# Rows a flush encodes in one event-loop step (~1 us each) before it lets calls in.
ENCODE_SLICE = 64


class DecisionCall(CallerRow):
    """The call a policy_decisions row is about."""

    op: str
    transport: str
    request_id: str


class DecisionRow(DecisionCall):
    """A policy_decisions row as the decision writer encodes it."""

    decision: str
    enforced: bool
    mode: str
    write_shaped: bool
    determining_rules: tuple[str, ...]
    rule_names: tuple[str, ...]
    latency_ms: float
    ts: str
    # JSON text: the evaluation errors; each rule's outcome in render.rules_stored's form, already
    # a JSON string (spliced into the row as it is, not escaped again).
    errors: str
    rules: orjson.Fragment


# A decision row as the gate records it, in encode_row's order: `ts` as epoch microseconds and
# `rules` as render.rules_stored's JSON string. Strings, numbers and tuples of strings only: the
# collector stops tracking it at its first young collection, so rows waiting for the flush never
# reach the oldest generation.
DecisionAtoms = tuple[
    str, str, str, str, str, str, str, str, str, str, bool, str, bool, tuple[str, ...], tuple[str, ...], float, int, str, str
]


def encode_row(a: DecisionAtoms) -> bytes:
    """A recorded row as the table's JSON line (~1 us: its largest value, the rules' outcomes,
    is already JSON)."""
    row: DecisionRow = {
        "org": a[0],
        "namespace": a[1],
        "subject": a[2],
        "agent": a[3],
        "user": a[4],
        "session": a[5],
        "op": a[6],
        "transport": a[7],
        "request_id": a[8],
        "decision": a[9],
        "enforced": a[10],
        "mode": a[11],
        "write_shaped": a[12],
        "determining_rules": a[13],
        "rule_names": a[14],
        "latency_ms": a[15],
        "ts": us_to_ch(a[16]),
        "errors": a[17],
        "rules": orjson.Fragment(a[18]),
    }
    return fastjson.dumps(row)


class RecordedDecision(TypedDict):
    """A policy_decisions row as query_decisions reads it (`ts` as text)."""

    ts: str
    subject: str
    agent: str
    user: str
    session: str
    op: str
    request_id: str
    decision: str
    enforced: bool
    mode: str
    write_shaped: bool
    determining_rules: list[str]
    errors: str
    rules: str
    latency_ms: float


class RecordedWidening(TypedDict):
    """A policy_audit row as query_widened reads it."""

    ts: str
    subject: str
    agent: str
    request_id: str
    rule: str
    change: str
    reasons: list[str]
    # The rule before and after the change as JSON text ("" for none).
    before: str
    after: str


class AuditRow(RecordedWidening):
    """A policy_audit row as written: a rule change that widened what agents may do."""

    org: str
    namespace: str
    kind: str


class DecisionWriter:
    def __init__(
        self, store: Store, flush_interval: float, batch_max: int = 1000, bus: Bus | None = None, direct: bool | None = None
    ) -> None:
        self.store = store
        self.bus = bus
        # Straight into the store: embedded (its engine is this process's), or no bus.
        self.direct = bus is None or (is_embedded(store) if direct is None else direct)
        self.flush_interval = flush_interval
        self.batch_max = batch_max
        self._buf: list[DecisionAtoms] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    def record(self, atoms: DecisionAtoms) -> None:
        """Buffer a row as it came (the flush builds and encodes it, off the call's path)."""
        if len(self._buf) >= MAX_BUFFER:
            # The store is down for long: drop the oldest rather than grow without bound.
            del self._buf[: len(self._buf) // 10]
            log.warning("policy decisions: buffer full, oldest rows dropped")
        self._buf.append(atoms)
        if len(self._buf) >= self.batch_max:
            self._wake.set()

    async def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def flush(self) -> None:
        rows, self._buf = self._buf, []
        sent = 0
        try:
            lines: list[bytes] = []
            for start in range(0, len(rows), ENCODE_SLICE):
                if start:
                    await asyncio.sleep(0)  # calls in flight go between slices
                lines += map(encode_row, rows[start : start + ENCODE_SLICE])
            for batch in self._batches(lines):
                await self._ship(batch)
                sent += len(batch)
        except BaseException:
            # a failed publish or insert, or a cancellation: the rows not yet shipped go back
            # to the front of the buffer for the next pass or stop's last flush
            self._buf[:0] = rows[sent:]
            raise

    def _batches(self, rows: list[bytes]) -> list[list[bytes]]:
        """Rows in batches one message each can carry: a JetStream message is at most the
        server's max_payload (1 MB by default), and a batch of many rows with their per-rule JSON
        can be larger (1,000 rows of ten rules are ~2.5 MB): published whole, it was refused on
        every pass and never landed. Straight into the store: one batch."""
        if not rows or self.direct or self.bus is None:
            return [rows] if rows else []
        limit = int(self.bus.nc.max_payload or 1 << 20) - PAYLOAD_HEADROOM
        batches: list[list[bytes]] = []
        batch: list[bytes] = []
        size = 0
        for data in rows:
            if batch and size + len(data) + 1 > limit:
                batches.append(batch)
                batch, size = [], 0
            batch.append(data)
            size += len(data) + 1
        if batch:
            batches.append(batch)
        return batches

    async def _ship(self, rows: list[bytes]) -> None:
        if self.direct:
            # Nothing redelivers a direct batch, and a failed insert writes nothing: no token. The
            # lines go as they are, joined once, into the statement.
            await self.store.insert_json_lines(TABLE, rows)
            return
        # One row a line, as the table takes it (JSONEachRow; orjson writes no raw newline).
        lines = b"\n".join(rows)
        # The batch id in the header: the consumer inserts the message's bytes as they are.
        batch_id = uuid.uuid4().hex
        if self.bus is not None and (len(lines) <= self.bus.nc.max_payload or self.store is None):
            await self.bus.js.publish(DECISIONS_SUBJECT, lines, headers={"Nats-Msg-Id": batch_id})
            return
        # A lone row past what a message carries (rules with very large values): straight in.
        await self.store.insert_json_lines(TABLE, lines, dedup_token=batch_id)

    async def stop(self) -> None:
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        try:
            await self.flush()
        except Exception:  # noqa: BLE001 - best effort on shutdown
            log.warning("policy decisions: final flush failed")

    async def _loop(self) -> None:
        while not self._stopping:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=self.flush_interval)
            self._wake.clear()
            try:
                await self.flush()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - keep the loop alive; the rows are retried an interval later
                log.warning("policy decisions: flush failed")
                await asyncio.sleep(self.flush_interval)


async def insert_batch(store: Store, body: bytes, batch_id: str) -> None:
    """One published batch into the table; a batch inserted twice (a redelivery) lands once.
    A batch the previous release published (`{"id": ..., "rows": [...]}`) may still wait in the
    stream after an upgrade: its rows are taken from the JSON."""
    if body.startswith(b'{"id":'):
        await store.insert(TABLE, fastjson.loads(body)["rows"], dedup_token=batch_id)
    else:
        await store.insert_json_lines(TABLE, body, dedup_token=batch_id)


async def query_decisions(
    store: Store, org: str, namespace: str, *, decision: str, agent: str, op: str, rule: str, since_us: int, limit: int
) -> list[RecordedDecision]:
    where = _audited(org, namespace, agent, since_us, "d")
    if decision:
        where.add("decision = {decision:String}", decision=decision)
    if op:
        where.add("op = {op:String}", op=op)
    if rule:
        where.add("has(rule_names, {rule:String})", rule=rule)
    columns = "subject, agent, user, session, op, request_id, decision, enforced, mode, write_shaped, determining_rules, errors, rules, latency_ms"
    return await _newest(store, RecordedDecision, columns, "policy_decisions", "d", where, limit)


def _audited(org: str, namespace: str, agent: str, since_us: int, alias: str) -> Where:
    """A namespace's rows, of one agent (its label, else its subject) and since a time when named.
    `alias` qualifies the time column: a bare `ts` in WHERE would be the select list's
    `toString(ts) AS ts` (ClickHouse resolves aliases there), and a String compared with a
    DateTime64 is an error."""
    where = Where("org = {org:String}", "namespace = {ns:String}", org=org, ns=namespace)
    if agent:
        where.add("(agent = {agent:String} OR (agent = '' AND subject = {agent:String}))", agent=agent)
    if since_us:
        where.add(f"{alias}.ts >= fromUnixTimestamp64Micro({{since:Int64}})", since=since_us)
    return where


async def _newest(store: Store, row: type[R], columns: str, table: str, alias: str, where: Where, limit: int) -> list[R]:
    """`where`'s rows of `table` (as `alias`, the one `_audited` was given), newest first, at most
    `limit`: their time as text, then `columns`."""
    sql = (
        f"SELECT toString(ts) AS ts, {columns} FROM {{db}}.{table} AS {alias} WHERE {where} ORDER BY {alias}.ts DESC LIMIT {{limit:UInt32}}"
    )
    return await query_as(store, row, sql, where.bind(limit=limit))


async def write_audit(store: Store, row: AuditRow) -> None:
    await store.insert("{db}.policy_audit", [row])


#: The op whose change a policy_audit row records.
AUDIT_OPS = {"policy.set": "set", "policy.delete": "delete"}


async def query_widened(
    store: Store, org: str, namespace: str, *, agent: str, op: str, rule: str, since_us: int, limit: int
) -> list[RecordedWidening]:
    """The namespace's policy.widened audit rows, newest first, under policy.decisions' filters."""
    where = _audited(org, namespace, agent, since_us, "a").add("kind = 'policy.widened'")
    if op:
        where.add("change = {change:String}", change=AUDIT_OPS.get(op, "(none)"))
    if rule:
        where.add("rule = {rule:String}", rule=rule)
    return await _newest(
        store, RecordedWidening, "subject, agent, request_id, rule, change, reasons, before, after", "policy_audit", "a", where, limit
    )

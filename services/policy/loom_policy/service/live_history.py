"""A replica's live history: what the gate evaluates rules over, kept in memory.

The ledger table alone cannot answer a gate: rows land in batches (the flush interval plus
the JetStream consumer), and a point query costs milliseconds. So each replica keeps:

- a ring of every ledger row and exposure it has seen in the last RING_SECONDS, fed by the
  ledger's observer hook (this replica's calls, at the instant each is recorded) and by the
  feed (`loom.policy.feed` over NATS: every other replica's rows, batched every few ms);
- for each namespace that has rules, a Window (domain.history) shaped by those rules: built
  once from the table (newest first, bounded) merged with the ring, then kept current from
  the same two sources, and trimmed to the rules' longest window.

What a rule sees, then: this replica's own calls at once (a call is recorded when it ends,
before its answer is sent, so the next call of the same agent sees it, wherever it lands, as
soon as the feed has carried it: typically a few ms); other replicas' calls after the feed's
batching delay plus transit. If the NATS connection drops, feed messages may be lost, so on
reconnect every window is rebuilt from the table (which holds every row that has landed) and
the ring. Events older than the ring are always in the table unless the ledger is more than
RING_SECONDS behind.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any, TypeVar

import orjson
from loom_core.aio import every
from loom_core.bus import Bus
from loom_core.chain.ledger import LedgerRow
from loom_core.exposures import live_rows as load_live_rows
from loom_core.store import Store
from nats.aio.client import Client

from ..bus import FEED_SUBJECT
from ..domain.history import Event, Exposure, Shape, Window
from ..domain.timeutil import US, ch_to_us
from ..store import history as hist

log = logging.getLogger(__name__)

RING_SECONDS = 120
RING_MAX = 200_000
FEED_DELAY = 0.002
FEED_BATCH = 500
BACKFILL_LIMIT = 1_000_000
HOUSEKEEPING_SECONDS = 2.0
NsKey = tuple[str, str]
# The ring's rows hold only atoms, the call's args flattened into the row, so the first young
# collection stops tracking them and they never reach the oldest generation, whose every full
# collection would walk them: a tuple stays tracked while it holds a dict, or (depending on the
# collector's list order) a tuple still tracked.
# (org, namespace, ts, subject, agent, user, session, op, ok, request_id, name1, value1, ...)
RingEvent = tuple[Any, ...]
RingExposure = tuple[str, str, int, str, str, str, str, str, str, str, str]
_Item = TypeVar("_Item", Event, Exposure)
_Row = TypeVar("_Row", RingEvent, RingExposure)


def now_us() -> int:
    return time.time_ns() // 1000


@dataclass(slots=True)
class _Slot:
    # The shape being built (or built): the window's own shape is window.shape.
    shape: Shape
    window: Window | None = None
    building: asyncio.Task[Window] | None = None
    # The last shape found covered by `window` (compared by identity: a namespace's rules keep one Shape).
    covered: tuple[Window, Shape] | None = None


def event_from_row(row: Mapping[str, Any]) -> Event:
    """A ledger row (as Ledger.record sees it) -> Event."""
    return Event(
        ts=ch_to_us(str(row["ts"])),
        subject=str(row.get("subject", "")),
        agent=str(row.get("agent", "")),
        user=str(row.get("user", "")),
        session=str(row.get("session", "")),
        op=str(row.get("op", "")),
        ok=bool(row.get("ok", True)),
        args=dict(row.get("args") or {}),
        request_id=str(row.get("request_id", "")),
    )


def exposure_from_row(row: Mapping[str, Any]) -> Exposure:
    ts = row["ts"]
    return Exposure(
        ts=int(ts) if isinstance(ts, int) else ch_to_us(str(ts)),
        subject=str(row.get("subject", "")),
        agent=str(row.get("agent", "")),
        user=str(row.get("user", "")),
        session=str(row.get("session", "")),
        op=str(row.get("op", "")),
        kind=str(row.get("kind", "memory")),
        key=str(row.get("key", "")),
        request_id=str(row.get("request_id", "")),
    )


def event_from_table(r: Mapping[str, Any]) -> Event:
    return Event(
        int(r["t"]), r["subject"], r["agent"], r["user"], r["session"], r["op"], bool(r["ok"]), dict(r["args"] or {}), r["request_id"]
    )


def exposure_from_table(r: Mapping[str, Any]) -> Exposure:
    return Exposure(int(r["t"]), r["subject"], r["agent"], r["user"], r["session"], r["op"], r["kind"], r["key"], r["request_id"])


def _event_dedup(r: RingEvent) -> tuple[str, str, int, str]:
    return (r[9], r[7], r[2], r[3])  # as Event.dedup


def event_from_ring(r: RingEvent) -> Event:
    return Event(r[2], r[3], r[4], r[5], r[6], r[7], r[8], dict(zip(r[10::2], r[11::2], strict=True)), r[9])


def _exposure_dedup(r: RingExposure) -> tuple[str, str, int, str, str]:
    return (r[10], r[7], r[2], r[8], r[9])  # as Exposure.dedup


def exposure_from_ring(r: RingExposure) -> Exposure:
    return Exposure(*r[2:])


def _ring_rows(ring: Iterable[_Row], org: str, ns: str, since: int, subject: str | None) -> Iterator[_Row]:
    """The ring's rows of a namespace (of one subject when named) since `since`."""
    for r in ring:
        if r[0] == org and r[1] == ns and (subject is None or r[3] == subject) and r[2] >= since:
            yield r


def _add_merged(
    add: Callable[[_Item], None],
    table: Iterable[_Item],
    ring: Iterable[_Row],
    ring_dedup: Callable[[_Row], Hashable],
    from_ring: Callable[[_Row], _Item],
) -> None:
    """Adds the table's items, then the ring's rows the table does not hold: a row is in the
    ring from the instant it is recorded and lands in the table later, so both may hold it."""
    seen: set[Hashable] = set()
    for item in table:
        seen.add(item.dedup)
        add(item)
    for r in ring:
        if ring_dedup(r) not in seen:
            add(from_ring(r))


def feed_payload(origin: str, events: list[list[Any]], exposures: list[list[Any]]) -> bytes:
    """A feed batch: the sending replica's origin first, then its rows as lists (orjson: a
    tenth of stdlib json's CPU, and a batch is one call's row when calls come one at a time)."""
    return orjson.dumps({"o": origin, "e": events, "x": exposures})


class LiveHistory:
    def __init__(
        self, store: Store, bus: Bus | None, *, cap: int, live_rows_ttl: float, on_event: Callable[[str, str, str], object] | None = None
    ) -> None:
        self.store = store
        # Told (org, namespace, request_id) of every event taken, local or fed: it settles the
        # call's reservation (domain.reservations) in the same step the event starts counting.
        self.on_event = on_event
        self.bus = bus
        self.cap = cap
        self.live_rows_ttl = live_rows_ttl
        self.origin = uuid.uuid4().hex
        # How this replica's own feed batches begin (orjson keeps the payload's key order):
        # its echo is dropped on these bytes, unparsed.
        self._echo_prefix = feed_payload(self.origin, [], [])[: -len(b'"e":[],"x":[]}')]
        self._ring: deque[RingEvent] = deque()
        self._ring_x: deque[RingExposure] = deque()
        self._slots: dict[NsKey, _Slot] = {}
        self._out_e: list[list[Any]] = []
        self._out_x: list[list[Any]] = []
        self._flush_handle: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None
        self._reconnects = 0
        # The connection the feed travels on both ways (`Bus.quiet`: the server does not echo a
        # replica's own batches back to it), set by `start`.
        self._feed_nc: Client | None = None
        self._live_at: dict[NsKey, float] = {}
        self._pending: set[asyncio.Task[Any]] = set()
        self.feed_received = 0
        self.echoes_received = 0

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        # The feed consumer (consumers/history_feed.py) calls `fed` with other replicas' rows.
        if self.bus is not None:
            self._feed_nc = await self.bus.quiet()
            self._reconnects = int(self._feed_nc.stats.get("reconnects", 0))
        self._task = asyncio.create_task(every(HOUSEKEEPING_SECONDS, self._upkeep, failed="policy history: upkeep failed", logger=log))

    async def stop(self) -> None:
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        tasks = [t for t in (self._task, *self._pending) if t is not None]
        tasks += [s.building for s in self._slots.values() if s.building is not None]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # -- sources -----------------------------------------------------------------------------

    def observe_ledger_row(self, row: LedgerRow) -> None:
        """Ledger observer: this replica's call, at the instant it is recorded."""
        ev = event_from_row(row)
        org, ns = str(row.get("org", "")), str(row.get("namespace", ""))
        self._take_event(org, ns, ev)
        if self.bus is not None:
            self._out_e.append([ev.ts, org, ns, ev.subject, ev.agent, ev.user, ev.session, ev.op, ev.ok, ev.args, ev.request_id])
            self._schedule_flush()

    def observe_exposures(self, rows: Sequence[Mapping[str, Any]]) -> None:
        for row in rows:
            x = exposure_from_row(row)
            org, ns = str(row.get("org", "")), str(row.get("namespace", ""))
            self._take_exposure(org, ns, x)
            if self.bus is not None:
                self._out_x.append([x.ts, org, ns, x.subject, x.agent, x.user, x.session, x.op, x.kind, x.key, x.request_id])
        if rows and self.bus is not None:
            self._schedule_flush()

    def _take_event(self, org: str, ns: str, ev: Event) -> None:
        if self.on_event is not None and ev.request_id:
            self.on_event(org, ns, ev.request_id)
        row: RingEvent = (org, ns, ev.ts, ev.subject, ev.agent, ev.user, ev.session, ev.op, ev.ok, ev.request_id)
        if ev.args:
            row += tuple(chain.from_iterable(ev.args.items()))
        self._ring.append(row)
        if len(self._ring) > RING_MAX:
            self._ring.popleft()
        slot = self._slots.get((org, ns))
        if slot is not None and slot.window is not None:
            slot.window.add_event(ev)

    def _take_exposure(self, org: str, ns: str, x: Exposure) -> None:
        self._ring_x.append((org, ns, x.ts, x.subject, x.agent, x.user, x.session, x.op, x.kind, x.key, x.request_id))
        if len(self._ring_x) > RING_MAX:
            self._ring_x.popleft()
        slot = self._slots.get((org, ns))
        if slot is not None and slot.window is not None:
            slot.window.add_exposure(x)

    # -- the feed between replicas -----------------------------------------------------------

    def _schedule_flush(self) -> None:
        if self._flush_handle is None:
            loop = asyncio.get_running_loop()
            self._flush_handle = loop.call_later(FEED_DELAY, self._flush_feed)

    def _flush_feed(self) -> None:
        self._flush_handle = None
        events, self._out_e = self._out_e, []
        exposures, self._out_x = self._out_x, []
        nc = self._feed_nc
        if nc is None or not nc.is_connected:
            return
        for i in range(0, max(len(events), len(exposures)), FEED_BATCH):
            task = asyncio.ensure_future(
                self._publish(nc, feed_payload(self.origin, events[i : i + FEED_BATCH], exposures[i : i + FEED_BATCH]))
            )
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)

    async def _publish(self, nc: Client, data: bytes) -> None:
        try:
            await nc.publish(FEED_SUBJECT, data)
        except Exception:  # noqa: BLE001 - a lost batch is caught up on the next rebuild
            log.warning("policy feed: publish failed")

    def fed(self, body: bytes) -> None:
        """A batch of another replica's ledger rows and exposures (the feed)."""
        if body.startswith(self._echo_prefix):
            self.echoes_received += 1  # none on `Bus.quiet`; kept for a feed read with echo
            return
        try:
            d = orjson.loads(body)
            for e in d.get("e", ()):
                self._take_event(e[1], e[2], Event(int(e[0]), e[3], e[4], e[5], e[6], e[7], bool(e[8]), e[9] or {}, e[10]))
            for x in d.get("x", ()):
                self._take_exposure(x[1], x[2], Exposure(int(x[0]), x[3], x[4], x[5], x[6], x[7], x[8], x[9], x[10]))
            self.feed_received += 1
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            log.warning("policy feed: bad message")

    # -- windows -----------------------------------------------------------------------------

    def cached_window(self, org: str, ns: str, shape: Shape) -> Window | None:
        slot = self._slots.get((org, ns))
        if slot is None or slot.window is None:
            return None
        w = slot.window
        covered = slot.covered
        if covered is not None and covered[0] is w and covered[1] is shape:
            return w
        if w.shape.covers(shape):
            slot.covered = (w, shape)
            return w
        return None

    async def window(self, org: str, ns: str, shape: Shape) -> Window:
        """The namespace's window for rules of this shape (built from the table if needed)."""
        w = self.cached_window(org, ns, shape)
        if w is not None:
            return w
        return await self._ensure((org, ns), shape)

    async def one_off(self, org: str, ns: str, subject: str, shape: Shape) -> Window:
        """One caller's history for rules this replica does not keep a window for (rules
        passed to policy.check): the table, merged with the ring of rows not landed yet. Not
        kept, so dry-runs of ad hoc rules never grow the live windows."""
        now = now_us()
        since = now - shape.retention_us - US
        patterns = hist.like_patterns(shape.op_globs)
        rows = await hist.events(self.store, org, ns, since_us=since, patterns=patterns, subject=subject, limit=self.cap)
        xrows = await hist.exposures(self.store, org, ns, since_us=since, kinds=shape.exposure_kinds, subject=subject, limit=self.cap)
        live = await load_live_rows(self.store, org, ns) if shape.exposure_kinds else {}
        return self._merged(org, ns, shape, since, rows, xrows, live, self.cap, subject)

    def rules_changed(self, key: NsKey, shape: Shape) -> None:
        """A namespace's rules changed: drop its window when it has none, else rebuild it in
        the background when the new rules need more than it keeps."""
        if shape.empty:
            slot = self._slots.pop(key, None)
            if slot is not None and slot.building is not None:
                slot.building.cancel()
            return
        slot = self._slots.get(key)
        if slot is None or slot.window is None or not slot.window.shape.covers(shape):
            task = asyncio.ensure_future(self._ensure(key, shape))
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)
            task.add_done_callback(lambda t: t.cancelled() or t.exception())

    async def _ensure(self, key: NsKey, shape: Shape) -> Window:
        slot = self._slots.get(key)
        if slot is not None and slot.building is not None and slot.shape.covers(shape):
            return await asyncio.shield(slot.building)
        if slot is not None and slot.window is not None and slot.window.shape.covers(shape):
            return slot.window
        if slot is None:
            slot = self._slots[key] = _Slot(shape)
        else:
            # Keep serving the current window's rules while a wider one builds.
            slot.shape = shape if slot.window is None else slot.window.shape.union(shape)
        build = asyncio.ensure_future(self._build(key, slot.shape))
        slot.building = build
        try:
            return await asyncio.shield(build)
        finally:
            if slot.building is build and build.done():
                slot.building = None

    async def _build(self, key: NsKey, shape: Shape) -> Window:
        org, ns = key
        now = now_us()
        since = now - shape.retention_us - US
        rows = await hist.events(self.store, org, ns, since_us=since, patterns=hist.like_patterns(shape.op_globs), limit=BACKFILL_LIMIT)
        xrows = await hist.exposures(self.store, org, ns, since_us=since, kinds=shape.exposure_kinds, limit=BACKFILL_LIMIT)
        live = await load_live_rows(self.store, org, ns) if shape.exposure_kinds else {}
        # From here on nothing awaits, so no row can slip between the table read and the ring.
        w = self._merged(org, ns, shape, since, rows, xrows, live, BACKFILL_LIMIT)
        self._live_at[key] = time.monotonic()
        slot = self._slots.get(key)
        if slot is not None and slot.shape == shape:
            slot.window = w
        return w

    def _merged(
        self,
        org: str,
        ns: str,
        shape: Shape,
        since: int,
        rows: list[dict[str, Any]],
        xrows: list[dict[str, Any]],
        live: dict[str, int],
        limit: int,
        subject: str | None = None,
    ) -> Window:
        """A window of the table's rows (`limit` each at most, newest first) and the ring's rows
        not landed yet, since `since` (one subject's when named). A read cut at `limit` holds
        nothing before its oldest row: the window's floor rises past it."""
        w = Window(shape=shape, floor_us=since, cap=self.cap)
        for batch in (rows, xrows):
            if len(batch) >= limit:
                w.floor_us = max(w.floor_us, int(batch[-1]["t"]) + 1)
        ring, ring_x = _ring_rows(self._ring, org, ns, since, subject), _ring_rows(self._ring_x, org, ns, since, subject)
        _add_merged(w.add_event, map(event_from_table, reversed(rows)), ring, _event_dedup, event_from_ring)
        _add_merged(w.add_exposure, map(exposure_from_table, reversed(xrows)), ring_x, _exposure_dedup, exposure_from_ring)
        w.live_rows = live
        return w

    # -- upkeep ------------------------------------------------------------------------------

    async def _upkeep(self) -> None:
        now = now_us()
        ring_cut = now - RING_SECONDS * US
        while self._ring and self._ring[0][2] < ring_cut:
            self._ring.popleft()
        while self._ring_x and self._ring_x[0][2] < ring_cut:
            self._ring_x.popleft()
        if self._feed_nc is not None:
            reconnects = int(self._feed_nc.stats.get("reconnects", 0))
            if reconnects != self._reconnects:
                # Feed messages may have been lost while disconnected: rebuild from the table.
                self._reconnects = reconnects
                for slot in self._slots.values():
                    slot.window = None
        for key, slot in list(self._slots.items()):
            w = slot.window
            if w is None:
                continue
            w.evict(now - w.shape.retention_us - US)
            if slot.shape.exposure_kinds and time.monotonic() - self._live_at.get(key, 0.0) > self.live_rows_ttl:
                w.live_rows = await load_live_rows(self.store, *key)
                self._live_at[key] = time.monotonic()

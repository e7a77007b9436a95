"""Webhook wake-ups: one signed notice per new event batch per inbox.

A durable JetStream pull consumer on LOOM_TASK_EVENTS (WEBHOOKS below) on the runtime's
FastStream broker, shared by every replica (one consumer, so each event is handed to one
replica), filtered by the server to the inboxes that have a webhook (`filter_subjects`), a batch consumer (one handler call per fetch: core/loom_core/bus/batched.py); its ack
policy is MANUAL: the handler only hands each fetch's events to their inboxes' notices and
returns, and the notice acks its events once delivered or given up on. Events are grouped by inbox; each
group becomes one notice {org, namespace, inbox, newest_seq, count} and no task content. While
an inbox's notice is being sent (or retried), events arriving for it are merged into one queued
notice, so a burst never becomes a burst of POSTs.

A group's messages are acked after its notice was delivered or given up on, so a replica that
dies mid-delivery leaves them to be redelivered (a receiver may see a wake-up twice; a wake-up
only says "pull now").

The filter: each replica's deliverer sets the consumer's subject filters to the inboxes the
store says have a webhook (`refresh_filter`): at start, when an inbox gains or loses its webhook
(`inbox_changed`: inbox.register on this replica awaits it, so once the op answers every later
event of the inbox is delivered; the change notice makes the other replicas refresh too) and
every FILTER_REFRESH_SECONDS. A change that leaves the inbox's webhook where the last refresh
found it (a policy row, a description, another URL) reads that one inbox, not every org's. Before,
the consumer read (and acked, one by one) every event of every inbox, a quarter of a busy
server's CPU, to find the few inboxes with a webhook. A refresh reads the store again after each
change it makes and stops only when the consumer already matches what it read, so of two
replicas racing, the last to change the filter also checks it last: the filter ends as the
store is. Events of an inbox published before its webhook's filter was in place are not woken
for (as events before the webhook was registered never were).

Every attempt is a row in the delivery log. Before any attempt the stored webhook_url and
webhook_secret_ref are checked again: a secret_ref that is not this org's own
LOOM_WEBHOOK_SECRET_<ORG>__<NAME> is never read.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import json
import logging
import os
import random
import ssl
import time
import uuid
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from faststream.nats.message import NatsBatchMessage, NatsMessage
from loom_core.bus import AckPolicy, Bus, Consumer, Consuming, task_subjects
from loom_core.bus.position import stream_seq
from loom_core.store import Store
from nats.aio.msg import Msg
from nats.js.api import AckPolicy as JsAckPolicy
from nats.js.api import ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError

from ..settings import TasksSettings
from ._config import secret_ref_is_valid, url_problem
from ._guard import Resolver, system_resolve
from ._sender import Sender, SendResult
from ._signing import DELIVERY_HEADER, EVENT_HEADER, SIGNATURE_HEADER, sign
from ._store import Attempt, record_attempt

log = logging.getLogger(__name__)

STREAM = "LOOM_TASK_EVENTS"
SUBJECTS = task_subjects.ALL
DURABLE = "loom-task-webhooks"
EVENT_NAME = "inbox.wake"
ACK_WAIT_SECONDS = 300.0  # well above the longest a notice can take (attempts x timeout + backoff)
MAX_BACKOFF_SECONDS = 30.0
CONCURRENT_SENDS = 32
STOP_GRACE_SECONDS = 2.0
#: The consumer's filter is set again from the store this often (a lost change notice).
FILTER_REFRESH_SECONDS = 30.0
#: Most subject filters the consumer gets: past this many inboxes, one filter per org; past
#: this many orgs, the whole stream.
MAX_FILTERS = 256
#: Most rounds of one refresh (set, read again) before it leaves the rest to the next.
FILTER_ROUNDS = 50
#: The filter when no inbox has a webhook: a subject no event has (org ids never hold "~").
NO_WEBHOOKS = task_subjects.event_subject("~", "~", "~", "~")

WEBHOOKS = Consumer(
    "task-webhooks",
    SUBJECTS,
    stream=STREAM,
    durable=DURABLE,
    ack=AckPolicy.MANUAL,  # a notice acks its events once delivered or given up on
    pull_batch=256,
    pull_timeout_seconds=1.0,
    batch=True,
    # A first deployment does not wake every inbox for its whole history.
    deliver_policy=DeliverPolicy.NEW,
    config=ConsumerConfig(ack_wait=ACK_WAIT_SECONDS, deliver_policy=DeliverPolicy.NEW, max_ack_pending=20_000),
    description="task events of the inboxes with a webhook (the consumer's subject filters) -> one signed wake-up notice per inbox (no task content)",
)


def _plain_token(token: str) -> bool:
    return bool(token) and not any(c in token for c in ".*> \t\r\n")


def filter_subjects(inboxes: Iterable[tuple[str, str]]) -> list[str]:
    """The consumer's subject filters for these (org, inbox) pairs: one per inbox, one per org
    past MAX_FILTERS inboxes, the whole stream past MAX_FILTERS orgs (or for a name that is not
    a plain subject token); NO_WEBHOOKS for none. Sorted, so equal sets compare equal."""
    pairs = sorted(set(inboxes))
    if not pairs:
        return [NO_WEBHOOKS]
    if not all(_plain_token(org) and _plain_token(inbox) for org, inbox in pairs):
        return [SUBJECTS]
    if len(pairs) <= MAX_FILTERS:
        return [task_subjects.inbox_filter(org, inbox) for org, inbox in pairs]
    orgs = sorted({org for org, _ in pairs})
    if len(orgs) <= MAX_FILTERS:
        return [task_subjects.org_filter(org) for org in orgs]
    return [SUBJECTS]


class WebhookLookup(Protocol):
    """The plane's answer to "where do this inbox's notices go" (sync or async)."""

    def webhook_for(self, org: str, inbox: str) -> tuple[str, str] | Awaitable[tuple[str, str] | None] | None: ...

    def webhook_inboxes(self) -> Awaitable[Iterable[tuple[str, str]]]:
        """Every (org, inbox) that has a webhook, as the store holds it now."""
        ...

    def has_webhook(self, org: str, inbox: str) -> Awaitable[bool]:
        """Whether this inbox has a webhook, as the store holds it now."""
        ...


@dataclass(slots=True)
class _Batch:
    org: str
    namespace: str
    inbox: str
    newest_seq: int
    count: int
    msgs: list[Msg] = field(default_factory=list)

    def fetched(self) -> NatsBatchMessage:
        """The batch's events as FastStream's batch message: its ack or nack settles them (the
        consumer's ack policy is MANUAL, as a notice settles its events after the fetch's handler returned)."""
        return NatsBatchMessage(self.msgs, [m.data for m in self.msgs])

    def merge(self, other: _Batch) -> None:
        self.newest_seq = max(self.newest_seq, other.newest_seq)
        self.count += other.count
        self.msgs.extend(other.msgs)
        self.namespace = other.namespace or self.namespace


@dataclass(slots=True)
class _Slot:
    task: asyncio.Task[None] | None = None
    queued: _Batch | None = None


def _event_key(msg: Msg) -> tuple[str, str, str, int] | None:
    """(org, namespace, inbox, seq) of a task event, or None when it is not one. The subject
    (`loom.tasks.<org>.<namespace>.<inbox>.<kind>`, built from the event's own fields) says where
    it belongs and its stream sequence is its seq, so the body is parsed only for a subject of
    another shape or a body that names a seq of its own (Loom's events carry none)."""
    parsed = task_subjects.parse_subject(msg.subject)
    if parsed is not None and parsed[0] and parsed[2] and b'"seq"' not in msg.data:
        try:
            return parsed[0], parsed[1], parsed[2], stream_seq(msg)
        except Exception:  # noqa: BLE001 - no JetStream metadata: read the body
            pass
    try:
        data: dict[str, Any] = json.loads(msg.data)
    except ValueError:
        data = {}
    if not isinstance(data, dict):
        data = {}
    from_subject = parsed[:3] if parsed is not None else ("", "", "")
    org = str(data.get("org") or from_subject[0])
    namespace = str(data.get("namespace") or from_subject[1])
    inbox = str(data.get("inbox") or from_subject[2])
    if not org or not inbox:
        return None
    try:
        seq = int(data.get("seq") or 0)
    except (TypeError, ValueError):
        seq = 0
    if not seq:
        with contextlib.suppress(Exception):
            seq = stream_seq(msg)
    return org, namespace, inbox, seq


class WebhookDeliverer:
    """Runs inside the tasks plane on every replica; `start()` / `stop()`."""

    def __init__(
        self,
        bus: Bus,
        store: Store,
        lookup: WebhookLookup,
        *,
        allow_loopback_for_tests: bool = False,
        resolver: Resolver | None = None,
        verify: ssl.SSLContext | None = None,
        max_attempts: int | None = None,
        retry_base_seconds: float | None = None,
        timeout_seconds: float | None = None,
        durable: str = DURABLE,
        stream: str = STREAM,
        fetch_batch: int = 256,
        settings: TasksSettings | None = None,
    ) -> None:
        s = settings if settings is not None else TasksSettings()
        self.bus = bus
        self.store = store
        self.lookup = lookup
        # A seam for tests only (no setting reaches it): lets a delivery reach a loopback receiver.
        self.allow_loopback_for_tests = allow_loopback_for_tests
        self.max_attempts = max(1, int(max_attempts if max_attempts is not None else s.task_webhook_max_attempts))
        self.retry_base_seconds = float(retry_base_seconds if retry_base_seconds is not None else s.task_webhook_retry_base_seconds)
        timeout = float(timeout_seconds if timeout_seconds is not None else s.task_webhook_timeout_seconds)
        self.sender = Sender(
            timeout_seconds=timeout, allow_loopback=self.allow_loopback_for_tests, resolver=resolver or system_resolve, verify=verify
        )
        self.enabled = bool(s.task_webhook_deliver_enabled)
        self.durable = durable
        self.stream = stream
        self.fetch_batch = fetch_batch
        self._slots: dict[tuple[str, str], _Slot] = {}
        self._background: set[asyncio.Task[None]] = set()
        self._sends = asyncio.Semaphore(CONCURRENT_SENDS)
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._consuming: Consuming | None = None
        self.ready = asyncio.Event()  # set once the consumer is bound (tests wait on it)
        self._filter_lock = asyncio.Lock()
        self._filter_asked = 0  # refresh_filter calls so far
        self._filter_covered = 0  # the calls the last finished refresh answered
        self.filter: list[str] = []  # the consumer's subject filters as last set or checked
        self._filtered: frozenset[tuple[str, str]] | None = None  # the inboxes they were built from

    # --- lifecycle

    async def start(self) -> None:
        if not self.enabled or self._task is not None:
            return
        self._stopping = False
        self._task = asyncio.create_task(self._run(), name="loom-task-webhooks")

    async def stop(self) -> None:
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None
        if self._consuming is not None:  # no new events first
            await self._consuming.stop()
            self._consuming = None
        # A notice in flight gets a moment to finish; one still unfinished is not acked, so the
        # consumer hands its events to a live replica later.
        pending = [slot.task for slot in self._slots.values() if slot.task is not None]
        if pending:
            await asyncio.wait(pending, timeout=STOP_GRACE_SECONDS)
        for t in pending:
            t.cancel()
        for t in pending:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self._slots.clear()

    def consumer(self) -> Consumer:
        return dataclasses.replace(WEBHOOKS, durable=self.durable, stream=self.stream, pull_batch=self.fetch_batch)

    async def _run(self) -> None:
        while not self._stopping and self._consuming is None:
            try:
                await self.refresh_filter()  # the consumer exists, filtered, before it is bound
                self._consuming = await self.bus.consume(self.consumer(), self._on_event)
                self.ready.set()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the stream may not exist yet; keep trying
                log.debug("webhook consumer not bound yet: %s", type(exc).__name__)
                await asyncio.sleep(0.5)
        while not self._stopping:
            await asyncio.sleep(FILTER_REFRESH_SECONDS)
            try:
                await self.refresh_filter()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the next round tries again
                log.warning("webhook filter refresh failed: %s", type(exc).__name__)

    # --- the consumer's filter

    def _consumer_config(self, subjects: list[str]) -> ConsumerConfig:
        """WEBHOOKS' declared config, for this deliverer's durable, filtered to `subjects`."""
        assert WEBHOOKS.config is not None
        return dataclasses.replace(WEBHOOKS.config, durable_name=self.durable, ack_policy=JsAckPolicy.EXPLICIT, filter_subjects=subjects)

    async def _filter_now(self) -> list[str] | None:
        """The consumer's subject filters now; None when it does not exist."""
        try:
            info = await self.bus.js.consumer_info(self.stream, self.durable)
        except NotFoundError:
            return None
        c = info.config
        return sorted(c.filter_subjects or ([c.filter_subject] if c.filter_subject else [SUBJECTS]))

    async def refresh_filter(self) -> list[str]:
        """Set the consumer's subject filters to the inboxes the store says have a webhook
        (creating the consumer if it is missing); returns them. Calls that arrive while a
        refresh runs share the next one."""
        if self._stopping:  # a stopped deliverer leaves the consumer as it is
            return self.filter
        self._filter_asked += 1
        asked = self._filter_asked
        async with self._filter_lock:
            covers = self._filter_asked
            if self._filter_covered >= asked:  # a refresh that began after this call finished
                return self.filter
            for _ in range(FILTER_ROUNDS):
                inboxes = frozenset(await self.lookup.webhook_inboxes())
                wanted = filter_subjects(inboxes)
                if await self._filter_now() == wanted:
                    self.filter, self._filtered = wanted, inboxes
                    self._filter_covered = covers
                    return wanted
                await self.bus.js.add_consumer(self.stream, self._consumer_config(wanted))
            self._filtered = None  # unsettled: the next change refreshes whatever it is
            # The store kept changing under every round: the next change or FILTER_REFRESH_SECONDS settles it.
            log.warning("webhook filter: the inboxes kept changing for %d rounds; left for the next refresh", FILTER_ROUNDS)
            return self.filter

    async def inbox_changed(self, changed: tuple[str, str] | None) -> None:
        """An inbox changed (None: one this replica cannot name). The filter is refreshed when
        the change gave the inbox a webhook or took it away, against the set the last refresh
        built it from; a change that did neither cannot move the filter, and costs one inbox's
        read instead of every org's and a consumer lookup."""
        filtered = self._filtered
        if (
            changed is not None
            and filtered is not None
            and not self._stopping
            and await self.lookup.has_webhook(*changed) == (changed in filtered)
        ):
            return
        await self.refresh_filter()

    async def _on_event(self, batch: NatsBatchMessage) -> None:
        self._dispatch(list(batch.raw_message))

    # --- grouping

    def _dispatch(self, msgs: list[Msg]) -> None:
        groups: dict[tuple[str, str], _Batch] = {}
        for msg in msgs:
            parsed = _event_key(msg)
            if parsed is None:  # not a task event: never redeliver it
                t = asyncio.create_task(NatsMessage(msg, msg.data).reject())
                self._background.add(t)
                t.add_done_callback(self._background.discard)
                continue
            org, namespace, inbox, seq = parsed
            batch = _Batch(org, namespace, inbox, seq, 1, [msg])
            if (org, inbox) in groups:
                groups[(org, inbox)].merge(batch)
            else:
                groups[(org, inbox)] = batch
        for key, batch in groups.items():
            slot = self._slots.get(key)
            if slot is None:
                slot = self._slots[key] = _Slot()
                slot.task = asyncio.create_task(self._drain(key, batch))
            elif slot.queued is None:
                slot.queued = batch
            else:
                slot.queued.merge(batch)

    async def _drain(self, key: tuple[str, str], batch: _Batch) -> None:
        current: _Batch | None = batch
        try:
            while current is not None:
                acked = await self._handle(current)
                if acked:
                    with contextlib.suppress(Exception):  # a connection gone: the events come back, the notice is idempotent
                        await current.fetched().ack()
                slot = self._slots.get(key)
                current = slot.queued if slot is not None else None
                if slot is not None:
                    slot.queued = None
        finally:
            self._slots.pop(key, None)

    # --- one notice

    async def _handle(self, batch: _Batch) -> bool:
        """Send batch's notice; False when its events should come back later (lookup failed)."""
        try:
            found = self.lookup.webhook_for(batch.org, batch.inbox)
            if inspect.isawaitable(found):
                found = await found
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - the store is down: let the events come back
            log.warning("webhook lookup failed for an inbox: %s", type(exc).__name__)
            with contextlib.suppress(Exception):  # a connection gone: the events come back after their ack wait
                await batch.fetched().nack(delay=5)
            return False
        if not found:
            return True
        url, secret_ref = found
        if not url:
            return True
        await self.deliver(batch.org, batch.namespace, batch.inbox, url, secret_ref, batch.newest_seq, batch.count)
        return True

    async def deliver(self, org: str, namespace: str, inbox: str, url: str, secret_ref: str, newest_seq: int, count: int) -> str:
        """Send one notice with retries; every attempt is logged. Returns the final outcome."""
        delivery_id = uuid.uuid4().hex
        shown_url = _loggable(url)

        async def log_attempt(n: int, outcome: str, r: SendResult | None, error: str = "") -> None:
            row = Attempt(
                org=org, namespace=namespace, inbox=inbox, delivery_id=delivery_id, attempt=n, outcome=outcome,
                status_code=r.status_code if r else 0, error=(r.error if r else error)[:200], url=shown_url,
                address=r.address if r else "", newest_seq=max(newest_seq, 0), event_count=count,
                duration_ms=r.duration_ms if r else 0.0,
            )  # fmt: skip
            try:
                await record_attempt(self.store, row)
            except Exception as exc:  # noqa: BLE001 - the log is best effort; the notice is not
                log.warning("webhook delivery log write failed: %s", type(exc).__name__)

        if url_problem(url) is not None:
            await log_attempt(0, "refused", None, "bad_url")
            return "refused"
        # Re-checked at every delivery: a stored row naming another org's variable is never read.
        if not secret_ref_is_valid(org, secret_ref):
            await log_attempt(0, "refused", None, "secret_ref_not_of_this_org")
            return "refused"
        secret = os.environ.get(secret_ref, "")
        if not secret:
            await log_attempt(0, "refused", None, "secret_not_set")
            return "refused"
        body = json.dumps(
            {
                "event": EVENT_NAME,
                "delivery_id": delivery_id,
                "org": org,
                "namespace": namespace,
                "inbox": inbox,
                "newest_seq": newest_seq,
                "count": count,
                "sent_at": int(time.time()),
            },
            separators=(",", ":"),
        ).encode()
        for n in range(1, self.max_attempts + 1):
            headers = {
                "Content-Type": "application/json",
                "User-Agent": "loom-webhooks/1",
                SIGNATURE_HEADER: sign(secret, body),
                DELIVERY_HEADER: delivery_id,
                EVENT_HEADER: EVENT_NAME,
            }
            async with self._sends:
                result = await self.sender.send(url, body, headers)
            if result.outcome == "delivered":
                await log_attempt(n, "delivered", result)
                return "delivered"
            if result.outcome == "refused":
                await log_attempt(n, "refused", result)
                return "refused"
            last = n == self.max_attempts or not result.retryable
            await log_attempt(n, "gave_up" if last else "retrying", result)
            if last:
                return "gave_up"
            delay = min(MAX_BACKOFF_SECONDS, self.retry_base_seconds * 2 ** (n - 1))
            await asyncio.sleep(delay * random.uniform(0.8, 1.2))
        return "gave_up"


def _loggable(url: str) -> str:
    """scheme://host[:port]/path: the query and fragment may hold a receiver's token."""
    return url.split("#", 1)[0].split("?", 1)[0][:500]

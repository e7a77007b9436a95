"""The bus: one NATS connection per runtime, owned by the runtime's FastStream NATS broker.

`connect_bus` builds a `faststream.nats.NatsBroker` on the runtime's connection settings,
connects and starts it, and hands back a `Bus` holding the broker, its nats-py connection and
the JetStream context. Publishing goes through the connection (`bus.nc`, `bus.js`); every
consumer (anything that reads the bus) is declared as a `Consumer` (see `bus.layout`) and runs
on the broker through `bus.consume(consumer, handler)`, with the one ack policy its declaration
names. `bus.close()` stops the broker's consumers and drains the connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import nats
from faststream.nats import NatsBroker, PullSub
from faststream.nats.message import NatsBatchMessage, NatsMessage
from faststream.security import SASLPlaintext
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js.api import StreamConfig

from ..errors import ErrorCode, Unavailable
from .replicas import BusJetStream, jetstream

if TYPE_CHECKING:
    from .layout import Consumer

log = logging.getLogger(__name__)

MessageHandler = Callable[[NatsMessage], Awaitable[None]]
#: A listener's handler (`Bus.listen`): each message's subject and payload, in nats-py's callback.
Listener = Callable[[str, bytes], None]
#: A batch consumer's handler (`Consumer(batch=True)`): one call per fetch.
BatchHandler = Callable[[NatsBatchMessage], Awaitable[None]]
GRACEFUL_STOP_SECONDS = 5.0
#: How long a JetStream request waits for its answer (LOOM_NATS_REQUEST_TIMEOUT_SECONDS's default).
NATS_REQUEST_TIMEOUT_SECONDS = 5.0


async def _whole_message(msg: NatsMessage) -> NatsMessage:
    """FastStream decoder: hand the handler the message itself (body, headers, metadata,
    ack/nack for a MANUAL consumer), not a decoded body."""
    return msg


class Consuming:
    """One running consumer; `stop()` unsubscribes it (its durable, if any, stays)."""

    def __init__(self, consumer: Consumer, subscriber: Any) -> None:
        self.consumer = consumer
        self._subscriber = subscriber
        self._stopped = False

    async def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        try:
            await self._subscriber.stop()
        except Exception:  # noqa: BLE001 - the connection may already be closed
            log.debug("bus: stopping consumer %s failed", self.consumer.name)


class _EachMessage(asyncio.Future[Msg]):
    """A `Bus.listen` subscription's hand-off: nats-py gives a subscription made with a future
    each message as `set_result(msg)`, inside its read of the socket (an old-style request's
    answer, which sets a future once; this one takes every message), so the listener runs in
    that read. A subscription with a callback queues each message for a task of its own, one
    more loop turn (and a queue) between the read and the listener: 0.11 ms of the cross-replica
    wake-up at p50 (docs/benchmarks.md, "Wake (issue Q, session 23)")."""

    def __init__(self, name: str, on_message: Listener) -> None:
        super().__init__()
        self._name = name
        self._on_message = on_message

    def set_result(self, msg: Msg, /) -> None:
        try:
            self._on_message(msg.subject, msg.data)
        except Exception:
            log.warning("bus: listener %s failed on a message", self._name, exc_info=True)


class _Listening:
    """A `Bus.listen` subscription, stopped as a broker subscriber is (`Consuming.stop`)."""

    def __init__(self, sub: Subscription) -> None:
        self._sub = sub

    async def stop(self) -> None:
        await self._sub.unsubscribe()


@dataclass(slots=True)
class Bus:
    nc: Client
    js: BusJetStream
    broker: NatsBroker
    # What `quiet()` connects with: the runtime connection's servers, name and credentials (never
    # in a repr: a test's failure report or a log line may print the runtime).
    connect_options: dict[str, Any] = field(default_factory=dict, repr=False)
    _quiet: Client | None = field(default=None, repr=False)
    _quiet_lock: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)

    async def quiet(self) -> Client:
        """The runtime's second connection, opened on first use with `no_echo`: the server never
        sends it what it published itself. For a subject every replica both publishes and reads
        (the policy plane's history feed), whose own messages would otherwise come back to each
        replica only to be dropped. Publish and `listen(..., no_echo=True)` on it."""
        async with self._quiet_lock:
            if self._quiet is None:
                opts = {**self.connect_options, "name": f"{self.connect_options.get('name', 'loom')}-quiet"}
                try:
                    self._quiet = await nats.connect(**opts, no_echo=True, max_reconnect_attempts=-1, reconnect_time_wait=0.5)
                except Exception as exc:
                    # the NATS adapter boundary, as connect_bus
                    raise Unavailable(ErrorCode.BACKEND_UNAVAILABLE, "cannot reach the bus") from exc
            return self._quiet

    async def ensure_stream(self, config: StreamConfig) -> None:
        try:
            await self.js.add_stream(config)
        except nats.js.errors.BadRequestError:
            await self.js.update_stream(config)

    async def consume(self, consumer: Consumer, handler: MessageHandler | BatchHandler) -> Consuming:
        """Run `handler` for every message `consumer` receives (for a batch consumer: for every
        fetch, see bus/batched.py), on the runtime's broker, with the consumer's declared ack
        policy. A handler that raises is logged; on a JetStream consumer the ack policy decides
        what happens to the message (e.g. NACK_ON_ERROR redelivers it)."""
        from .batched import PromptBatchSubscriber

        name = consumer.name

        async def call(msg: Any) -> None:
            try:
                await handler(msg)
            except Exception:
                # a consumer outlives a handler that fails on one message; its ack policy redelivers it
                log.warning("bus: consumer %s failed on a message", name, exc_info=True)
                if isinstance(subscriber, PromptBatchSubscriber):
                    subscriber.handler_failed()
                raise

        # no_reply: a handler answers a request itself (msg.raw_message.respond); FastStream must
        # not reply with the handler's return value.
        kwargs: dict[str, Any] = {
            "persistent": False,
            "decoder": _whole_message,
            "no_reply": True,
            "title": name,
            "description": consumer.description,
        }
        if consumer.queue:
            kwargs["queue"] = consumer.queue
        if consumer.stream is not None:
            kwargs["stream"] = consumer.stream
            kwargs["ack_policy"] = consumer.ack
            if consumer.durable:
                kwargs["durable"] = consumer.durable
            if consumer.config is not None:
                # A copy: nats-py writes into the config it is given (deliver subject, an ordered
                # consumer's restart sequence), and a declaration is shared by every replica.
                kwargs["config"] = copy.deepcopy(consumer.config)
            if consumer.deliver_policy is not None:
                kwargs["deliver_policy"] = consumer.deliver_policy
            if consumer.pull_batch:
                kwargs["pull_sub"] = PullSub(batch_size=consumer.pull_batch, timeout=consumer.pull_timeout_seconds, batch=consumer.batch)
            if consumer.ordered:
                kwargs["ordered_consumer"] = True
        if consumer.max_workers > 1:
            kwargs["max_workers"] = consumer.max_workers
        subscriber = self.broker.subscriber(consumer.subject, **kwargs)
        if consumer.batch:
            # FastStream's batch subscriber with the prompt fetch loop (bus/batched.py): a
            # subclass with no slots of its own, so the instance is the same but for its loop.
            subscriber.__class__ = PromptBatchSubscriber
        subscriber(call)
        await subscriber.start()
        return Consuming(consumer, subscriber)

    async def listen(self, consumer: Consumer, on_message: Listener, *, no_echo: bool = False) -> Consuming:
        """Run `on_message(subject, payload)` for every message of a core NATS consumer (no
        stream, nothing to ack), inside nats-py's read of the socket (`_EachMessage`), without
        FastStream's per-message pipeline (its parser, subject matching, middlewares and context:
        ~90 us of CPU and 0.3-0.4 ms of a wake-up's latency on a busy loop, docs/benchmarks.md
        "Wake (issue Q, session 20)"). For a latency path whose handler is a quick synchronous
        hand-off (the pull wake-ups); everything else runs on the broker (`consume`). A handler
        that raises is logged, the subscription goes on. With `no_echo` it reads on the `quiet()`
        connection, so what was published there never reaches it."""
        if consumer.stream is not None:
            raise ValueError(f"consumer {consumer.name}: a listener reads core NATS, not a stream")
        nc = await self.quiet() if no_echo else self.nc
        sub = await nc.subscribe(consumer.subject, queue=consumer.queue, future=_EachMessage(consumer.name, on_message))
        return Consuming(consumer, _Listening(sub))

    async def ping(self) -> None:
        if not self.nc.is_connected:
            raise Unavailable(ErrorCode.BACKEND_UNAVAILABLE, "the bus is not connected")
        await self.nc.flush(timeout=2)

    async def close(self) -> None:
        if self._quiet is not None and not self._quiet.is_closed:
            with contextlib.suppress(ConnectionError, nats.errors.Error):
                await self._quiet.close()
        if self.nc.is_closed:
            return
        try:
            await self.broker.stop()
        except nats.errors.ConnectionReconnectingError:
            # The handlers have stopped; with no server to drain the connection to, it closes (a
            # replica stopping while its NATS is down stops, not raises). nats-py marks it closed
            # and stops reconnecting before it flushes what it buffered, which a lost socket
            # refuses with ConnectionResetError.
            with contextlib.suppress(ConnectionError):
                await self.nc.close()


def make_broker(
    url: str | list[str], *, name: str = "loom", user: str = "", password: str = "", graceful_stop: float = GRACEFUL_STOP_SECONDS
) -> NatsBroker:
    """The runtime's FastStream NATS broker (not connected yet). Handlers run without
    FastStream's dependency injection (a consumer's handler takes the message: see
    `Bus.consume`), and FastStream's per-message logging is off (Loom logs failures itself).
    Its stop waits up to `graceful_stop` seconds for the handlers still running."""
    return NatsBroker(
        url,
        name=name,
        max_reconnect_attempts=-1,
        reconnect_time_wait=0.5,  # type: ignore[arg-type]  # nats-py takes seconds as a float
        security=SASLPlaintext(username=user, password=password) if user else None,
        apply_types=False,
        logger=None,
        graceful_timeout=graceful_stop,
    )


async def connect_bus(
    url: str,
    name: str = "loom",
    *,
    user: str = "",
    password: str = "",
    replicas: int = 1,
    request_timeout: float = NATS_REQUEST_TIMEOUT_SECONDS,
    graceful_stop: float = GRACEFUL_STOP_SECONDS,
) -> Bus:
    """Connect the runtime's broker and start it (consumers are added to it as planes start).
    `url` may list several servers, comma-separated (a NATS cluster); `replicas` is
    LOOM_NATS_REPLICAS, the copies each stream and KV bucket Loom declares keeps (bus/replicas.py);
    `request_timeout` is LOOM_NATS_REQUEST_TIMEOUT_SECONDS, how long a JetStream request waits;
    `graceful_stop` LOOM_NATS_GRACEFUL_STOP_SECONDS, how long `close()` waits for running handlers."""
    servers = [u.strip() for u in url.split(",") if u.strip()]
    broker = make_broker(servers if len(servers) > 1 else url, name=name, user=user, password=password, graceful_stop=graceful_stop)
    try:
        nc = await broker.connect()
        await broker.start()
    except Exception as exc:
        # the NATS adapter boundary: a connect that fails in any way is BACKEND_UNAVAILABLE
        raise Unavailable(ErrorCode.BACKEND_UNAVAILABLE, "cannot reach the bus") from exc
    options = {"servers": servers or [url], "name": name, "user": user or None, "password": password or None}
    return Bus(nc=nc, js=jetstream(nc, replicas, request_timeout), broker=broker, connect_options=options)

"""Declaring what a plane keeps on the bus, in one place per plane.

A plane's `consumers/layout.py` (or wherever its consumers live) holds one `BusLayout`: its
JetStream streams, its KV buckets and its consumers, each a typed declaration. `await
layout.declare(bus)` creates or updates the streams and opens (creating if absent) the
buckets; every consumer then runs through `bus.consume(layout.consumer("name"), handler)` (a
core NATS one on a latency path through `bus.listen`, without FastStream's per-message pipeline).

One ack policy per consumer: a JetStream consumer must name its `ack` (FastStream's
`AckPolicy`: ACK_FIRST = at most once, ACK = after the handler, NACK_ON_ERROR = redeliver
when the handler raises, REJECT_ON_ERROR = drop it then, MANUAL = the handler acks). A core
NATS consumer (no stream) has nothing to ack: its delivery is at most once, and it declares
`ack=None`.

    LAYOUT = BusLayout(
        streams=(StreamConfig(name="LOOM_X", subjects=["loom.x.>"], max_age=86400),),
        buckets=(KVBucket("loom_x_keys", ttl=3600),),
        consumers=(
            Consumer("x-writer", "loom.x.>", stream="LOOM_X", durable="x-writer", ack=AckPolicy.NACK_ON_ERROR, pull_batch=100, batch=True),
            Consumer("x-pushes", "loom.x.changed", ack=None),
        ),
    )
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import nats.errors
from faststream import AckPolicy
from faststream.nats import NatsBroker
from nats.js.api import ConsumerConfig, DeliverPolicy, KeyValueConfig, StorageType, StreamConfig
from nats.js.errors import BadRequestError, NotFoundError
from nats.js.kv import KeyValue

from ..errors import ErrorCode, Unavailable
from .nats import Bus

__all__ = ["AckPolicy", "BusLayout", "Consumer", "KVBucket", "describe"]


@dataclass(frozen=True, slots=True)
class Consumer:
    """One consumer of the bus: where it reads and how it acknowledges."""

    name: str
    subject: str
    ack: AckPolicy | None
    stream: str | None = None
    durable: str | None = None
    queue: str = ""
    deliver_policy: DeliverPolicy | None = None
    config: ConsumerConfig | None = None
    pull_batch: int = 0  # > 0: a pull consumer fetching this many at a time
    pull_timeout_seconds: float = 5.0
    #: A pull consumer whose handler gets each fetch whole (a `NatsBatchMessage`: `raw_message` is
    #: the list of nats-py messages), as soon as anything is ready (bus/batched.py); the ack
    #: policy acks or naks the whole fetch.
    batch: bool = False
    max_workers: int = 1
    #: A JetStream push consumer that is ordered (ephemeral, no acks, recreated by the client
    #: from the last sequence it saw after a gap or a lost server): a watch. Declare ack=ACK_FIRST.
    ordered: bool = False
    description: str = ""

    def __post_init__(self) -> None:
        if self.stream is None and self.ack is not None:
            raise ValueError(f"consumer {self.name}: a core NATS subscription has nothing to ack (declare ack=None)")
        if self.stream is not None and self.ack is None:
            raise ValueError(f"consumer {self.name}: a JetStream consumer declares its ack policy")
        if self.stream is None and (self.durable or self.pull_batch or self.ordered):
            raise ValueError(f"consumer {self.name}: durable, pull and ordered consumers read a stream")
        if self.batch and not self.pull_batch:
            raise ValueError(f"consumer {self.name}: a batch consumer is a pull consumer (declare pull_batch)")
        if self.ordered and (self.durable or self.pull_batch or self.ack is not AckPolicy.ACK_FIRST):
            raise ValueError(f"consumer {self.name}: an ordered consumer is an ephemeral push consumer with nothing to ack (ack=ACK_FIRST)")


@dataclass(frozen=True, slots=True)
class KVBucket:
    """A JetStream KV bucket; `limit_marker_ttl` (seconds) turns on per-key TTLs."""

    name: str
    ttl: float = 0.0
    history: int = 1
    limit_marker_ttl: float | None = None
    storage: StorageType = StorageType.FILE

    def config(self) -> KeyValueConfig:
        return KeyValueConfig(
            bucket=self.name,
            history=self.history,
            storage=self.storage,
            ttl=self.ttl or None,
            limit_marker_ttl=self.limit_marker_ttl,
        )


@dataclass(frozen=True, slots=True)
class BusLayout:
    streams: Sequence[StreamConfig] = ()
    buckets: Sequence[KVBucket] = ()
    consumers: Sequence[Consumer] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        names = [c.name for c in self.consumers]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"consumers declared twice: {sorted(dup)}")

    def consumer(self, name: str) -> Consumer:
        for c in self.consumers:
            if c.name == name:
                return c
        raise KeyError(name)

    def describe(self, broker: NatsBroker) -> None:
        """This layout's consumers in the AsyncAPI document of `broker` (see `describe`)."""
        describe(broker, self.consumers)

    async def declare(self, bus: Bus) -> dict[str, KeyValue]:
        """Create or update the streams; open (creating if absent) the buckets, by name."""
        for stream in self.streams:
            await bus.ensure_stream(stream)
        return {b.name: await ensure_bucket(bus, b) for b in self.buckets}


async def ensure_bucket(bus: Bus, bucket: KVBucket) -> KeyValue:
    """Open a KV bucket, creating it when absent (another replica may create it first). A bus
    that does not answer (stopped, reconnecting): `Unavailable`."""
    try:
        try:
            return await bus.js.key_value(bucket.name)
        except (NotFoundError, BadRequestError):
            pass
        try:
            return await bus.js.create_key_value(bucket.config())
        except BadRequestError:
            return await bus.js.key_value(bucket.name)
    except nats.errors.Error as exc:
        # the NATS adapter boundary: a timeout, a lost or reconnecting connection is BACKEND_UNAVAILABLE
        raise Unavailable(ErrorCode.BACKEND_UNAVAILABLE, f"the bus did not answer opening the bucket {bucket.name}") from exc


def describe(broker: NatsBroker, consumers: Iterable[Consumer]) -> None:
    """Each consumer as a channel of the AsyncAPI document built from `broker` (a spec-only
    broker, never connected: the gateway's GET /asyncapi.json): its subject, its name, what it
    does, and where it reads (a stream, or core NATS at most once)."""

    async def spec_only(_: Any) -> None:  # never called: the broker is never started
        return None

    for c in consumers:
        where = f"stream {c.stream}, ack {c.ack.name if c.ack else ''}" if c.stream else "core NATS, at most once"
        broker.subscriber(c.subject, title=c.name, description=f"{c.description or c.name} ({where}).")(spec_only)

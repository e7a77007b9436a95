"""A fetch applied in place: the tasks plane's batch consumers (projector, notes writer).

Each is a batch pull consumer (consumers/layout.py: `batch=True`, core/loom_core/bus/batched.py):
its handler gets one fetch whole, as soon as the consumer has anything ready, and FastStream's
ack policy (NACK_ON_ERROR) acks the fetch's messages when the handler returns. The handler
applies the fetch with `apply_in_place`, so:

- a fetch is acked only after it is applied (the handler returns only then);
- a fetch that fails is retried in place, with a growing pause, until it applies: meanwhile its
  messages are reported in progress (JetStream keeps them this replica's) and nothing newer is
  fetched, so nothing newer is applied before an older write that failed, and the fetch is
  applied the moment the backend answers again, not an ack wait later (see
  consumers/projector.py: that is what lost the projection across a NATS node failover);
- a consumer that stops while its fetch still fails gives the fetch up (`Abandoned`): its
  messages are not acked (the ack policy hands them back with a nak, to the next replica).

One ack a fetch (the projector: its JetStream consumer's AckPolicy is ALL, FastStream's MANUAL,
and one replica at a time runs it). An ack of a message then acks every message of the consumer
at or below its stream sequence, including any JetStream delivered to a replica that died
holding it and has not redelivered yet; acked so, such a write would never be applied. So a
fetch is acked with its newest message only when every write at or below that one is known
applied: this consumer's deliveries are numbered (the consumer sequence, one per delivery or
redelivery), and while a fetch's first follows the last this replica handled, nobody else was
handed anything in between and everything below was applied here. At its first fetch after a
start, or after a gap in those numbers (another holder fetched meanwhile), it waits (at most
HELD_ELSEWHERE_SECONDS) until no delivery before its own is left unacked (a holder whose lease
ran out while it applied a fetch acks it). If some still are, their holder died: every write from
the consumer's ack floor up to the fetch's newest is read from the stream (a batched direct get,
`loom_core.bus.direct`) and applied in stream order, the fetch's own among them, then the fetch
is acked. A dead holder's writes are so applied before anything newer, seconds after the
takeover, not an ack wait later. A fetch given up is handed back (nak).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from faststream.nats.message import NatsBatchMessage
from loom_core.bus import Bus, Consumer, Consuming, direct
from loom_core.bus.position import delivery, stream_seq
from nats.js.api import AckPolicy as JsAckPolicy
from nats.js.errors import NotFoundError

log = logging.getLogger(__name__)

#: Longest pause between two attempts at a failed batch.
MAX_PAUSE_SECONDS = 1.0
#: Longest a new holder's first fetch waits for the deliveries another replica holds to be acked.
HELD_ELSEWHERE_SECONDS = 2.0


class Written(Protocol):
    """A write on the stream as `apply` reads it: a delivery (nats-py's `Msg`) or a write read
    straight from the stream (`loom_core.bus.direct.Stored`)."""

    @property
    def subject(self) -> str: ...
    @property
    def data(self) -> bytes: ...


class Abandoned(Exception):
    """A failed batch given up because its consumer is stopping (not acked: it comes back)."""


async def apply_in_place(name: str, apply: Callable[[], Awaitable[None]], batch: NatsBatchMessage, *, stopping: Callable[[], bool]) -> None:
    """Call `apply` until it succeeds (or the consumer stops: `Abandoned`). The fetch is reported
    in progress between attempts, through FastStream's message API."""
    msgs = batch.raw_message
    pause = 0.05
    while True:
        try:
            await apply()
            return
        except Exception as exc:  # noqa: BLE001 - retried in place until the backend answers
            log.warning("%s: a batch of %d failed (%s: %s); retrying it", name, len(msgs), type(exc).__name__, exc)
        if stopping():
            raise Abandoned(f"{name}: stopping with a batch of {len(msgs)} not applied")
        await asyncio.sleep(pause)
        pause = min(pause * 2, MAX_PAUSE_SECONDS)
        with contextlib.suppress(Exception):  # still working on them: JetStream keeps them ours
            await batch.in_progress()


class BatchConsumer:
    """A batch consumer whose every fetch is applied in place by `apply` (the subclass's)."""

    name = "batch consumer"

    def __init__(self, bus: Bus, consumer: Consumer) -> None:
        self.bus = bus
        self.consumer = consumer
        self._consuming: Consuming | None = None
        self._stopping = False
        #: One ack a fetch (see the module doc): the consumer's AckPolicy is ALL.
        self.acks_all = consumer.config is not None and consumer.config.ack_policy == JsAckPolicy.ALL
        #: The consumer sequence the next fetch begins with when nobody else was handed anything; 0: unknown.
        self._next_delivery = 0

    async def start(self) -> None:
        if self._consuming is None:
            self._stopping = False
            self._next_delivery = 0
            self._consuming = await self.bus.consume(self.consumer, self._on_fetch)

    async def stop(self) -> None:
        """A fetch being applied finishes (and is acked) first; one still failing is given up, unacked."""
        self._stopping = True
        if self._consuming is not None:
            await self._consuming.stop()
            self._consuming = None

    async def _on_fetch(self, batch: NatsBatchMessage) -> None:
        msgs = batch.raw_message
        if not self.acks_all:
            seqs = [stream_seq(m) for m in msgs]
            await apply_in_place(self.name, lambda: self.apply(msgs, seqs), batch, stopping=lambda: self._stopping)
            return
        deliveries = [delivery(m) for m in msgs]
        seqs = [d.stream_seq for d in deliveries]
        # Nobody else was handed anything since this replica's last fetch (everything below it
        # is applied), or nothing handed to another is still unacked.
        follows = deliveries[0].consumer_seq == self._next_delivery or await self._none_held_elsewhere(deliveries[0].consumer_seq)

        async def apply() -> None:
            await (self.apply(msgs, seqs) if follows else self._apply_from_floor(max(seqs)))

        try:
            await apply_in_place(self.name, apply, batch, stopping=lambda: self._stopping)
        except Exception:
            with contextlib.suppress(Exception):  # the connection may be closed: they come back after their ack wait
                await batch.nack()
            raise
        self._next_delivery = deliveries[-1].consumer_seq + 1
        newest = max(range(len(msgs)), key=lambda i: deliveries[i])
        await NatsBatchMessage([msgs[newest]], [msgs[newest].data]).ack()

    async def _none_held_elsewhere(self, first: int) -> bool:
        """Wait (at most HELD_ELSEWHERE_SECONDS) until no delivery before this replica's first
        one, consumer sequence `first`, is unacked: a replica that held the consumer until just
        now (a lease that expired while it was still applying a fetch) acks its fetch, a
        stopped one's handed-back writes come here. False when some still are: the holder died
        holding them, and they are applied from the stream (re-applied at once, a live holder's
        events would reach core NATS subscribers twice)."""
        assert self.consumer.stream is not None and self.consumer.durable is not None
        deadline = asyncio.get_running_loop().time() + HELD_ELSEWHERE_SECONDS
        while True:
            with contextlib.suppress(Exception):  # not answering: asked again until the deadline
                info = await self.bus.js.consumer_info(self.consumer.stream, self.consumer.durable)
                delivered = int(info.delivered.consumer_seq or 0) if info.delivered is not None else 0
                if int(info.num_ack_pending or 0) <= delivered - first + 1:  # all of them this replica's
                    return True
            if asyncio.get_running_loop().time() >= deadline:
                return False
            await asyncio.sleep(0.05)

    async def _apply_from_floor(self, through: int) -> None:
        """Apply every write on the consumer's subject after its ack floor, through stream
        sequence `through`, read from the stream in stream order (a fetch at a time)."""
        assert self.consumer.stream is not None and self.consumer.durable is not None
        js = self.bus.js
        try:
            info = await js.consumer_info(self.consumer.stream, self.consumer.durable)
        except NotFoundError:
            floor = 0
        else:
            floor = int(info.ack_floor.stream_seq or 0) if info.ack_floor is not None else 0
        while floor < through:
            stored = await direct.read_after(js, self.consumer.stream, self.consumer.subject, floor, self.consumer.pull_batch)
            stored = [m for m in stored if m.seq <= through]
            if not stored:
                return
            await self.apply(stored, [m.seq for m in stored])
            floor = stored[-1].seq

    async def apply(self, msgs: Sequence[Written], seqs: list[int]) -> None:
        """Apply these writes (`seqs`: their stream sequences, in the same order); raise when it failed."""
        raise NotImplementedError

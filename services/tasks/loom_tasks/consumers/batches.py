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
fetch is acked with its newest write only when every write at or below that one is known
applied. The replica keeps the stream sequence through which it knows every write applied (by
itself, or by whoever moved the consumer's ack floor there). A fetch whose writes are exactly the
next ones after it is applied as fetched. Any other fetch (the first after a start, a
takeover, writes between the last one applied here and this fetch's) first waits, at most
HELD_ELSEWHERE_SECONDS, until no delivery but this replica's is unacked (a holder whose lease ran
out while it applied a fetch acks it), then takes the ack floor, and applies every write after it
through the fetch's newest, read from the stream in stream order (a batched direct get,
`loom_core.bus.direct`), the fetch's own among them. So a dead holder's writes are applied
before anything newer is acked, seconds after the takeover, not an ack wait later.

Why by stream sequence and not by the consumer's delivery numbers: a dead holder's deliveries
come back in pieces, each once its own ack wait has passed. Before, a fetch that followed this
replica's previous one in delivery numbers was applied as fetched; after a takeover whose first
fetch held only the pieces that had come back, the next fetch (new writes) followed it, its ack
acked the piece still held by the dead replica, and those writes were never applied: a hundred
tasks missing from the projection and their events from task.updates (tests/tasks/test_chaos.py
failed that way in about one run in ten; tests/tasks/test_consumers.py now builds the case). A
fetch given up is handed back (nak).
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
        #: Every write on the consumer's subject at or below this stream sequence is known applied
        #: (here, or by whoever moved the ack floor there); 0: not known yet.
        self._applied_through = 0

    async def start(self) -> None:
        if self._consuming is None:
            self._stopping = False
            self._applied_through = 0
            self._consuming = await self.bus.consume(self.consumer, self._on_fetch)

    async def stop(self) -> None:
        """A fetch being applied finishes (and is acked) first; one still failing is given up, unacked."""
        self._stopping = True
        if self._consuming is not None:
            await self._consuming.stop()
            self._consuming = None

    async def _on_fetch(self, batch: NatsBatchMessage) -> None:
        msgs = batch.raw_message
        seqs = [stream_seq(m) for m in msgs]
        if not self.acks_all:
            await apply_in_place(self.name, lambda: self.apply(msgs, seqs), batch, stopping=lambda: self._stopping)
            return

        async def apply() -> None:
            through = self._applied_through
            if not _next_after(seqs, through):
                await self._let_others_finish(delivery(msgs[0]).consumer_seq)
                through = max(through, await self._ack_floor())
                if not _next_after(seqs, through):
                    log.debug(
                        "%s: a fetch of %d, stream %d..%d, applied through %d: read from the stream",
                        self.name,
                        len(msgs),
                        min(seqs),
                        max(seqs),
                        through,
                    )
                    await self._apply_from(through, max(seqs))
                    return
            fresh = [i for i, seq in enumerate(seqs) if seq > through]
            if fresh:
                await self.apply([msgs[i] for i in fresh], [seqs[i] for i in fresh])
            self._applied_through = max(through, *seqs)

        try:
            await apply_in_place(self.name, apply, batch, stopping=lambda: self._stopping)
        except Exception:
            with contextlib.suppress(Exception):  # the connection may be closed: they come back after their ack wait
                await batch.nack()
            raise
        newest = max(range(len(msgs)), key=seqs.__getitem__)
        await NatsBatchMessage([msgs[newest]], [msgs[newest].data]).ack()

    async def _let_others_finish(self, first: int) -> None:
        """Wait (at most HELD_ELSEWHERE_SECONDS) until no delivery before this replica's, consumer
        sequence `first`, is unacked: a replica that held the consumer until just now (a lease
        that expired while it was still applying a fetch) acks its fetch, so its writes are not
        applied twice (re-applied, a live holder's events would reach core NATS subscribers
        twice). A holder that died holding some leaves them unacked: they are applied from the
        stream all the same."""
        assert self.consumer.stream is not None and self.consumer.durable is not None
        deadline = asyncio.get_running_loop().time() + HELD_ELSEWHERE_SECONDS
        while asyncio.get_running_loop().time() < deadline:
            with contextlib.suppress(Exception):  # not answering: asked again until the deadline
                info = await self.bus.js.consumer_info(self.consumer.stream, self.consumer.durable)
                delivered = int(info.delivered.consumer_seq or 0) if info.delivered is not None else 0
                if int(info.num_ack_pending or 0) <= delivered - first + 1:  # all of them this replica's
                    return
            await asyncio.sleep(0.05)

    async def _ack_floor(self) -> int:
        """The consumer's ack floor: the stream sequence through which every write is applied."""
        assert self.consumer.stream is not None and self.consumer.durable is not None
        try:
            info = await self.bus.js.consumer_info(self.consumer.stream, self.consumer.durable)
        except NotFoundError:
            return 0
        return int(info.ack_floor.stream_seq or 0) if info.ack_floor is not None else 0

    async def _apply_from(self, after: int, through: int) -> None:
        """Apply every write on the consumer's subject after stream sequence `after`, through
        `through`, read from the stream in stream order (a fetch at a time)."""
        assert self.consumer.stream is not None
        while after < through:
            stored = await direct.read_after(self.bus.js, self.consumer.stream, self.consumer.subject, after, self.consumer.pull_batch)
            stored = [m for m in stored if m.seq <= through]
            if stored:
                await self.apply(stored, [m.seq for m in stored])
            after = stored[-1].seq if stored else through
            self._applied_through = max(self._applied_through, after)

    async def apply(self, msgs: Sequence[Written], seqs: list[int]) -> None:
        """Apply these writes (`seqs`: their stream sequences, in the same order); raise when it failed."""
        raise NotImplementedError


def _next_after(seqs: Sequence[int], through: int) -> bool:
    """The writes after `through` among `seqs` are exactly the next stream sequences: nothing
    between `through` and them, nor between any two of them."""
    fresh = sorted({seq for seq in seqs if seq > through})
    return not fresh or fresh[-1] - through == len(fresh)

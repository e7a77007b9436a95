"""Decision batches (LOOM_POLICY_DECISIONS, a work queue shared by every replica): each
published batch into loom.policy_decisions once, whichever replica fetches it. A failed insert
raises, and the consumer's ack policy (NACK_ON_ERROR) redelivers the batch; the batch id as the
insert's deduplication token makes a redelivered batch change nothing."""

from __future__ import annotations

from faststream.nats.message import NatsMessage
from loom_core.bus import Bus, Consuming
from loom_core.store import Store

from ..bus import DECISION_BATCHES
from ..store.decisions import insert_batch


async def listen_decision_batches(bus: Bus, store: Store) -> Consuming:
    async def on_batch(msg: NatsMessage) -> None:
        await insert_batch(store, msg.body, msg.headers["Nats-Msg-Id"])

    return await bus.consume(DECISION_BATCHES, on_batch)

"""The live history feed (`loom.policy.feed`, core NATS, at most once): other replicas' ledger
rows and exposures, batched every few ms, into this replica's windows (a lost batch is caught
by the rebuild on reconnect)."""

from __future__ import annotations

from faststream.nats.message import NatsMessage
from loom_core.bus import Bus, Consuming

from ..bus import HISTORY_FEED
from ..service.live_history import LiveHistory


async def listen_history_feed(bus: Bus, history: LiveHistory) -> Consuming:
    async def on_feed(msg: NatsMessage) -> None:
        history.fed(msg.body)

    return await bus.consume(HISTORY_FEED, on_feed)

"""The live history feed (`loom.policy.feed`, core NATS, at most once): other replicas' ledger
rows and exposures, batched every few ms, into this replica's windows (a lost batch is caught
by the rebuild on reconnect).

Every replica publishes its batches (one per gated call when calls come one at a time) and reads
everyone's. Read on the broker, each replica's own batches came back to it through FastStream's
per-message pipeline only for `fed` to drop them: 1.6 times `gate.check`'s CPU. So the feed is
published and read on the runtime's connection without echo (`Bus.quiet`: the server never
sends a replica its own batches), with `Bus.listen`, from nats-py's callback
(docs/benchmarks.md, "The policy gate, round eight (issue Q, session 21)")."""

from __future__ import annotations

from loom_core.bus import Bus, Consuming

from ..bus import HISTORY_FEED
from ..service.live_history import LiveHistory


async def listen_history_feed(bus: Bus, history: LiveHistory) -> Consuming:
    def on_feed(_subject: str, body: bytes) -> None:
        history.fed(body)

    return await bus.listen(HISTORY_FEED, on_feed, no_echo=True)

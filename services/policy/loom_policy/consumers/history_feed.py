"""The live history feed (`loom.policy.feed`, core NATS, at most once): other replicas' ledger
rows and exposures, batched every few ms, into this replica's windows (a lost batch is caught
by the rebuild on reconnect).

Read with `Bus.listen`, from nats-py's callback, not on the broker: every replica receives its
own batches back too (one per gated call when calls come one at a time), and FastStream's
per-message pipeline took 1.6 times `gate.check`'s CPU only for `fed` to drop them on their
first bytes (docs/benchmarks.md, "The policy gate, round eight (issue Q, session 21)")."""

from __future__ import annotations

from loom_core.bus import Bus, Consuming

from ..bus import HISTORY_FEED
from ..service.live_history import LiveHistory


async def listen_history_feed(bus: Bus, history: LiveHistory) -> Consuming:
    def on_feed(_subject: str, body: bytes) -> None:
        history.fed(body)

    return await bus.listen(HISTORY_FEED, on_feed)

"""Per-key counters on NATS KV: each number handed out once, whichever process asks.

A counter is one KV key holding its last number. `next(key, floor)` reads it and writes
max(last, floor) + 1 by compare-and-set at the revision it read (`loom_core.bus.kv`); a lost
race reads again. Two processes asking at once get two different numbers, in the order the KV
took their writes. `floor` is the caller's own truth (the store's newest version): a counter that
aged out of its bucket, or a store written before counters existed, starts from it.
"""

from __future__ import annotations

from ..errors import Conflict, ErrorCode, Unavailable
from . import kv
from .nats import Bus

#: Compare-and-set attempts before a key this contended answers 409 (call again).
ATTEMPTS = 64


class Counters:
    """Counters in one KV bucket (its stream `KV_<bucket>`)."""

    def __init__(self, bus: Bus, bucket: str) -> None:
        self.bus = bus
        self.bucket = bucket
        self.stream = f"KV_{bucket}"

    async def next(self, key: str, floor: int = 0) -> int:
        subject = f"$KV.{self.bucket}.{key}"
        for _ in range(ATTEMPTS):
            try:
                entry = await kv.read(self.bus.js, self.stream, subject, direct=False)
                last = int(entry.data) if entry is not None and entry.data else 0
                number = max(last, floor) + 1
                await kv.update_at(self.bus.js, subject, str(number).encode(), entry.revision if entry is not None else 0)
            except kv.WrongRevision:
                continue  # another process took a number since the read
            except Unavailable:
                raise Unavailable(ErrorCode.BACKEND_UNAVAILABLE, "the state store (NATS JetStream) did not answer") from None
            return number
        raise Conflict(ErrorCode.PRECONDITION_FAILED, "the key's version is contended; call again", {"counter": key})

"""Per-key counters on NATS KV: each number handed out once, whichever process asks.

A counter is one KV key holding its last number. `next(key, floor)` writes max(last, floor) + 1
by compare-and-set at the revision of `last` (`loom_core.bus.kv`); a lost race reads again. Two
processes asking at once get two different numbers, in the order the KV took their writes.

The number and revision this process last wrote or read are kept (a bounded memo), so a counter
this process drives costs one KV round trip per number: the compare-and-set itself, which fails
(and reads) when anyone else moved the counter since; a counter not in the memo, when `floor` is
a number, is first written as new (a create, no read), so a new key's number is one round trip
too. `floor` is the caller's own truth (the store's newest version): a counter that aged out of
its bucket, or a store written before counters existed, starts from it. It may be a number or a
function that reads it, called only when the KV holds no number for the key (so a counter in use
never pays for the read).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable

from ..errors import Conflict, ErrorCode, Unavailable
from . import kv
from .nats import Bus

#: Compare-and-set attempts before a key this contended answers 409 (call again).
ATTEMPTS = 64
#: Counters whose last number this process remembers.
MEMO_MAX = 100_000

Floor = int | Callable[[], Awaitable[int]]


class Counters:
    """Counters in one KV bucket (its stream `KV_<bucket>`)."""

    def __init__(self, bus: Bus, bucket: str) -> None:
        self.bus = bus
        self.bucket = bucket
        self.stream = f"KV_{bucket}"
        self._memo: OrderedDict[str, tuple[int, int]] = OrderedDict()  # key -> (last number, its revision)

    async def next(self, key: str, floor: Floor = 0) -> int:
        subject = f"$KV.{self.bucket}.{key}"
        known = self._memo.pop(key, None)
        if known is None and isinstance(floor, int):
            # A counter this process has not seen is most often new (a new key's first write):
            # write its first number as a create (revision 0) without reading; a counter that
            # exists refuses it and is read below. One KV round trip for a new key, not two.
            known = (0, 0)
        for _ in range(ATTEMPTS):
            try:
                if known is None:
                    entry = await kv.read(self.bus.js, self.stream, subject, direct=False)
                    last = int(entry.data) if entry is not None and entry.data else 0
                    if not last and not isinstance(floor, int):
                        floor = await floor()
                    known = (last, entry.revision if entry is not None else 0)
                number = max(known[0], floor if isinstance(floor, int) else 0) + 1
                revision = await kv.update_at(self.bus.js, subject, str(number).encode(), known[1])
            except kv.WrongRevision:
                known = None  # another process took a number since (or the counter aged out)
                continue
            except Unavailable:
                raise Unavailable(ErrorCode.BACKEND_UNAVAILABLE, "the state store (NATS JetStream) did not answer") from None
            self._memo[key] = (number, revision)
            if len(self._memo) > MEMO_MAX:
                self._memo.popitem(last=False)
            return number
        raise Conflict(ErrorCode.PRECONDITION_FAILED, "the key's version is contended; call again", {"counter": key})

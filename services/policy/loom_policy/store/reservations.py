"""Calls in flight shared by every replica (LOOM_POLICY_RESERVATIONS=shared).

One NATS KV key per (org, namespace, subject) holds that subject's reservations; every history
key is a subject's (domain.history.key_value), so nothing outside the key counts toward its
leaves. A replica reads the key, decides, and writes its reservation at the revision it read
(compare-and-set); a lost race decides again. A settled reservation (its call's ledger row
seen by the replica that made it) lingers for `LINGER_US`, marked settled, so a replica whose
history has not received that row yet still counts the call; a replica that has seen the row
skips it (it counts as the event).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from loom_core.bus import Bus, ensure_bucket
from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KeyValue

from ..bus import RESERVATIONS
from ..domain.reservations import RESERVATION_TTL_US, PendingCall

LINGER_US = 10 * 1_000_000


@dataclass(frozen=True, slots=True)
class SharedEntry:
    call: PendingCall
    settled_at_us: int = 0

    def live(self, now_us: int) -> bool:
        if self.settled_at_us:
            return self.settled_at_us + LINGER_US >= now_us
        return self.call.at_us + RESERVATION_TTL_US >= now_us


@dataclass(frozen=True, slots=True)
class Snapshot:
    key: str
    revision: int | None
    entries: tuple[SharedEntry, ...]


def entry_key(org: str, namespace: str, subject: str) -> str:
    return "r_" + hashlib.sha256(f"{org}\x00{namespace}\x00{subject}".encode()).hexdigest()[:40]


class ReservationStore:
    def __init__(self, kv: KeyValue) -> None:
        self.kv = kv

    @classmethod
    async def open(cls, bus: Bus) -> ReservationStore:
        return cls(await ensure_bucket(bus, RESERVATIONS))

    async def read(self, org: str, namespace: str, subject: str, now_us: int) -> Snapshot:
        key = entry_key(org, namespace, subject)
        try:
            got = await self.kv.get(key)
        except KeyNotFoundError as exc:
            # A deleted key still has a revision to write over (nats-py carries its marker).
            marker = getattr(exc, "entry", None)
            return Snapshot(key, marker.revision if marker is not None else None, ())
        raw = json.loads(got.value or b"[]")
        entries = tuple(SharedEntry(PendingCall.from_json(e[0]), int(e[1])) for e in raw)
        return Snapshot(key, got.revision, tuple(e for e in entries if e.live(now_us)))

    async def write(self, snap: Snapshot, entries: tuple[SharedEntry, ...]) -> bool:
        """Replace the key's entries if nobody wrote since `snap`; False when somebody did."""
        body = json.dumps([[e.call.to_json(), e.settled_at_us] for e in entries], separators=(",", ":")).encode()
        try:
            if snap.revision is None:
                await self.kv.create(snap.key, body)
            else:
                await self.kv.update(snap.key, body, last=snap.revision)
        except KeyWrongLastSequenceError:
            return False
        return True

    async def settle(self, org: str, namespace: str, subject: str, request_id: str, now_us: int) -> None:
        """Mark one reservation settled (its ledger row exists), retrying lost races."""
        for _ in range(20):
            snap = await self.read(org, namespace, subject, now_us)
            if not any(e.call.request_id == request_id and not e.settled_at_us for e in snap.entries):
                return
            marked = tuple(
                SharedEntry(e.call, now_us) if e.call.request_id == request_id and not e.settled_at_us else e for e in snap.entries
            )
            if await self.write(snap, marked):
                return

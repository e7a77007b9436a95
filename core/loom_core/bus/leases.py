"""Leases on NATS KV: compare-and-set writes with an expiry in the value and a per-key TTL.

A lease is one key. `acquire` creates it if absent, or takes it over at the revision it read
when the holder's expiry has passed; `renew` and `release` succeed only at the revision the
holder last wrote. The KV revision a holder wrote on acquire is its fence: it only grows, so
a write fenced with an older revision is known stale.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass

from nats.js.api import StorageType

from ..errors import Conflict, ErrorCode, Unavailable
from . import kv
from .layout import KVBucket, ensure_bucket
from .nats import Bus

BUCKET = "loom_leases"


class LeaseHeld(Conflict):
    def __init__(self, key: str, holder: str) -> None:
        super().__init__(ErrorCode.PRECONDITION_FAILED, "the lease is held by another", {"lease": key})
        self.holder = holder


@dataclass(slots=True)
class Lease:
    key: str
    holder: str
    revision: int
    fence: int
    expires_at: float

    @property
    def expired(self) -> bool:
        return time.time() >= self.expires_at


class LeaseStore:
    """Leases for one bus. Keys are KV keys (letters, digits, `-_/=.`). Every write is a
    compare-and-set through `loom_core.bus.kv` on the bucket's stream."""

    def __init__(self, bus: Bus, bucket: str = BUCKET) -> None:
        self.bus = bus
        self.bucket = bucket
        self.stream = f"KV_{bucket}"

    @classmethod
    async def open(cls, bus: Bus, bucket: str = BUCKET) -> LeaseStore:
        # limit_marker_ttl turns on per-key TTLs (an abandoned lease key ages out).
        await ensure_bucket(bus, KVBucket(bucket, ttl=7 * 86400, history=1, limit_marker_ttl=60, storage=StorageType.FILE))
        return cls(bus, bucket)

    def _subject(self, key: str) -> str:
        return f"$KV.{self.bucket}.{key}"

    async def read(self, key: str) -> Lease | None:
        try:
            entry = await kv.read(self.bus.js, self.stream, self._subject(key), direct=False)
        except Unavailable:
            raise Unavailable(ErrorCode.BACKEND_UNAVAILABLE, "the lease store did not answer") from None
        if entry is None or not entry.data:
            return None
        data = json.loads(entry.data)
        return Lease(key, data["holder"], entry.revision, int(data.get("fence") or entry.revision), float(data["expires_at"]))

    async def acquire(self, key: str, holder: str, ttl: float) -> Lease:
        """Take the lease or raise LeaseHeld. Raises Unavailable when the KV does not answer."""
        subject = self._subject(key)
        for _ in range(8):
            expires = time.time() + ttl
            current = await self.read(key)
            try:
                if current is None:
                    # Absent, or a delete / TTL marker: written over at its revision.
                    rev = await kv.create_if_absent(
                        self.bus.js, self.stream, subject, _value(holder, expires, 0), ttl=max(ttl * 4, 60), direct=False
                    )
                elif current.expired or current.holder == holder:
                    rev = await kv.update_at(self.bus.js, subject, _value(holder, expires, 0), current.revision)
                else:
                    raise LeaseHeld(key, current.holder)
            except kv.WrongRevision:
                continue  # lost a race: read again
            except Unavailable:
                raise Unavailable(ErrorCode.BACKEND_UNAVAILABLE, "the lease store did not answer") from None
            return Lease(key, holder, rev, rev, expires)
        raise LeaseHeld(key, "?")

    async def wait_acquire(self, key: str, holder: str, ttl: float, timeout: float, poll: float = 0.05) -> Lease:
        """Acquire, waiting up to `timeout` for the holder to release or expire."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return await self.acquire(key, holder, ttl)
            except LeaseHeld:
                if time.monotonic() >= deadline:
                    raise
                await asyncio.sleep(poll)

    async def renew(self, lease: Lease, ttl: float) -> Lease:
        expires = time.time() + ttl
        try:
            rev = await kv.update_at(self.bus.js, self._subject(lease.key), _value(lease.holder, expires, lease.fence), lease.revision)
        except kv.WrongRevision:
            raise LeaseHeld(lease.key, "?") from None
        except Unavailable:
            raise Unavailable(ErrorCode.BACKEND_UNAVAILABLE, "the lease store did not answer") from None
        return Lease(lease.key, lease.holder, rev, lease.fence, expires)

    async def release(self, lease: Lease) -> bool:
        """Give the lease back; False when it was no longer ours."""
        try:
            await kv.update_at(self.bus.js, self._subject(lease.key), b"", lease.revision, headers={kv.KV_OPERATION: "DEL"})
        except kv.WrongRevision:
            return False
        except Unavailable:
            raise Unavailable(ErrorCode.BACKEND_UNAVAILABLE, "the lease store did not answer") from None
        return True


def _value(holder: str, expires_at: float, fence: int) -> bytes:
    return json.dumps({"holder": holder, "expires_at": expires_at, "fence": fence}).encode()

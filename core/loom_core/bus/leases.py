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

from nats.js.api import KeyValueConfig, StorageType
from nats.js.errors import APIError, BadRequestError, KeyNotFoundError, KeyWrongLastSequenceError, NotFoundError
from nats.js.kv import KeyValue

from ..errors import Conflict, Unavailable
from .nats import Bus

BUCKET = "loom_leases"
# JetStream "wrong last sequence" error codes (JSStreamWrongLastSequenceErr and its constant form).
_WRONG_LAST_SEQUENCE = (10071, 10164)


class LeaseHeld(Conflict):
    def __init__(self, key: str, holder: str) -> None:
        super().__init__("PRECONDITION_FAILED", "the lease is held by another", {"lease": key})
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
    """Leases for one bus. Keys are KV keys (letters, digits, `-_/=.`)."""

    def __init__(self, kv: KeyValue) -> None:
        self.kv = kv

    @classmethod
    async def open(cls, bus: Bus, bucket: str = BUCKET) -> LeaseStore:
        try:
            kv = await bus.js.key_value(bucket)
        except (NotFoundError, BadRequestError):
            # limit_marker_ttl turns on per-key TTLs (an abandoned lease key ages out).
            config = KeyValueConfig(bucket=bucket, history=1, storage=StorageType.FILE, ttl=7 * 86400, limit_marker_ttl=60)
            try:
                kv = await bus.js.create_key_value(config)
            except BadRequestError:
                kv = await bus.js.key_value(bucket)  # another replica created it first
        return cls(kv)

    async def read(self, key: str) -> Lease | None:
        try:
            entry = await self.kv.get(key)
        except KeyNotFoundError:
            return None
        except Exception as exc:
            raise Unavailable("BACKEND_UNAVAILABLE", "the lease store did not answer") from exc
        if not entry.value:
            return None
        data = json.loads(entry.value)
        return Lease(key, data["holder"], entry.revision or 0, int(data.get("fence") or entry.revision or 0), float(data["expires_at"]))

    async def acquire(self, key: str, holder: str, ttl: float) -> Lease:
        """Take the lease or raise LeaseHeld. Raises Unavailable when the KV does not answer."""
        for _ in range(8):
            expires = time.time() + ttl
            current = await self.read(key)
            try:
                if current is None:
                    try:
                        rev = await self.kv.create(key, _value(holder, expires, 0), msg_ttl=max(ttl * 4, 60))
                    except KeyWrongLastSequenceError:
                        # Another acquirer created it first (read again), or the key is an
                        # empty marker nats-py did not recognise: write over that at its revision.
                        marker = await self._marker_revision(key)
                        if marker is None:
                            continue
                        rev = await self.kv.update(key, _value(holder, expires, 0), last=marker)
                elif current.expired or current.holder == holder:
                    rev = await self.kv.update(key, _value(holder, expires, 0), last=current.revision)
                else:
                    raise LeaseHeld(key, current.holder)
            except KeyWrongLastSequenceError:
                continue  # lost a race: read again
            except LeaseHeld:
                raise
            except Exception as exc:
                raise Unavailable("BACKEND_UNAVAILABLE", "the lease store did not answer") from exc
            return Lease(key, holder, rev, rev, expires)
        raise LeaseHeld(key, "?")

    async def _marker_revision(self, key: str) -> int | None:
        """The revision of a delete/TTL marker at `key`; None when a live value is there (a
        holder won the race) or nothing is."""
        try:
            entry = await self.kv.get(key)
        except KeyNotFoundError as exc:
            # nats-py raises KeyDeletedError (a KeyNotFoundError) carrying the tombstone.
            e = getattr(exc, "entry", None)
            return e.revision if e is not None else None
        return entry.revision if not entry.value else None

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
            rev = await self.kv.update(lease.key, _value(lease.holder, expires, lease.fence), last=lease.revision)
        except KeyWrongLastSequenceError:
            raise LeaseHeld(lease.key, "?") from None
        except Exception as exc:
            raise Unavailable("BACKEND_UNAVAILABLE", "the lease store did not answer") from exc
        return Lease(lease.key, lease.holder, rev, lease.fence, expires)

    async def release(self, lease: Lease) -> bool:
        """Give the lease back; False when it was no longer ours."""
        try:
            await self.kv.delete(lease.key, last=lease.revision)
        except KeyWrongLastSequenceError:
            return False
        except APIError as exc:
            # kv.delete does not translate "wrong last sequence" as kv.update does.
            if exc.err_code in _WRONG_LAST_SEQUENCE:
                return False
            raise Unavailable("BACKEND_UNAVAILABLE", "the lease store did not answer") from exc
        except Exception as exc:
            raise Unavailable("BACKEND_UNAVAILABLE", "the lease store did not answer") from exc
        return True


def _value(holder: str, expires_at: float, fence: int) -> bytes:
    return json.dumps({"holder": holder, "expires_at": expires_at, "fence": fence}).encode()

"""One replica at a time: a consumer that runs only while its replica holds a cluster lease.

The projector is one durable consumer shared by every replica. Shared, each replica is handed a
different batch of the state writes, and two replicas publish their batches' events at once, so
one task's `accepted` could reach LOOM_TASK_EVENTS before its `created` (a `task.updates` cursor
would read them in that order). Under the lease one replica projects at a time, in stream order;
the others stand by and take over when the holder stops (it releases the lease) or dies (the
lease expires after TTL_SECONDS). A holder that cannot reach the lease bucket (a NATS node
failing over) keeps running until its lease has expired by its own clock, so a failover does not
stop the projection by itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from typing import Protocol

from loom_core.aio import cancel_and_wait, every
from loom_core.bus.leases import Lease, LeaseHeld, LeaseStore

log = logging.getLogger(__name__)

TTL_SECONDS = 3.0


class Startable(Protocol):
    async def start(self) -> None: ...
    async def stop(self) -> None: ...


class Leased:
    def __init__(self, consumer: Startable, leases: LeaseStore, key: str, *, ttl: float = TTL_SECONDS) -> None:
        self.consumer = consumer
        self.leases = leases
        self.key = key
        self.ttl = ttl
        self.holder = f"{key}-{uuid.uuid4().hex[:12]}"
        self.running = False
        self._lease: Lease | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        if self._task is None:
            await self._step()  # the first replica up starts at once
            stepping = every(self.ttl / 3, self._step, failed=f"lease {self.key}: step failed", logger=log, traceback=True)
            self._task = asyncio.create_task(stepping, name=f"loom-leased-{self.key}")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None
        await self._set_running(False)
        if self._lease is not None:
            with contextlib.suppress(Exception):
                await self.leases.release(self._lease)  # the next replica takes over now, not at expiry
            self._lease = None

    async def _hold(self) -> bool:
        try:
            if self._lease is not None and not self._lease.expired:
                self._lease = await self.leases.renew(self._lease, self.ttl)
            else:
                self._lease = await self.leases.acquire(self.key, self.holder, self.ttl)
            return True
        except LeaseHeld:
            self._lease = None
            return False
        except Exception as exc:  # noqa: BLE001 - the bucket not answering: keep what is not yet expired
            log.warning("lease %s: %s", self.key, type(exc).__name__)
            return self._lease is not None and not self._lease.expired

    async def _set_running(self, run: bool) -> None:
        if run and not self.running:
            log.info("lease %s: taken by %s, running here", self.key, self.holder)
            await self.consumer.start()
            self.running = True
        elif not run and self.running:
            log.info("lease %s: lost or given up by %s, stopping here", self.key, self.holder)
            self.running = False
            await self.consumer.stop()

    async def _step(self) -> None:
        await self._set_running(await self._hold())

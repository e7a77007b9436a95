"""Pruning the revocations table: a revocation outlives every token it can end, then goes.

Every token a revocation at instant T ends was issued at or before T, and no token lives longer
than the longest lifetime Loom mints (`horizon_seconds`: the larger of LOOM_TOKEN_MAX_TTL_SECONDS
and LOOM_BOOTSTRAP_TOKEN_TTL_SECONDS, plus a clock-skew margin). So once T + horizon has passed,
every token the row could refuse has expired on its own and the row is dead weight in every
replica's memory and every resync.

One replica at a time deletes the rows (the cluster lease `identity.revocations.prune`, held
for one interval and never released early, so a second replica within the interval skips);
every replica forgets the same entries from memory on its own (`Authenticator.forget_before`),
whether or not it held the lease.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import KW_ONLY, dataclass, field

from ..aio import cancel_and_wait
from ..bus import LeaseHeld, LeaseStore
from ..errors import LoomError
from .authenticator import Authenticator
from .store import IdentityStore

log = logging.getLogger(__name__)

LEASE_KEY = "identity.revocations.prune"
SKEW_MARGIN_SECONDS = 300


def revocation_horizon(token_max_ttl_seconds: int, bootstrap_token_ttl_seconds: int) -> int:
    """Seconds after which a revocation can no longer end any live token."""
    return max(token_max_ttl_seconds, bootstrap_token_ttl_seconds) + SKEW_MARGIN_SECONDS


@dataclass(eq=False, slots=True)
class RevocationPruner:
    identity: IdentityStore
    leases: LeaseStore
    auth: Authenticator
    _: KW_ONLY
    horizon_seconds: int
    interval_seconds: float
    holder: str = field(default_factory=lambda: f"prune-{uuid.uuid4().hex[:12]}")
    _task: asyncio.Task[None] | None = field(default=None, init=False)

    async def run_once(self, now: float | None = None) -> int | None:
        """Forget expired revocations here; delete them from the store when this replica holds
        the lease. Returns the rows deleted, or None when another replica holds the lease."""
        cutoff = (now if now is not None else time.time()) - self.horizon_seconds
        self.auth.forget_before(cutoff)
        try:
            await self.leases.acquire(LEASE_KEY, self.holder, self.interval_seconds)
        except LeaseHeld:
            return None
        return await self.identity.prune_revocations(cutoff)

    async def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None

    async def _loop(self) -> None:
        while True:
            try:
                pruned = await self.run_once()
                if pruned:
                    log.info("pruned %d expired revocations", pruned)
            except LoomError as exc:  # store or lease store down: the next pass retries
                log.warning("revocation pruning skipped: %s", exc.code)
            await asyncio.sleep(self.interval_seconds)

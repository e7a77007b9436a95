"""Per-call identity: verify the token, honour revocations, and compute the effective role
(the lower of the token's claim and the subject's live grant).

Revocations are loaded from the store at start and pushed to every replica over NATS, so a
revoke on one replica is refused on all of them within a moment. Live grants are cached
briefly and their cache entries dropped on a pushed grant change.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass

from faststream.nats.message import NatsMessage

from ..aio import every
from ..bus import Bus, BusLayout, Consumer, Consuming
from ..errors import ErrorCode, Unauthenticated
from ..roles import Role
from .store import IdentityStore, Revocation
from .tokens import Principal, TokenCodec

log = logging.getLogger(__name__)

REVOKED_SUBJECT = "loom.identity.revoked"
GRANTS_SUBJECT = "loom.identity.grants"
# Every replica hears every push (no queue group); core NATS, so at most once: the periodic
# resync and the short grant cache bound what a lost push costs.
LAYOUT = BusLayout(
    consumers=(
        Consumer("identity-revocations", REVOKED_SUBJECT, ack=None, description="token, session and subject revocations"),
        Consumer("identity-grants", GRANTS_SUBJECT, ack=None, description="grant changes: drop the cached live grants"),
    )
)
RESYNC_SECONDS = 60.0
# Signature-verified tokens kept per replica (cleared whole when full).
VERIFIED_CACHE_MAX = 10_000


@dataclass(slots=True)
class _RevocationSet:
    tokens: dict[str, float]
    sessions: dict[str, float]
    subjects: dict[tuple[str, str], float]

    def add(self, r: Revocation) -> None:
        if r.kind == "token":
            self.tokens[r.value] = r.revoked_at
        elif r.kind == "session":
            self.sessions[r.value] = r.revoked_at
        elif r.kind == "subject":
            key = (r.org, r.value)
            self.subjects[key] = max(self.subjects.get(key, 0.0), r.revoked_at)

    def forget_before(self, cutoff: float) -> None:
        self.tokens = {k: v for k, v in self.tokens.items() if v >= cutoff}
        self.sessions = {k: v for k, v in self.sessions.items() if v >= cutoff}
        self.subjects = {k: v for k, v in self.subjects.items() if v >= cutoff}

    def __len__(self) -> int:
        return len(self.tokens) + len(self.sessions) + len(self.subjects)

    def reason(self, p: Principal) -> str | None:
        if p.jti in self.tokens:
            return "token"
        if any(parent in self.tokens for parent in p.parents):
            return "parent_token"
        if p.sid and p.sid in self.sessions:
            return "session"
        # A subject revocation ends the tokens issued up to its instant, compared in
        # microseconds: a token minted after it, even within the same second, stays valid.
        at = self.subjects.get((p.org, p.sub))
        if at is not None and round(at * 1_000_000) >= p.issued_us:
            return "subject"
        for sub, issued_us in p.parent_subjects:
            at = self.subjects.get((p.org, sub))
            if at is not None and round(at * 1_000_000) >= issued_us:
                return "parent_subject"
        return None


class Authenticator:
    def __init__(self, identity: IdentityStore, codec: TokenCodec, bus: Bus | None, grant_ttl: float) -> None:
        self.identity = identity
        self.codec = codec
        self.bus = bus
        self.grant_ttl = grant_ttl
        self._revoked = _RevocationSet({}, {}, {})
        self._grants: dict[tuple[str, str], tuple[float, dict[str, Role]]] = {}
        self._grant_flights: dict[tuple[str, str], asyncio.Future[dict[str, Role]]] = {}
        # Bumped on every invalidation: a read that started before a change never caches its result.
        self._grant_epoch = 0
        self._verified: dict[str, Principal] = {}
        self._subs: list[Consuming] = []
        self._resync: asyncio.Task[None] | None = None
        self._forget_cutoff = 0.0

    async def start(self) -> None:
        if self.bus is not None:
            # Subscribe before loading so a revocation in between is seen by one or the other.
            self._subs.append(await self.bus.consume(LAYOUT.consumer("identity-revocations"), self._on_revoked))
            self._subs.append(await self.bus.consume(LAYOUT.consumer("identity-grants"), self._on_grant))
        await self.reload()
        self._resync = asyncio.create_task(every(RESYNC_SECONDS, self.reload, failed="revocation resync failed", logger=log))

    async def stop(self) -> None:
        if self._resync:
            self._resync.cancel()
        for sub in self._subs:
            await sub.stop()
        self._subs.clear()

    def forget_before(self, cutoff: float) -> None:
        """Drop revocations older than `cutoff` (epoch seconds): every token they could end has
        expired (identity/pruning.py). Later reloads keep them out too."""
        self._forget_cutoff = max(self._forget_cutoff, cutoff)
        self._revoked.forget_before(self._forget_cutoff)

    @property
    def revocations_held(self) -> int:
        """How many revocations this replica holds in memory."""
        return len(self._revoked)

    async def reload(self) -> None:
        fresh = _RevocationSet({}, {}, {})
        for r in await self.identity.revocations():
            fresh.add(r)
        # Keep anything pushed while loading.
        for k, v in self._revoked.tokens.items():
            fresh.tokens.setdefault(k, v)
        for k, v in self._revoked.sessions.items():
            fresh.sessions.setdefault(k, v)
        for key, v in self._revoked.subjects.items():
            fresh.subjects[key] = max(v, fresh.subjects.get(key, 0.0))
        fresh.forget_before(self._forget_cutoff)
        self._revoked = fresh

    async def _on_revoked(self, msg: NatsMessage) -> None:
        try:
            d = json.loads(msg.body)
            self._revoked.add(Revocation(d["org"], d["kind"], d["value"], float(d["revoked_at"])))
        except (ValueError, KeyError):
            log.warning("bad revocation message")

    async def _on_grant(self, msg: NatsMessage) -> None:
        try:
            d = json.loads(msg.body)
            self._forget_grants((d["org"], d["subject"]))
        except (ValueError, KeyError):
            self._forget_grants(None)

    async def publish_revocation(self, r: Revocation) -> None:
        self._revoked.add(r)
        if self.bus is not None:
            payload = {"org": r.org, "kind": r.kind, "value": r.value, "revoked_at": r.revoked_at}
            await self.bus.nc.publish(REVOKED_SUBJECT, json.dumps(payload).encode())
            await self.bus.nc.flush()

    async def publish_grant_change(self, org: str, subject: str) -> None:
        self._forget_grants((org, subject))
        if self.bus is not None:
            await self.bus.nc.publish(GRANTS_SUBJECT, json.dumps({"org": org, "subject": subject}).encode())

    def verify(self, token: str | None) -> Principal:
        if not token:
            raise Unauthenticated(ErrorCode.AUTH_REQUIRED, "a bearer token is required")
        # An agent sends the same token on every call: verify its signature once, then only
        # its expiry (revocation is checked below on every call, cached or not).
        principal = self._verified.get(token)
        if principal is None:
            principal = self.codec.decode(token)
            if len(self._verified) >= VERIFIED_CACHE_MAX:
                self._verified.clear()
            self._verified[token] = principal
        elif principal.exp <= time.time():
            del self._verified[token]
            raise Unauthenticated(ErrorCode.AUTH_EXPIRED, "the token has expired")
        reason = self._revoked.reason(principal)
        if reason is not None:
            raise Unauthenticated(ErrorCode.AUTH_REVOKED, "the token has been revoked", {"reason": reason})
        return principal

    def check_live(self, principal: Principal) -> None:
        """Refuse a principal verified earlier whose token has since expired or been revoked
        (a long poll's answer is not handed to a token revoked while it waited)."""
        if principal.exp <= time.time():
            raise Unauthenticated(ErrorCode.AUTH_EXPIRED, "the token has expired")
        reason = self._revoked.reason(principal)
        if reason is not None:
            raise Unauthenticated(ErrorCode.AUTH_REVOKED, "the token has been revoked", {"reason": reason})

    async def live_grants(self, org: str, subject: str) -> dict[str, Role]:
        key = (org, subject)
        hit = self._grants.get(key)
        now = time.monotonic()
        if hit is not None and hit[0] > now:
            return hit[1]
        # One store read per subject at a time: when an entry expires under load, every call in
        # flight would otherwise read the grants table at once.
        flights = self._grant_flights
        pending = flights.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        epoch = self._grant_epoch
        pending = flights[key] = asyncio.ensure_future(self.identity.grants_of(org, subject))
        try:
            grants = await pending
        finally:
            if flights.get(key) is pending:
                flights.pop(key, None)
        if epoch == self._grant_epoch:
            self._grants[key] = (now + self.grant_ttl, grants)
        return grants

    def _forget_grants(self, key: tuple[str, str] | None) -> None:
        self._grant_epoch += 1
        if key is None:
            self._grants.clear()
            self._grant_flights.clear()
        else:
            self._grants.pop(key, None)
            self._grant_flights.pop(key, None)

    async def role_in(self, principal: Principal, namespace: str) -> Role:
        """min(token claim, live grant) in the namespace."""
        claim = principal.token_role(namespace)
        if claim == Role.NONE:
            return Role.NONE
        grants = await self.live_grants(principal.org, principal.sub)
        live = max(grants.get(namespace, Role.NONE), grants.get("*", Role.NONE))
        return min(claim, live)

    async def org_role(self, principal: Principal) -> Role:
        """The org-wide role: a `*` claim capped by a `*` grant."""
        if "*" not in principal.roles:
            return Role.NONE
        grants = await self.live_grants(principal.org, principal.sub)
        return min(Role.parse(principal.roles["*"]), grants.get("*", Role.NONE))

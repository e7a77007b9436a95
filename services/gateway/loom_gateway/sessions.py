"""Sign-in sessions for people: the dashboard's cookie session and `loom login`'s (docs/dashboard-api.md).

A session is a row of `loom.sessions` (the store of record), found by the SHA-256 of its secret:
the secret is what the browser's HttpOnly cookie (or the CLI's credential file, as its refresh
token) holds, and is never stored. Each replica mints the session's hour-long access token
itself (claim `sid`), with the subject's live grants as its claim, and refreshes it silently;
every op call still checks the live grant, so a session has the subject's grants and no more.
Sign-out writes the row revoked and revokes the `sid` (core's revocation, pushed to every
replica over NATS), which ends every token minted or delegated under the session.

What must happen once across replicas lives on NATS KV (bucket `loom_sessions`): a sign-in
link's single use (create-if-absent on its nonce) and a `loom login` request's approval and
pick-up (compare-and-set). A sign-in link itself is a code signed with LOOM_JWT_SECRET, so the
CLI makes one with or without a running server.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypedDict
from urllib.parse import urlsplit, urlunsplit

from loom_core.bus import kv
from loom_core.bus.layout import KVBucket, ensure_bucket
from loom_core.bus.nats import Bus
from loom_core.chain.ratelimit import RateLimiter
from loom_core.errors import ErrorCode, NotFound, Unauthenticated, ValidationFailed, invalid_field
from loom_core.identity import Authenticator, Principal, TokenCodec
from loom_core.identity.store import IdentityStore
from loom_core.identity.tokens import issued_now, new_token_id
from loom_core.names import check_name, check_subject
from loom_core.roles import Role
from loom_core.runtime import Runtime
from loom_core.store import Migration, Store, ch_time, run_migrations

from .settings import GatewaySettings

SESSION_COOKIE = "loom_session"
CSRF_HEADER = "x-loom-csrf"
BROWSER = "browser"
CLI = "cli"
# The token a session mints is refreshed when it has less than this left.
REFRESH_MARGIN_SECONDS = 300
# A session row read from the store serves this long on a replica; sign-out on another replica
# reaches this one at once anyway, as the `sid` revocation pushed over NATS.
SESSION_CACHE_SECONDS = 30.0
BUCKET = KVBucket("loom_sessions", ttl=3600, history=1)
STREAM = f"KV_{BUCKET.name}"
# Letters a person reads off a terminal and types or compares: no vowels, no look-alikes.
CLI_CODE_ALPHABET = "BCDFGHJKLMNPQRSTVWXZ"

MIGRATIONS = [
    Migration(
        "identity",
        "sessions",
        """
        CREATE TABLE IF NOT EXISTS {db}.sessions (
            secret_hash String, session_id String, org String, subject String, kind LowCardinality(String),
            created_at DateTime64(6, 'UTC'), expires_at DateTime64(6, 'UTC'),
            revoked_at Nullable(DateTime64(6, 'UTC')), version UInt64
        ) ENGINE = ReplacingMergeTree(version) ORDER BY secret_hash""",
    ),
]


@dataclass(frozen=True, slots=True)
class Session:
    session_id: str
    secret_hash: str
    org: str
    subject: str
    kind: str
    created_at: float
    expires_at: float
    revoked: bool = False


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _key(secret: str, purpose: bytes) -> bytes:
    return hmac.new(secret.encode(), purpose, hashlib.sha256).digest()


# --- sign-in links ------------------------------------------------------------------------------


class LoginClaims(TypedDict):
    """What a sign-in code carries (short keys: the code rides in a URL)."""

    o: str  # the org
    s: str  # the subject
    e: int  # when it expires (epoch seconds)
    n: str  # the nonce that makes it single use


def make_login_code(jwt_secret: str, org: str, subject: str, ttl_seconds: int, now: float | None = None) -> str:
    """A single-use sign-in code for `subject` in `org`: its claims and an HMAC under a key
    derived from LOOM_JWT_SECRET. The nonce is what makes it single use (see `LoginCodes`)."""
    check_name("org", org)
    check_subject("subject", subject)
    claims = LoginClaims(o=org, s=subject, e=int((now if now is not None else time.time()) + ttl_seconds), n=secrets.token_hex(16))
    payload = _b64(json.dumps(claims, separators=(",", ":")).encode())
    return f"{payload}.{_b64(hmac.new(_key(jwt_secret, b'loom login code'), payload.encode(), hashlib.sha256).digest())}"


def read_login_code(code: str, jwt_secrets: tuple[str, ...], now: float | None = None) -> LoginClaims:
    """The code's claims, or 401 AUTH_INVALID / AUTH_EXPIRED. Checks the signature (under the
    key or the one before a rotation) and the expiry; not whether it was used."""
    payload, _, sig = code.partition(".")
    try:
        given = _unb64(sig)
    except ValueError:
        given = b""
    for secret in filter(None, jwt_secrets):
        want = hmac.new(_key(secret, b"loom login code"), payload.encode(), hashlib.sha256).digest()
        if hmac.compare_digest(want, given):
            # Signed with our key: the claims are ours as make_login_code wrote them.
            claims: LoginClaims = json.loads(_unb64(payload))
            at = now if now is not None else time.time()
            # The single-use mark lives as long as the bucket keeps it: a code must end first.
            if float(claims["e"]) <= at or float(claims["e"]) > at + BUCKET.ttl:
                raise Unauthenticated(
                    ErrorCode.AUTH_EXPIRED, "this sign-in link has expired: ask an admin for a new one", {"reason": "link_expired"}
                )
            return claims
    raise Unauthenticated(ErrorCode.AUTH_INVALID, "this sign-in link is not valid: ask an admin for a new one", {"reason": "link_invalid"})


LOOPBACK_HOSTS = ("127.0.0.1", "0.0.0.0", "[::1]")


def browser_base(base_url: str) -> str:
    """The URL a person opens for this base: a loopback address reads as `localhost`, the host
    people open Loom at on their own machine, so a link lands where their cookie is."""
    u = urlsplit(base_url.rstrip("/"))
    host = u.hostname or ""
    if f"[{host}]" in LOOPBACK_HOSTS or host in LOOPBACK_HOSTS:
        netloc = f"localhost:{u.port}" if u.port else "localhost"
        return urlunsplit((u.scheme, netloc, u.path, "", ""))
    return base_url.rstrip("/")


# --- the store of record ------------------------------------------------------------------------


class SessionStore:
    """`loom.sessions`: one row per session, replaced (a higher version) when revoked."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def insert(self, s: Session, revoked_at: float | None = None) -> None:
        row = {
            "secret_hash": s.secret_hash,
            "session_id": s.session_id,
            "org": s.org,
            "subject": s.subject,
            "kind": s.kind,
            "created_at": ch_time(datetime.fromtimestamp(s.created_at, UTC)),
            "expires_at": ch_time(datetime.fromtimestamp(s.expires_at, UTC)),
            "revoked_at": ch_time(datetime.fromtimestamp(revoked_at, UTC)) if revoked_at is not None else None,
            "version": time.time_ns(),
        }
        await self.store.insert("{db}.sessions", [row])

    async def by_secret_hash(self, secret_hash: str) -> Session | None:
        rows = await self.store.query(
            "SELECT session_id, org, subject, kind, toFloat64(created_at) AS created, toFloat64(expires_at) AS expires,"
            " revoked_at IS NOT NULL AS revoked FROM {db}.sessions FINAL WHERE secret_hash = {h:String}",
            {"h": secret_hash},
        )
        if not rows:
            return None
        r = rows[0]
        return Session(
            r["session_id"], secret_hash, r["org"], r["subject"], r["kind"], float(r["created"]), float(r["expires"]), bool(r["revoked"])
        )


# --- the service --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SessionLimits:
    session_ttl_seconds: int
    token_ttl_seconds: int
    link_ttl_seconds: int


@dataclass(slots=True)
class _Minted:
    token: str
    principal: Principal
    roles: dict[str, str]


@dataclass(eq=False, slots=True)
class SessionService:
    """Sessions of one replica: create, resolve a secret, mint and refresh the access token, end."""

    store: SessionStore
    identity: IdentityStore
    auth: Authenticator
    codec: TokenCodec
    bus: Bus
    jwt_secrets: tuple[str, ...]
    limits: SessionLimits
    limiter: RateLimiter
    _sessions: dict[str, tuple[float, Session]] = field(default_factory=dict, init=False)
    _tokens: dict[str, _Minted] = field(default_factory=dict, init=False)

    @classmethod
    async def open(
        cls,
        store: Store,
        identity: IdentityStore,
        auth: Authenticator,
        codec: TokenCodec,
        bus: Bus,
        jwt_secrets: tuple[str, ...],
        limits: SessionLimits,
        limiter: RateLimiter,
    ) -> SessionService:
        if limits.link_ttl_seconds > BUCKET.ttl:
            raise ValueError(f"LOOM_LOGIN_LINK_TTL_SECONDS: at most {BUCKET.ttl:.0f} (how long a link's single use is remembered)")
        await run_migrations(store, MIGRATIONS)
        await ensure_bucket(bus, BUCKET)
        return cls(SessionStore(store), identity, auth, codec, bus, jwt_secrets, limits, limiter)

    def admit(self, client: str) -> None:
        """A call that carries no session (sign in, `loom login`, refresh): limited per client
        address at the admin rate class, since each costs a store read or a KV write."""
        self.limiter.check("", f"client:{client}", "admin")

    # --- sessions

    async def create(self, org: str, subject: str, kind: str) -> tuple[Session, str]:
        """A new session and its secret (the cookie's value, or the CLI's refresh token)."""
        secret = secrets.token_urlsafe(32)
        now = time.time()
        s = Session(f"sid-{secrets.token_hex(16)}", _hash(secret), org, subject, kind, now, now + self.limits.session_ttl_seconds)
        await self.store.insert(s)
        self._sessions[s.secret_hash] = (time.monotonic() + SESSION_CACHE_SECONDS, s)
        return s, secret

    async def login(self, code: str) -> tuple[Session, str]:
        """Redeem a sign-in link: 401 when it is invalid, expired or was used already."""
        if not isinstance(code, str) or not code or len(code) > 1024:
            raise invalid_field("code", "the sign-in link's code is required")
        claims = read_login_code(code, self.jwt_secrets)
        await self._once(f"login.{claims['n']}", "this sign-in link was already used: ask an admin for a new one", "link_used")
        return await self.create(str(claims["o"]), str(claims["s"]), BROWSER)

    async def _once(self, key: str, message: str, reason: str) -> None:
        try:
            await kv.create_if_absent(self.bus.js, STREAM, f"$KV.{BUCKET.name}.{key}", b"used", direct=False)
        except kv.WrongRevision:
            raise Unauthenticated(ErrorCode.AUTH_INVALID, message, {"reason": reason}) from None

    async def resolve(self, secret: str, kind: str) -> Session:
        """The live session a secret names, or 401 (unknown, expired, signed out)."""
        h = _hash(secret)
        hit = self._sessions.get(h)
        if hit is not None and hit[0] > time.monotonic():
            s = hit[1]
        else:
            found = await self.store.by_secret_hash(h)
            if found is None:
                raise Unauthenticated(ErrorCode.AUTH_INVALID, "no such sign-in session: sign in again", {"reason": "session_unknown"})
            s = found
            if len(self._sessions) > 10_000:
                self._sessions.clear()
            self._sessions[h] = (time.monotonic() + SESSION_CACHE_SECONDS, s)
        if s.kind != kind:
            raise Unauthenticated(ErrorCode.AUTH_INVALID, "no such sign-in session: sign in again", {"reason": "session_unknown"})
        if s.revoked:
            raise Unauthenticated(ErrorCode.AUTH_REVOKED, "this sign-in session has ended: sign in again", {"reason": "session"})
        if s.expires_at <= time.time():
            raise Unauthenticated(ErrorCode.AUTH_EXPIRED, "this sign-in session has expired: sign in again", {"reason": "session_expired"})
        return s

    async def access_token(self, s: Session) -> tuple[str, Principal]:
        """The session's current access token: this replica's, re-minted when it nears its end
        or the subject's grants changed. Raises 401 AUTH_REVOKED once the session is revoked
        anywhere (the `sid` revocation every replica holds)."""
        grants = await self.auth.live_grants(s.org, s.subject)
        roles = {ns: r.label for ns, r in sorted(grants.items()) if r >= Role.VIEWER}
        minted = self._tokens.get(s.session_id)
        now = time.time()
        if minted is None or minted.roles != roles or minted.principal.exp - now < REFRESH_MARGIN_SECONDS:
            iat, iat_us = issued_now()
            principal = Principal(
                jti=new_token_id("session-"),
                sub=s.subject,
                org=s.org,
                roles=roles,
                iat=iat,
                iat_us=iat_us,
                exp=int(min(iat + self.limits.token_ttl_seconds, s.expires_at)),
                default_namespace=next((ns for ns in roles if ns != "*"), ""),
                consumer=f"loom-{s.kind}",
                sid=s.session_id,
                # The session as the token's parent, issued when it was made: revoking the
                # subject ends the session's tokens, whenever and wherever they are minted.
                parent_subjects=((s.subject, round(s.created_at * 1_000_000)),),
            )
            minted = _Minted(self.codec.encode(principal), principal, roles)
            if len(self._tokens) > 10_000:
                self._tokens.clear()
            self._tokens[s.session_id] = minted
        self.auth.verify(minted.token)  # a revoked session, pushed from any replica
        return minted.token, minted.principal

    async def describe(self, s: Session) -> dict[str, Any]:
        """What the dashboard shows of a session: who, where, and each namespace's role."""
        grants = await self.auth.live_grants(s.org, s.subject)
        wide = grants.get("*", Role.NONE)
        namespaces = []
        for row in await self.identity.list_namespaces(s.org):
            role = max(grants.get(row["name"], Role.NONE), wide)
            if role >= Role.VIEWER:
                namespaces.append({"namespace": row["name"], "role": role.label})
        return {
            "subject": s.subject,
            "org": s.org,
            "namespaces": namespaces,
            "session_id": s.session_id,
            "expires_at": _rfc3339(s.expires_at),
        }

    def csrf_token(self, secret: str) -> str:
        """The session's CSRF token: derived from its secret, so every replica checks it alone."""
        return _b64(hmac.new(_key(self.jwt_secrets[0], b"loom csrf"), secret.encode(), hashlib.sha256).digest())

    def csrf_ok(self, secret: str, given: str) -> bool:
        for key in filter(None, self.jwt_secrets):
            want = _b64(hmac.new(_key(key, b"loom csrf"), secret.encode(), hashlib.sha256).digest())
            if hmac.compare_digest(want.encode(), given.encode()):
                return True
        return False

    async def end(self, s: Session) -> None:
        """Sign out: the row revoked, and the `sid` revoked everywhere (every token under it)."""
        now = time.time()
        await self.store.insert(s, revoked_at=now)
        self._sessions.pop(s.secret_hash, None)
        self._tokens.pop(s.session_id, None)
        r = await self.identity.revoke(s.org, "session", s.session_id, s.subject)
        await self.auth.publish_revocation(r)

    # --- `loom login`

    def _cli_subject(self, kind: str, value: str) -> str:
        return f"$KV.{BUCKET.name}.cli-{kind}.{_hash(value)}"

    async def cli_start(self) -> dict[str, Any]:
        """A `loom login` request: a code a person approves, and the poll token the CLI keeps."""
        code = "".join(secrets.choice(CLI_CODE_ALPHABET) for _ in range(8))
        code = f"{code[:4]}-{code[4:]}"
        poll_token = secrets.token_urlsafe(32)
        expires = time.time() + self.limits.link_ttl_seconds
        js = self.bus.js
        await kv.create_if_absent(
            js, STREAM, self._cli_subject("poll", poll_token), kv.dumps({"state": "pending", "e": expires}), direct=False
        )
        await kv.create_if_absent(
            js, STREAM, self._cli_subject("code", code), kv.dumps({"poll": _hash(poll_token), "e": expires}), direct=False
        )
        return {"code": code, "poll_token": poll_token, "expires_at": _rfc3339(expires), "interval_s": 2}

    async def cli_approve(self, code: str, approver: Session) -> dict[str, Any]:
        """The signed-in person approves a `loom login` request: it becomes a session of theirs."""
        if not isinstance(code, str) or not code:
            raise invalid_field("code", "the code `loom login` printed is required")
        js = self.bus.js
        entry = await kv.read(js, STREAM, self._cli_subject("code", code.strip().upper()), direct=False)
        if entry is None or entry.data is None or json.loads(entry.data)["e"] <= time.time():
            raise NotFound(
                ErrorCode.RESOURCE_NOT_FOUND, "no such `loom login` request: it expired or the code is wrong", {"reason": "cli_code"}
            )
        poll_subject = f"$KV.{BUCKET.name}.cli-poll.{json.loads(entry.data)['poll']}"
        poll = await kv.read(js, STREAM, poll_subject, direct=False)
        if poll is None or poll.data is None or json.loads(poll.data).get("state") != "pending":
            raise NotFound(ErrorCode.RESOURCE_NOT_FOUND, "this `loom login` request was already approved or used", {"reason": "cli_code"})
        state = {"state": "approved", "e": json.loads(poll.data)["e"], "org": approver.org, "subject": approver.subject}
        try:
            await kv.update_at(js, poll_subject, kv.dumps(state), poll.revision)
        except kv.WrongRevision:
            raise NotFound(
                ErrorCode.RESOURCE_NOT_FOUND, "this `loom login` request was already approved or used", {"reason": "cli_code"}
            ) from None
        return {"approved": True, "subject": approver.subject, "org": approver.org}

    async def cli_poll(self, poll_token: str) -> dict[str, Any]:
        """`{"status": "pending"}` until approved; then, once, the CLI's credential."""
        if not isinstance(poll_token, str) or not poll_token:
            raise invalid_field("poll_token", "required")
        js = self.bus.js
        subject = self._cli_subject("poll", poll_token)
        entry = await kv.read(js, STREAM, subject, direct=False)
        gone = Unauthenticated(
            ErrorCode.AUTH_INVALID, "this `loom login` request expired or was used: run `loom login` again", {"reason": "cli_request"}
        )
        if entry is None or entry.data is None:
            raise gone
        state = json.loads(entry.data)
        if state["e"] <= time.time():
            raise Unauthenticated(
                ErrorCode.AUTH_EXPIRED, "this `loom login` request expired: run `loom login` again", {"reason": "cli_request"}
            )
        if state["state"] != "approved":
            return {"status": "pending"}
        try:
            await kv.update_at(js, subject, b"", entry.revision, headers={kv.KV_OPERATION: "DEL"})
        except kv.WrongRevision:
            raise gone from None
        s, secret = await self.create(str(state["org"]), str(state["subject"]), CLI)
        return {"status": "approved", "refresh_token": secret, **await self.refresh_answer(s)}

    async def refresh_answer(self, s: Session) -> dict[str, Any]:
        token, p = await self.access_token(s)
        return {
            "token": token,
            "expires_at": _rfc3339(p.exp),
            "session_id": s.session_id,
            "session_expires_at": _rfc3339(s.expires_at),
            "subject": s.subject,
            "org": s.org,
        }


def _rfc3339(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")


def body_field(body: Any, name: str) -> str:
    """A string field of a JSON object body, or 422 naming it."""
    if not isinstance(body, dict):
        raise ValidationFailed("the body must be a JSON object", {"field": "(body)", "reason": "invalid"})
    value = body.get(name)
    if not isinstance(value, str) or not value:
        raise invalid_field(name, "required (a string)")
    return value


__all__ = ["CSRF_HEADER", "SESSION_COOKIE", "Session", "SessionService", "make_login_code", "read_login_code"]


async def open_sessions(runtime: Runtime, gateway: GatewaySettings) -> SessionService:
    """The sessions of a gateway that holds the runtime (store, bus, identity)."""
    s = runtime.settings
    limits = SessionLimits(gateway.session_ttl_seconds, gateway.session_token_ttl_seconds, gateway.login_link_ttl_seconds)
    secrets_ = (s.jwt_secret, s.jwt_secret_previous)
    return await SessionService.open(
        runtime.store, runtime.identity, runtime.auth, runtime.codec, runtime.bus, secrets_, limits, runtime.limiter
    )


async def issue_login_code(identity: IdentityStore, jwt_secret: str, org: str, subject: str, ttl_seconds: int) -> dict[str, Any]:
    """`loom admin login-link`: a sign-in code for a subject that holds a grant in the org."""
    check_name("org", org)
    check_subject("subject", subject)
    if not await identity.grants_of(org, subject):
        raise NotFound(
            ErrorCode.RESOURCE_NOT_FOUND,
            f"{subject} holds no grant in org {org!r}: grant one first (grants.set), then make the link",
            {"reason": "no_grant", "org": org, "subject": subject},
        )
    return {"code": make_login_code(jwt_secret, org, subject, ttl_seconds), "expires_in_s": ttl_seconds, "org": org, "subject": subject}

"""NATS subscriptions to task events, authorised by Loom tokens (nats-server auth callout).

Task events are published on `loom.tasks.<org>.<namespace>.<inbox>.<kind>` (namespace: the
inbox's owner namespace). An agent subscribes with nats-py, presenting its Loom token:

    nc = await nats.connect(url, token=LOOM_TOKEN)          # or user="loom", password=LOOM_TOKEN
    await nc.subscribe("loom.tasks.acme.private.>", cb=on_event)

How it is enforced, in nats-server itself:

- Two accounts. LOOM holds Loom's own connections (user LOOM_NATS_INTERNAL_USER, listed in the
  callout's `auth_users`, so it bypasses the callout) and JetStream; it exports the stream
  `loom.tasks.>`. AGENTS imports it and holds every token-authenticated connection. No agent
  ever shares an account with Loom's KV leases, JetStream API traffic or reply inboxes.
- Every other connection is sent by the server to `$SYS.REQ.USER.AUTH`; NatsAuthCallout (one
  per replica, in a queue group) verifies the token exactly as every op does (signature,
  expiry, revocations pushed over NATS) and answers with a user JWT, signed by the callout
  issuer's account nkey, that may SUBSCRIBE only to `loom.tasks.<org>.<ns>.>` for each namespace
  the token may read (viewer or above: the token's claim capped by the live grant), and may
  PUBLISH nothing. A subscription outside those subjects is refused by the server
  ("Permissions Violation"); a bad, expired or revoked token cannot connect at all.
- Open connections follow revocations and grant changes. Each replica remembers the
  connections it authorised (server id, client id, token); when a revocation (token, session,
  subject, or an ancestor of any) or a grant change is pushed on the identity subjects, it has
  the server disconnect them through the system account (`$SYS.REQ.SERVER.<id>.KICK`, as
  user `<LOOM_NATS_INTERNAL_USER>-sys`). The client reconnects at once and is checked again: a
  revoked token is refused, a changed grant gets its new subjects. As a backstop (a replica
  that died forgets its connections), the user JWT expires after
  LOOM_NATS_AUTH_SESSION_SECONDS, or with the token if sooner; nats-py closes the connection
  then, and the agent connects again. Namespaces created after a connection was authorised
  are seen on its next connect.

There is no `_INBOX.>` permission: an agent may publish nothing, so it can make no request
that a reply would answer.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import re
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import nats
import nkeys
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from faststream.nats.message import NatsMessage
from nats.aio.client import Client as NatsClient

from ..errors import ErrorCode, Forbidden, LoomError, Unauthenticated
from ..identity.authenticator import GRANTS_SUBJECT, REVOKED_SUBJECT, Authenticator
from ..identity.store import IdentityStore
from ..identity.tokens import Principal
from ..local_secrets import DEFAULT_INTERNAL_USER, new_account_seed
from ..roles import Role
from ..settings import Settings
from . import task_subjects
from .layout import BusLayout, Consumer
from .nats import Bus, Consuming

log = logging.getLogger(__name__)

AUTH_SUBJECT = "$SYS.REQ.USER.AUTH"
REQUEST_AUDIENCE = "nats-authorization-request"
QUEUE_GROUP = "loom-nats-auth"
LOOM_ACCOUNT = "LOOM"
SYSTEM_ACCOUNT = "SYS"
SYSTEM_USER_SUFFIX = "-sys"
KICK_SUBJECT = "$SYS.REQ.SERVER.{server_id}.KICK"
# A pushed revocation or grant change reaches every replica's Authenticator on the same message;
# the kick waits this long so the client's reconnect is judged by the updated state.
KICK_DELAY_SECONDS = 0.2
EVENTS_EXPORT = task_subjects.ALL

# One replica answers each connection (a queue group); every replica hears every revocation and
# grant change and disconnects what it let in. Core NATS: nothing to ack.
LAYOUT = BusLayout(
    consumers=(
        Consumer("nats-auth-requests", AUTH_SUBJECT, ack=None, queue=QUEUE_GROUP, description="nats-server's auth callout requests"),
        Consumer("nats-auth-revocations", REVOKED_SUBJECT, ack=None, description="disconnect subscribers whose token was revoked"),
        Consumer("nats-auth-grants", GRANTS_SUBJECT, ack=None, description="disconnect subscribers whose grant changed"),
    )
)

_TOKEN = re.compile(r"^[a-z0-9_-]+$")  # a NATS subject token Loom names can always be
_CONF_VALUE = re.compile(r"^[A-Za-z0-9._~+/=@:-]+$")  # what a rendered config value may hold


# --- NATS JWTs (nats-io/jwt v2: ed25519-nkey over "<header>.<payload>", base64url unpadded)

_HEADER = {"typ": "JWT", "alg": "ed25519-nkey"}


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def public_key(seed: str) -> str:
    """The public key (A… for an account) of an nkey seed."""
    return str(nkeys.from_seed(seed.encode()).public_key.decode())


def _verify_key(public: str, prefix: int) -> Ed25519PublicKey:
    raw = base64.b32decode(public + "=" * (-len(public) % 8))
    if len(raw) != 35 or raw[0] != prefix or nkeys.crc16(bytearray(raw[:33])) != int.from_bytes(raw[33:], "little"):
        raise ValueError("not a public nkey of the expected kind")
    return Ed25519PublicKey.from_public_bytes(raw[1:33])


def encode_jwt(claims: dict[str, Any], seed: str) -> str:
    kp = nkeys.from_seed(seed.encode())
    body = dict(claims)
    body["iss"] = kp.public_key.decode()
    body["iat"] = int(time.time())
    body["jti"] = _b64(secrets.token_bytes(16))
    head = f"{_b64(json.dumps(_HEADER, separators=(',', ':')).encode())}.{_b64(json.dumps(body, separators=(',', ':')).encode())}"
    return f"{head}.{_b64(kp.sign(head.encode()))}"


def decode_jwt(token: str, issuer_prefix: int) -> dict[str, Any]:
    """Claims of a NATS JWT whose signature verifies against its own `iss` of the given kind."""
    head, payload, sig = token.split(".")
    claims: dict[str, Any] = json.loads(_unb64(payload))
    key = _verify_key(str(claims.get("iss", "")), issuer_prefix)
    try:
        key.verify(_unb64(sig), f"{head}.{payload}".encode())
    except InvalidSignature as exc:
        raise ValueError("bad signature") from exc
    exp = int(claims.get("exp") or 0)
    if exp and exp < time.time():
        raise ValueError("expired")
    return claims


# --- the server's configuration


def system_user(internal_user: str) -> str:
    """The system-account user Loom disconnects revoked subscribers with."""
    return internal_user + SYSTEM_USER_SUFFIX


def render_nats_config(
    *,
    issuer_public_key: str,
    internal_user: str,
    internal_password: str,
    agents_account: str = "AGENTS",
) -> str:
    """nats-server configuration for Loom with the auth callout (JetStream, store dir and
    listen address stay on the command line)."""
    for label, value in (
        ("issuer", issuer_public_key),
        ("user", internal_user),
        ("password", internal_password),
        ("account", agents_account),
    ):
        if not _CONF_VALUE.match(value):
            raise ValueError(f"the NATS {label} may hold only letters, digits and ._~+/=@:-")
    if agents_account in (LOOM_ACCOUNT, SYSTEM_ACCOUNT):
        raise ValueError("the agents account must be an account of its own")
    sys_user = system_user(internal_user)
    return f"""# Rendered by loom_core.bus.auth_callout.render_nats_config.
# {LOOM_ACCOUNT}: Loom's own connections and JetStream. {agents_account}: agents authenticated by the
# auth callout with their Loom token, which may only subscribe to task events they may read.
# {SYSTEM_ACCOUNT}: the system account; Loom uses it only to disconnect a revoked subscriber.
accounts {{
  {LOOM_ACCOUNT} {{
    jetstream: enabled
    users: [ {{ user: "{internal_user}", password: "{internal_password}" }} ]
    exports: [ {{ stream: "{EVENTS_EXPORT}" }} ]
  }}
  {agents_account} {{
    imports: [ {{ stream: {{ account: {LOOM_ACCOUNT}, subject: "{EVENTS_EXPORT}" }} }} ]
  }}
  {SYSTEM_ACCOUNT} {{
    users: [ {{ user: "{sys_user}", password: "{internal_password}" }} ]
  }}
}}
system_account: {SYSTEM_ACCOUNT}
authorization {{
  auth_callout {{
    issuer: "{issuer_public_key}"
    account: {LOOM_ACCOUNT}
    auth_users: [ "{internal_user}", "{sys_user}" ]
  }}
}}
"""


def embedded_nats_auth(settings: Settings) -> tuple[str, Settings]:
    """For `loom up`: the nats-server config, and settings carrying the internal credentials
    and issuer seed (each generated for this start unless configured)."""
    seed = settings.nats_auth_callout_issuer_seed or new_account_seed()
    user = settings.nats_internal_user or DEFAULT_INTERNAL_USER
    password = settings.nats_internal_password or secrets.token_urlsafe(32)
    config = render_nats_config(
        issuer_public_key=public_key(seed), internal_user=user, internal_password=password, agents_account=settings.nats_auth_agents_account
    )
    updated = settings.model_copy(
        update={"nats_auth_callout_issuer_seed": seed, "nats_internal_user": user, "nats_internal_password": password}
    )
    return config, updated


# --- what a token may subscribe to


async def readable_namespaces(identity: IdentityStore, auth: Authenticator, principal: Principal) -> list[str]:
    """Namespaces the token may read now: claim and live grant both viewer or above."""
    names = [str(r["name"]) for r in await identity.list_namespaces(principal.org)] if "*" in principal.roles else list(principal.roles)
    out: list[str] = []
    for name in sorted(set(names)):
        if _TOKEN.match(name) and await auth.role_in(principal, name) >= Role.VIEWER:
            out.append(name)
    return out


def user_claims(user_nkey: str, principal: Principal, namespaces: Sequence[str], *, account: str, expires: int) -> dict[str, Any]:
    return {
        "sub": user_nkey,
        "aud": account,  # config mode: the account the connection is placed in
        "name": principal.sub,
        "exp": expires,
        "nats": {
            "pub": {"deny": [">"]},
            "sub": {"allow": [task_subjects.namespace_filter(principal.org, ns) for ns in namespaces]},
            "subs": -1,
            "data": -1,
            "payload": -1,
            "type": "user",
            "version": 2,
        },
    }


@dataclass(frozen=True, slots=True)
class _Authorised:
    """A connection this replica let in: where it is and which token it showed."""

    server_id: str
    cid: int
    principal: Principal
    expires: int

    def affected_by_revocation(self, org: str, kind: str, value: str) -> bool:
        p = self.principal
        if kind == "token":
            return value == p.jti or value in p.parents
        if kind == "session":
            return bool(p.sid) and value == p.sid
        if kind == "subject":
            return org == p.org and (value == p.sub or any(value == sub for sub, _ in p.parent_subjects))
        return False

    def affected_by_grant(self, org: str, subject: str) -> bool:
        p = self.principal
        return org == p.org and (subject == p.sub or any(subject == sub for sub, _ in p.parent_subjects))


class NatsAuthCallout:
    """Answers the server's `$SYS.REQ.USER.AUTH` requests with Loom's verdict on a token, and
    disconnects the connections it let in when their token is revoked or their grant changes."""

    def __init__(
        self, bus: Bus, auth: Authenticator, identity: IdentityStore, settings: Settings, *, issuer_seed: str | None = None
    ) -> None:
        s = settings
        self.bus = bus
        self.auth = auth
        self.identity = identity
        self.settings = settings
        self.seed = issuer_seed or s.nats_auth_callout_issuer_seed
        if not self.seed:
            raise ValueError("LOOM_NATS_AUTH_CALLOUT_ISSUER_SEED is empty")
        self.issuer = public_key(self.seed)
        self.account = s.nats_auth_agents_account
        self.session_seconds = max(1, int(s.nats_auth_session_seconds))
        self._subs: list[Consuming] = []
        self._inflight: set[asyncio.Task[None]] = set()
        self._conns: dict[tuple[str, int], _Authorised] = {}
        self._system: NatsClient | None = None

    async def start(self) -> None:
        self._subs.append(await self.bus.consume(LAYOUT.consumer("nats-auth-requests"), self._on_request))
        self._subs.append(await self.bus.consume(LAYOUT.consumer("nats-auth-revocations"), self._on_revoked))
        self._subs.append(await self.bus.consume(LAYOUT.consumer("nats-auth-grants"), self._on_grant))
        await self.bus.nc.flush()
        await self._connect_system()

    async def _connect_system(self) -> None:
        s = self.settings
        if not s.nats_internal_user:
            return
        at = self.bus.nc.connected_url  # the server this replica reached (credentials dropped)
        if at is None or not at.hostname:
            return
        url = f"{at.scheme}://{at.hostname}:{at.port or 4222}"
        try:
            self._system = await nats.connect(
                url, name="loom-nats-auth-kicker", user=system_user(s.nats_internal_user), password=s.nats_internal_password,
                max_reconnect_attempts=-1, reconnect_time_wait=0.5, connect_timeout=2, allow_reconnect=True,
            )  # fmt: skip
        except Exception as exc:  # noqa: BLE001 - without it, revocation waits for the session bound
            log.warning("no NATS system-account connection (%s): a revoked subscriber stays until its session ends", type(exc).__name__)
            self._system = None

    async def stop(self) -> None:
        for sub in self._subs:
            await sub.stop()
        self._subs.clear()
        for t in list(self._inflight):
            t.cancel()
        if self._system is not None:
            with contextlib.suppress(Exception):
                await self._system.close()
            self._system = None

    def _spawn(self, coro: Any) -> None:
        t = asyncio.create_task(coro)
        self._inflight.add(t)
        t.add_done_callback(self._inflight.discard)

    async def _on_request(self, msg: NatsMessage) -> None:
        # Answer concurrently: one slow grant lookup must not hold every other connection.
        self._spawn(self._answer(msg))

    async def _answer(self, msg: NatsMessage) -> None:
        try:
            request = decode_jwt(msg.body.decode(), nkeys.PREFIX_BYTE_SERVER)
            nats_claims = request["nats"]
            user_nkey = str(nats_claims["user_nkey"])
            server_id = str(nats_claims["server_id"]["id"])
            cid = int((nats_claims.get("client_info") or {}).get("id") or 0)
            if request.get("aud") != REQUEST_AUDIENCE or request.get("sub") != self.issuer:
                raise ValueError("not an authorization request for this issuer")
        except Exception as exc:  # noqa: BLE001 - unanswerable: the server times the client out
            log.warning("malformed auth callout request: %s", type(exc).__name__)
            return
        opts = nats_claims.get("connect_opts") or {}
        token = str(opts.get("auth_token") or opts.get("pass") or "")
        response: dict[str, Any] = {"sub": user_nkey, "aud": server_id, "nats": {"type": "authorization_response", "version": 2}}
        try:
            principal, user_jwt, expires = await self._authorize(token, user_nkey)
            response["nats"]["jwt"] = user_jwt
        except LoomError as exc:
            # The server logs this; the client only sees "Authorization Violation".
            response["nats"]["error"] = exc.code
        except Exception as exc:  # noqa: BLE001 - never answer yes by accident
            log.warning("auth callout failed: %s", type(exc).__name__)
            response["nats"]["error"] = ErrorCode.INTERNAL.value
        else:
            self._remember(_Authorised(server_id, cid, principal, expires))
        raw = msg.raw_message
        if raw.reply:
            await raw.respond(encode_jwt(response, self.seed).encode())

    async def _authorize(self, token: str, user_nkey: str) -> tuple[Principal, str, int]:
        """The token's principal, its signed user JWT and when that expires; or a LoomError."""
        principal = self.auth.verify(token)  # signature, expiry, pushed revocations
        if not _TOKEN.match(principal.org):
            raise Unauthenticated(ErrorCode.AUTH_INVALID, "this org's events have no NATS subject")
        namespaces = await readable_namespaces(self.identity, self.auth, principal)
        if not namespaces:
            raise Forbidden(ErrorCode.AUTH_INSUFFICIENT, "the token may read no namespace")
        expires = min(int(principal.exp), int(time.time()) + self.session_seconds)
        return (
            principal,
            encode_jwt(user_claims(user_nkey, principal, namespaces, account=self.account, expires=expires), self.seed),
            expires,
        )

    # --- open connections follow revocations and grant changes

    def _remember(self, conn: _Authorised) -> None:
        now = time.time()
        if len(self._conns) % 256 == 0:
            # Connections that ended on their own leave entries behind until their JWT's end.
            for key in [k for k, c in self._conns.items() if c.expires < now]:
                del self._conns[key]
        self._conns[(conn.server_id, conn.cid)] = conn

    async def _on_revoked(self, msg: NatsMessage) -> None:
        try:
            d = json.loads(msg.body)
            org, kind, value = str(d["org"]), str(d["kind"]), str(d["value"])
        except (ValueError, KeyError, TypeError):
            return
        hit = [c for c in self._conns.values() if c.affected_by_revocation(org, kind, value)]
        if hit:
            self._spawn(self._kick(hit))

    async def _on_grant(self, msg: NatsMessage) -> None:
        try:
            d = json.loads(msg.body)
            org, subject = str(d["org"]), str(d["subject"])
        except (ValueError, KeyError, TypeError):
            return
        hit = [c for c in self._conns.values() if c.affected_by_grant(org, subject)]
        if hit:
            self._spawn(self._kick(hit))

    async def _kick(self, conns: list[_Authorised]) -> None:
        await asyncio.sleep(KICK_DELAY_SECONDS)
        for c in conns:
            self._conns.pop((c.server_id, c.cid), None)
            if self._system is None or not c.cid:
                continue
            for attempt in range(3):
                try:
                    await self._system.request(KICK_SUBJECT.format(server_id=c.server_id), json.dumps({"cid": c.cid}).encode(), timeout=2)
                    break
                except Exception as exc:  # noqa: BLE001 - retried; the session bound still ends it
                    if attempt == 2:
                        log.warning("could not disconnect a revoked NATS subscriber: %s", type(exc).__name__)

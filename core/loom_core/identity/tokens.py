"""Loom tokens: HS256 JWTs (python-jose) with the claims ARCHITECTURE.md fixes."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from jose import ExpiredSignatureError, JWTError, jwt

from ..errors import ErrorCode, Unauthenticated
from ..roles import Role

ALGORITHM = "HS256"


@dataclass(frozen=True, slots=True)
class Principal:
    """A verified token's claims."""

    jti: str
    sub: str
    org: str
    roles: dict[str, str]
    iat: int
    exp: int
    default_namespace: str = ""
    read_scope: tuple[str, ...] = ()
    consumer: str = ""
    parents: tuple[str, ...] = ()
    # Each ancestor subject with its token's issue time in microseconds (see `issued_us`).
    parent_subjects: tuple[tuple[str, int], ...] = ()
    sid: str = ""
    # The issue time in microseconds (claim `iat_us`): a subject revoked within the same second
    # as a mint still tells the two apart. 0 in tokens minted before the claim existed.
    iat_us: int = 0
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def issued_us(self) -> int:
        """When the token was issued, in microseconds (whole seconds for tokens without `iat_us`)."""
        return self.iat_us or self.iat * 1_000_000

    def token_role(self, namespace: str) -> Role:
        """The role the token's claim gives in a namespace (before the live grant)."""
        if self.read_scope and namespace not in self.read_scope:
            return Role.NONE
        named = self.roles.get(namespace)
        wide = self.roles.get("*")
        best = Role.parse(named) if named else Role.NONE
        if wide:
            best = max(best, Role.parse(wide))
        return best

    def claims(self) -> dict[str, Any]:
        c: dict[str, Any] = {
            "jti": self.jti,
            "sub": self.sub,
            "org": self.org,
            "roles": self.roles,
            "iat": self.iat,
            "exp": self.exp,
        }
        if self.default_namespace:
            c["ns"] = self.default_namespace
        if self.read_scope:
            c["read_scope"] = list(self.read_scope)
        if self.consumer:
            c["consumer"] = self.consumer
        if self.parents:
            c["parents"] = list(self.parents)
        if self.parent_subjects:
            # [subject, iat seconds, iat microseconds]: readers that know only the first two keep working.
            c["parent_subjects"] = [[s, us // 1_000_000, us] for s, us in self.parent_subjects]
        if self.sid:
            c["sid"] = self.sid
        if self.iat_us:
            c["iat_us"] = self.iat_us
        return c

    @classmethod
    def from_claims(cls, c: dict[str, Any]) -> Principal:
        try:
            return cls(
                jti=str(c["jti"]),
                sub=str(c["sub"]),
                org=str(c["org"]),
                roles={str(k): str(v) for k, v in dict(c.get("roles") or {}).items()},
                iat=int(c["iat"]),
                exp=int(c["exp"]),
                default_namespace=str(c.get("ns") or ""),
                read_scope=tuple(c.get("read_scope") or ()),
                consumer=str(c.get("consumer") or ""),
                parents=tuple(c.get("parents") or ()),
                parent_subjects=tuple(_parent_subject(entry) for entry in (c.get("parent_subjects") or ())),
                sid=str(c.get("sid") or ""),
                iat_us=int(c.get("iat_us") or 0),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise Unauthenticated(ErrorCode.AUTH_INVALID, "the token's claims are malformed") from exc


def _parent_subject(entry: Any) -> tuple[str, int]:
    """[subject, iat] (seconds) or [subject, iat, iat_us] -> (subject, issued microseconds)."""
    sub, iat, *rest = entry
    return str(sub), int(rest[0]) if rest else int(iat) * 1_000_000


def issued_now() -> tuple[int, int]:
    """(iat in whole seconds, iat in microseconds) for a token minted now."""
    us = time.time_ns() // 1000
    return us // 1_000_000, us


def new_token_id(prefix: str = "") -> str:
    return f"{prefix}{uuid.uuid4().hex}"


class TokenCodec:
    def __init__(self, secret: str, previous_secret: str = "") -> None:
        if not secret:
            raise ValueError("LOOM_JWT_SECRET is empty")
        self._secret = secret
        self._previous = previous_secret

    def encode(self, principal: Principal) -> str:
        return str(jwt.encode(principal.claims(), self._secret, algorithm=ALGORITHM))

    def decode(self, token: str, now: float | None = None) -> Principal:
        last: Exception | None = None
        for secret in filter(None, (self._secret, self._previous)):
            try:
                claims = jwt.decode(token, secret, algorithms=[ALGORITHM], options={"verify_aud": False})
            except ExpiredSignatureError as exc:
                raise Unauthenticated(ErrorCode.AUTH_EXPIRED, "the token has expired") from exc
            except JWTError as exc:
                last = exc
                continue
            principal = Principal.from_claims(claims)
            if principal.exp <= (now if now is not None else time.time()):
                raise Unauthenticated(ErrorCode.AUTH_EXPIRED, "the token has expired")
            return principal
        raise Unauthenticated(ErrorCode.AUTH_INVALID, "the token is not valid") from last

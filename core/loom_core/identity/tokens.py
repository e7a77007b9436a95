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
    parent_subjects: tuple[tuple[str, int], ...] = ()
    sid: str = ""
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def token_role(self, namespace: str) -> Role:
        """The role the token's claim gives in a namespace (before the live grant)."""
        if self.read_scope and namespace not in self.read_scope:
            return Role.NONE
        named = self.roles.get(namespace)
        wide = self.roles.get("*")
        best = max((Role.parse(r) for r in (named, wide) if r), default=Role.NONE)
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
            c["parent_subjects"] = [[s, i] for s, i in self.parent_subjects]
        if self.sid:
            c["sid"] = self.sid
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
                parent_subjects=tuple((str(s), int(i)) for s, i in (c.get("parent_subjects") or ())),
                sid=str(c.get("sid") or ""),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise Unauthenticated(ErrorCode.AUTH_INVALID, "the token's claims are malformed") from exc


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

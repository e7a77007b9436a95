"""Token codec and the authenticator's revocation rules, without a server."""

from __future__ import annotations

import time
from typing import Any

import pytest
from jose import jwt
from loom_core.errors import Unauthenticated
from loom_core.identity import Authenticator
from loom_core.identity.store import Revocation
from loom_core.identity.tokens import Principal, TokenCodec

SECRET = "unit-secret-0123456789abcdef0123456789"


def principal(**over: Any) -> Principal:
    now = int(time.time())
    base: dict[str, Any] = {"jti": "t-1", "sub": "user:alice", "org": "acme", "roles": {"a": "writer"}, "iat": now, "exp": now + 600}
    base.update(over)
    return Principal(**base)


def code_of(exc: pytest.ExceptionInfo[Unauthenticated]) -> str:
    assert exc.value.http_status == 401
    return exc.value.code


def test_round_trip_keeps_every_claim() -> None:
    codec = TokenCodec(SECRET)
    p = principal(
        default_namespace="a",
        read_scope=("a",),
        consumer="cli",
        parents=("g", "p"),
        parent_subjects=(("user:root", 5), ("user:alice", 6)),
        sid="sid-1",
    )
    assert codec.decode(codec.encode(p)) == p


def test_token_signed_with_another_key_is_invalid() -> None:
    token = TokenCodec("another-secret-0123456789abcdef").encode(principal())
    with pytest.raises(Unauthenticated) as exc:
        TokenCodec(SECRET).decode(token)
    assert code_of(exc) == "AUTH_INVALID"


def test_tampered_payload_is_invalid() -> None:
    token = TokenCodec(SECRET).encode(principal())
    head, _, sig = token.split(".")
    forged = jwt.encode(principal(roles={"*": "admin"}).claims(), "x", algorithm="HS256").split(".")[1]
    with pytest.raises(Unauthenticated) as exc:
        TokenCodec(SECRET).decode(f"{head}.{forged}.{sig}")
    assert code_of(exc) == "AUTH_INVALID"


def test_unsigned_token_is_invalid() -> None:
    unsigned = jwt.encode(principal().claims(), "", algorithm="HS256").rsplit(".", 1)[0] + "."
    with pytest.raises(Unauthenticated) as exc:
        TokenCodec(SECRET).decode(unsigned)
    assert code_of(exc) == "AUTH_INVALID"


@pytest.mark.parametrize("garbage", ["", "abc", "a.b.c", "Bearer x"])
def test_garbage_is_invalid(garbage: str) -> None:
    with pytest.raises(Unauthenticated) as exc:
        TokenCodec(SECRET).decode(garbage)
    assert code_of(exc) == "AUTH_INVALID"


def test_expired_token_is_expired() -> None:
    now = int(time.time())
    token = TokenCodec(SECRET).encode(principal(iat=now - 100, exp=now - 1))
    with pytest.raises(Unauthenticated) as exc:
        TokenCodec(SECRET).decode(token)
    assert code_of(exc) == "AUTH_EXPIRED"


def test_token_signed_with_the_previous_key_still_verifies() -> None:
    token = TokenCodec("old-secret-0123456789abcdef").encode(principal())
    assert TokenCodec(SECRET, previous_secret="old-secret-0123456789abcdef").decode(token).jti == "t-1"


def test_token_missing_a_claim_is_invalid() -> None:
    claims = principal().claims()
    del claims["org"]
    with pytest.raises(Unauthenticated) as exc:
        TokenCodec(SECRET).decode(jwt.encode(claims, SECRET, algorithm="HS256"))
    assert code_of(exc) == "AUTH_INVALID"


def test_empty_secret_is_refused_at_construction() -> None:
    with pytest.raises(ValueError):
        TokenCodec("")


# --- revocation rules (the authenticator without a bus) -----------------------------------------


class _Revocations:
    def __init__(self, rows: list[Revocation]) -> None:
        self.rows = rows

    async def revocations(self) -> list[Revocation]:
        return self.rows


async def authenticator(*rows: Revocation) -> tuple[Authenticator, TokenCodec]:
    codec = TokenCodec(SECRET)
    auth = Authenticator(_Revocations(list(rows)), codec, None, 5.0)  # type: ignore[arg-type]
    await auth.reload()
    return auth, codec


def revoked_reason(auth: Authenticator, token: str) -> str:
    with pytest.raises(Unauthenticated) as exc:
        auth.verify(token)
    assert exc.value.code == "AUTH_REVOKED"
    assert exc.value.detail is not None
    return str(exc.value.detail["reason"])


async def test_no_token_is_auth_required() -> None:
    auth, _ = await authenticator()
    for missing in (None, ""):
        with pytest.raises(Unauthenticated) as exc:
            auth.verify(missing)
        assert exc.value.code == "AUTH_REQUIRED"


async def test_revoked_token_id_and_its_descendants_are_refused() -> None:
    auth, codec = await authenticator(Revocation("acme", "token", "t-1", time.time()))
    assert revoked_reason(auth, codec.encode(principal())) == "token"
    assert revoked_reason(auth, codec.encode(principal(jti="t-2", parents=("t-1",)))) == "parent_token"
    assert auth.verify(codec.encode(principal(jti="t-3"))).jti == "t-3"


async def test_revoked_session_ends_every_token_carrying_it() -> None:
    auth, codec = await authenticator(Revocation("acme", "session", "sid-1", time.time()))
    assert revoked_reason(auth, codec.encode(principal(sid="sid-1"))) == "session"
    assert auth.verify(codec.encode(principal(sid="sid-2"))).sid == "sid-2"


async def test_revoked_subject_ends_tokens_issued_before_not_after() -> None:
    now = int(time.time())
    auth, codec = await authenticator(Revocation("acme", "subject", "user:alice", now - 50))
    assert revoked_reason(auth, codec.encode(principal(iat=now - 100))) == "subject"
    assert auth.verify(codec.encode(principal(iat=now))).sub == "user:alice"
    # The same subject name in another org is untouched.
    assert auth.verify(codec.encode(principal(org="other", iat=now - 100))).org == "other"


async def test_revoked_ancestor_subject_ends_the_delegated_child() -> None:
    now = int(time.time())
    auth, codec = await authenticator(Revocation("acme", "subject", "user:root", now - 50))
    child = principal(sub="user:alice", iat=now, parent_subjects=(("user:root", (now - 100) * 1_000_000),))
    assert revoked_reason(auth, codec.encode(child)) == "parent_subject"
    reissued = principal(sub="user:alice", iat=now, parent_subjects=(("user:root", now * 1_000_000),))
    assert auth.verify(codec.encode(reissued)).sub == "user:alice"


async def test_subject_revocation_tells_tokens_apart_within_one_second() -> None:
    """A token minted after the subject's revocation in the same second is valid; one minted
    before it, in that same second, is not (issue times compare in microseconds)."""
    second = int(time.time())
    revoked_at = second + 0.5
    auth, codec = await authenticator(Revocation("acme", "subject", "user:alice", revoked_at))
    before = principal(jti="t-before", iat=second, iat_us=second * 1_000_000 + 400_000)
    after = principal(jti="t-after", iat=second, iat_us=second * 1_000_000 + 600_000)
    assert revoked_reason(auth, codec.encode(before)) == "subject"
    assert auth.verify(codec.encode(after)).jti == "t-after"
    # A child carries its ancestors' microsecond issue times through the token's claims.
    child = principal(jti="t-child", sub="user:bob", parent_subjects=(("user:alice", second * 1_000_000 + 600_000),))
    assert auth.verify(codec.encode(child)).parent_subjects == (("user:alice", second * 1_000_000 + 600_000),)
    old_child = principal(jti="t-old-child", sub="user:bob", parent_subjects=(("user:alice", second * 1_000_000 + 400_000),))
    assert revoked_reason(auth, codec.encode(old_child)) == "parent_subject"


async def test_token_without_microsecond_claim_counts_its_whole_second() -> None:
    """Tokens minted before `iat_us` existed compare by whole seconds, as before."""
    second = int(time.time())
    auth, codec = await authenticator(Revocation("acme", "subject", "user:alice", second + 0.5))
    assert revoked_reason(auth, codec.encode(principal(iat=second))) == "subject"
    assert auth.verify(codec.encode(principal(jti="t-2", iat=second + 1))).jti == "t-2"


async def test_pushed_revocation_applies_without_a_reload() -> None:
    auth, codec = await authenticator()
    token = codec.encode(principal())
    auth.verify(token)
    await auth.publish_revocation(Revocation("acme", "token", "t-1", time.time()))
    assert revoked_reason(auth, token) == "token"


async def test_verified_token_is_refused_once_it_expires(monkeypatch: pytest.MonkeyPatch) -> None:
    auth, codec = await authenticator()
    now = time.time()
    token = codec.encode(principal(iat=int(now), exp=int(now) + 30))
    assert auth.verify(token).jti == "t-1"  # verified once, then served from the replica's cache
    monkeypatch.setattr(time, "time", lambda: now + 31)
    with pytest.raises(Unauthenticated) as exc:
        auth.verify(token)
    assert exc.value.code == "AUTH_EXPIRED"


async def test_a_token_signed_with_another_key_is_never_cached_as_valid() -> None:
    auth, _ = await authenticator()
    forged = TokenCodec("another-secret-0123456789abcdef").encode(principal())
    for _ in range(2):
        with pytest.raises(Unauthenticated) as exc:
            auth.verify(forged)
        assert exc.value.code == "AUTH_INVALID"

"""Step 1's rules over the caller's verified token (spec 000 "The bridge", step 1), and the
asker's-context line. Pure: the service layer supplies the role and the clock."""

from __future__ import annotations

from dataclasses import dataclass

from loom_core.chain.interceptor import ANSWER_CONSUMER
from loom_core.errors import ErrorCode

ANSWER_TOKEN_PREFIX = "assistant-answer-"


@dataclass(frozen=True, slots=True)
class CallerToken:
    """What step 1 reads of the caller's token."""

    jti: str
    consumer: str
    parents: tuple[str, ...]
    roles: dict[str, str]
    read_scope: tuple[str, ...]
    exp: int
    sid: str


@dataclass(frozen=True, slots=True)
class Refusal:
    """A refusal before LibreChat is called: an error code, a message and the detail."""

    code: ErrorCode
    message: str
    detail: dict[str, object] | None = None


def is_answer_token(t: CallerToken) -> bool:
    """An answer's own token, or one delegated from it (told by its parents' ids)."""
    return (
        t.consumer == ANSWER_CONSUMER or t.jti.startswith(ANSWER_TOKEN_PREFIX) or any(p.startswith(ANSWER_TOKEN_PREFIX) for p in t.parents)
    )


def first_refusal(t: CallerToken, *, namespace: str, now: int, answer_ttl_s: int) -> Refusal | None:
    """The token's own refusals, in the spec's order (the role check comes after)."""
    if is_answer_token(t):
        return Refusal(ErrorCode.ASSISTANT_SELF_CALL, "an assistant answer's token cannot ask the assistant")
    if "*" in t.roles:
        return Refusal(
            ErrorCode.AUTH_INSUFFICIENT,
            "an org-wide token cannot ask the assistant: an answer reads one namespace. Ask with a namespace token:"
            ' mint one with the token.mint op (POST /v1/token.mint {"roles": {"<namespace>": "viewer"}, "ttl_seconds": 3600})'
            " and send it as the bearer token",
            {"reason": "org_wide", "mint": {"op": "token.mint", "roles": {"<namespace>": "viewer"}}},
        )
    if t.read_scope:
        return Refusal(
            ErrorCode.AUTH_INSUFFICIENT,
            "this token's reads are narrower than its namespace",
            {"reason": "narrowed", "namespace": namespace},
        )
    left = t.exp - now
    # A sign-in session's answer token ends with the session, not with the hour-long access token.
    if not t.sid and left < answer_ttl_s:
        return Refusal(
            ErrorCode.AUTH_INSUFFICIENT,
            "the token has less life left than one answer may run",
            {"reason": "token_expires_soon", "left_s": max(0, left), "needed_s": answer_ttl_s},
        )
    return None


def credential_words(t: CallerToken) -> str:
    if t.sid and not t.parents:
        return "a sign-in session"
    if t.parents:
        return "a delegated token (one capped by the grant of whoever made it)"
    if [ns for ns in t.roles if ns != "*"]:
        return "a scoped token (its role per namespace in its claim)"
    return "a token"


def context_line(t: CallerToken, role: str, place: str = "namespace") -> str:
    """The asker's-context line, in fixed words; it names no subject and no namespace."""
    return f"Loom, for how-to answers only: this question comes with {credential_words(t)}, whose role in this {place} is {role}."

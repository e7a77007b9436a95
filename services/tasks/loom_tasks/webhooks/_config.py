"""What inbox.register accepts as a webhook (pure rules, no I/O).

webhook_secret_ref must name one of the inbox org's own variables,
`LOOM_WEBHOOK_SECRET_<ORG>__<NAME>` (spec 003, "Register an inbox"). ORG is the org id byte by
byte: a lower-case letter upper-cased, a digit kept, and every other byte (an upper-case letter
included) written `_` and two upper-case hex digits. So the encoding is injective (no two org
ids share an ORG part), an ORG part never holds `__` (an escape's `_` is always followed by two
hex digits), and a name built for one org can never be read for another.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from loom_core.errors import invalid_field

SECRET_PREFIX = "LOOM_WEBHOOK_SECRET_"
URL_FIELD = "webhook_url"
SECRET_FIELD = "webhook_secret_ref"
MAX_URL_LENGTH = 2048

_NAME = re.compile(r"^[A-Za-z0-9]+$")
_LOWER = frozenset(b"abcdefghijklmnopqrstuvwxyz")
_DIGITS = frozenset(b"0123456789")


def encode_org(org: str) -> str:
    """The ORG part of an org's webhook secret names (acme-corp → ACME_2DCORP)."""
    out: list[str] = []
    for byte in org.encode("utf-8"):
        if byte in _LOWER:
            out.append(chr(byte).upper())
        elif byte in _DIGITS:
            out.append(chr(byte))
        else:
            out.append(f"_{byte:02X}")
    return "".join(out)


def webhook_secret_env_name(org: str, name: str) -> str:
    """`LOOM_WEBHOOK_SECRET_<ORG>__<NAME>` for this org; NAME is letters and digits."""
    if not _NAME.match(name):
        raise ValueError("a webhook secret NAME is letters and digits")
    return f"{SECRET_PREFIX}{encode_org(org)}__{name}"


def secret_ref_is_valid(org: str, secret_ref: str) -> bool:
    """True only for a variable name of this org's own webhook secrets."""
    prefix = f"{SECRET_PREFIX}{encode_org(org)}__"
    return secret_ref.startswith(prefix) and bool(_NAME.match(secret_ref[len(prefix) :]))


def url_problem(url: str) -> str | None:
    """Why a webhook_url is unacceptable as written, or None. (Where it points is checked at
    each delivery, when the name is resolved: see _guard.)"""
    if len(url) > MAX_URL_LENGTH:
        return f"at most {MAX_URL_LENGTH} characters"
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in url):
        return "must not contain whitespace or control characters"
    try:
        parts = urlsplit(url)
        port = parts.port  # raises on a bad port
    except ValueError:
        return "not a valid URL"
    if parts.scheme not in ("http", "https"):
        return "must be an http or https URL"
    if not parts.hostname:
        return "must name a host"
    if parts.username is not None or parts.password is not None:
        return "must not carry credentials (the notice is signed with webhook_secret_ref)"
    if port == 0:
        return "not a valid port"
    return None


def validate_webhook_config(org: str, url: str, secret_ref: str) -> None:
    """inbox.register's check of webhook_url / webhook_secret_ref; 422 naming the field.

    An empty url means no webhook. A url needs a secret_ref (every notice is signed), and a
    secret_ref must be this org's own `LOOM_WEBHOOK_SECRET_<ORG>__<NAME>`.
    """
    if url:
        problem = url_problem(url)
        if problem is not None:
            raise invalid_field(URL_FIELD, problem)
        if not secret_ref:
            raise invalid_field(SECRET_FIELD, "required with webhook_url: every notice is signed")
    if secret_ref and not secret_ref_is_valid(org, secret_ref):
        example = f"{SECRET_PREFIX}{encode_org(org)}__<NAME>"
        raise invalid_field(SECRET_FIELD, f"must name one of this org's variables, {example} (NAME is letters and digits)")

"""The webhook signature, and how a receiver checks it.

Header:   X-Loom-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>
Signed:   the bytes `<t>.` followed by the exact request body.
Key:      the value of the inbox's webhook_secret_ref variable (UTF-8).

A receiver recomputes the HMAC over `<t>.<body>` with its copy of the secret, compares in
constant time, and refuses a `t` older than a few minutes (a replayed notice).
"""

from __future__ import annotations

import hashlib
import hmac
import time

SIGNATURE_HEADER = "X-Loom-Signature"
DELIVERY_HEADER = "X-Loom-Delivery"
EVENT_HEADER = "X-Loom-Event"
DEFAULT_TOLERANCE_SECONDS = 300


def _mac(secret: str, timestamp: int, body: bytes) -> str:
    return hmac.new(secret.encode("utf-8"), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def sign(secret: str, body: bytes, timestamp: int | None = None) -> str:
    """The X-Loom-Signature header value for body."""
    t = int(time.time()) if timestamp is None else timestamp
    return f"t={t},v1={_mac(secret, t, body)}"


def verify_signature(
    secret: str, header: str, body: bytes, *, tolerance_seconds: int = DEFAULT_TOLERANCE_SECONDS, now: float | None = None
) -> bool:
    """True when header signs body with secret and its timestamp is within tolerance."""
    fields: dict[str, list[str]] = {}
    for part in header.split(","):
        key, sep, value = part.strip().partition("=")
        if sep:
            fields.setdefault(key, []).append(value)
    try:
        t = int(fields["t"][0])
    except (KeyError, ValueError):
        return False
    current = time.time() if now is None else now
    if abs(current - t) > tolerance_seconds:
        return False
    expected = _mac(secret, t, body)
    return any(hmac.compare_digest(expected, v) for v in fields.get("v1", []))

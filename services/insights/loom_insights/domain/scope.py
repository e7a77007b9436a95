"""A statement's scope and its signature, and the wrapper around the caller's statement.

Loom sends four settings with each statement under the server's custom prefix: the org, the
namespaces (comma-joined), an expiry (unix seconds) and the HMAC-SHA256, under the 256-bit
analysis key, of one length-prefixed string of those three and the statement's query id
(`<request_id>:<n>:<nonce>`). Each allowlisted table's row policy recomputes the same HMAC in
ClickHouse (entities.py) over `initialQueryID()`, so a signature lifted from one statement
reads nothing when sent with another.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass

PREFIXES = ("SQL_", "custom_")
SCOPE_FIELDS = ("loom_org", "loom_ns", "loom_exp", "loom_sig")
BLOCK = 64  # SHA-256's block size: the HMAC pads are this long

_NS_OK = re.compile(r"^[^,\s]+$")


@dataclass(frozen=True, slots=True)
class Scope:
    org: str
    namespaces: tuple[str, ...]
    expires: int  # unix seconds

    @property
    def ns_text(self) -> str:
        return ",".join(self.namespaces)

    @property
    def reserved(self) -> bool:
        """The probe's scope (empty org and namespace), which no request may name."""
        return self.org == "" or any(n == "" for n in self.namespaces)


def valid_namespace(ns: str) -> bool:
    """A namespace the comma-joined scope setting can carry unambiguously."""
    return bool(_NS_OK.match(ns))


def length_prefixed(*parts: str) -> bytes:
    """`<byte length>:<bytes>` for each part, concatenated: no two part lists share a string."""
    out = bytearray()
    for p in parts:
        b = p.encode()
        out += str(len(b)).encode() + b":" + b
    return bytes(out)


def pads(key: bytes) -> tuple[bytes, bytes]:
    """HMAC-SHA256's inner and outer padded keys (RFC 2104): the only form the key takes in a
    policy, so the policy can compute the HMAC with SHA256 alone."""
    if len(key) > BLOCK:
        key = hashlib.sha256(key).digest()
    k = key.ljust(BLOCK, b"\x00")
    return bytes(b ^ 0x36 for b in k), bytes(b ^ 0x5C for b in k)


def sign(key: bytes, scope: Scope, query_id: str) -> str:
    """The hex HMAC-SHA256 a policy accepts for this scope and query id."""
    message = length_prefixed(scope.org, scope.ns_text, str(scope.expires), query_id)
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def scope_settings(prefix: str, key: bytes, scope: Scope, query_id: str) -> dict[str, str]:
    """The settings a statement carries: every value a string (the policy reads them through toString)."""
    return {
        f"{prefix}loom_org": scope.org,
        f"{prefix}loom_ns": scope.ns_text,
        f"{prefix}loom_exp": str(scope.expires),
        f"{prefix}loom_sig": sign(key, scope, query_id),
    }


def query_id(request_id: str, n: int, nonce: str) -> str:
    """`<request_id>:<n>:<nonce>`: new for each statement; the nonce is per request, so two
    requests never share an id. A retry resends the same id (with replace_running_query = 1)."""
    return f"{request_id}:{n}:{nonce}"


def strip_statement(sql: str) -> str:
    """The statement less surrounding whitespace and one trailing `;`."""
    s = sql.strip()
    if s.endswith(";"):
        s = s[:-1].rstrip()
    return s


def wrap(sql: str, limit: int) -> str:
    """The caller's statement as a subquery on lines of its own, so a trailing `--` comment
    ends at the newline; ClickHouse parses only a SELECT or WITH there. `LIMIT` on its own line
    caps what comes back (one row past the cap tells `truncated`)."""
    return f"SELECT * FROM (\n{strip_statement(sql)}\n)\nLIMIT {int(limit) + 1}"


def statement_digest(sql: str) -> str:
    """The statement's digest, as the ledger keeps text arguments (`sha256:` + 32 hex)."""
    return "sha256:" + hashlib.sha256(sql.encode()).hexdigest()[:32]

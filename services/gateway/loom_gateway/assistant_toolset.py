"""The MCP assistant toolset's call rules (spec 000 "The agent definition", "Citations"): a
call on `/mcp?toolset=assistant` drops any `run_id` argument (the answer's rows are filed under
its X-Loom-Run-Id) and, naming no namespace, reads the first namespace its token names."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

TOOLSET = "assistant"


def _claims(authorization: str) -> dict[str, Any]:
    """The token's claims, unverified: only to pick a default the chain then checks."""
    scheme, _, token = authorization.partition(" ")
    parts = token.strip().split(".")
    if scheme.lower() != "bearer" or len(parts) != 3:
        return {}
    try:
        raw = base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4))
        claims = json.loads(raw)
    except ValueError:
        return {}
    return claims if isinstance(claims, dict) else {}


def first_namespace(authorization: str) -> str:
    claims = _claims(authorization)
    roles = claims.get("roles")
    named = [ns for ns in roles if ns != "*"] if isinstance(roles, dict) else []
    return named[0] if named else str(claims.get("ns") or "")


def assistant_call(args: Mapping[str, Any], headers: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    """The call's arguments without `run_id`, and its headers with the namespace defaulted."""
    out = {k: v for k, v in args.items() if k != "run_id"}
    hdrs = dict(headers)
    if "namespace" not in out and not hdrs.get("x-loom-namespace"):
        ns = first_namespace(hdrs.get("authorization", ""))
        if ns:
            hdrs["x-loom-namespace"] = ns
    return out, hdrs

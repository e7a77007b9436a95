"""The MCP assistant toolset's call rules (spec 000 "The agent definition", "Citations"): a
call on `/mcp?toolset=assistant` drops any `run_id` argument (the answer's rows are filed under
its X-Loom-Run-Id) and, naming no namespace, reads the first namespace its token names.

The token is verified before its claims pick that default (the chain verifies it again and
decides every grant): a token this replica does not accept picks nothing."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from loom_core.chain.context import bearer_token
from loom_core.errors import LoomError
from loom_core.identity import Principal

TOOLSET = "assistant"

Verify = Callable[[str | None], Principal]


def first_namespace(authorization: str, verify: Verify | None) -> str:
    """The first namespace a verified bearer token names ("" for none, or a token that fails)."""
    token = bearer_token(authorization)
    if verify is None or token is None:
        return ""
    try:
        principal = verify(token)
    except LoomError:
        return ""
    named = [ns for ns in principal.roles if ns != "*"]
    return named[0] if named else principal.default_namespace


def assistant_call(args: Mapping[str, Any], headers: Mapping[str, str], verify: Verify | None) -> tuple[dict[str, Any], dict[str, str]]:
    """The call's arguments without `run_id`, and its headers with the namespace defaulted."""
    out = {k: v for k, v in args.items() if k != "run_id"}
    hdrs = dict(headers)
    if "namespace" not in out and not hdrs.get("x-loom-namespace"):
        ns = first_namespace(hdrs.get("authorization", ""), verify)
        if ns:
            hdrs["x-loom-namespace"] = ns
    return out, hdrs

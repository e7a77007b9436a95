"""Calling Loom's ops from inside a plane as the current caller: an op composed of other ops
(search.unified) reads each through that op's own chain (role, read scope, history-policy gate,
ledger and exposure rows), never around it.

In one process the runner hands the plane a caller over the gateway's relay; in a cluster the
plane calls a gateway over HTTP (`HttpOpCaller`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import httpx

from .chain.context import MD_AGENT, MD_AUTHORIZATION, MD_RUN_ID, MD_SESSION, MD_USER, CallContext
from .errors import ErrorCode, LoomError, Unavailable


class OpCaller(Protocol):
    """Calls op `op` with JSON arguments under `headers` (HTTP header names, lower-cased)."""

    async def __call__(self, op: str, args: dict[str, Any], headers: Mapping[str, str], transport: str, /) -> dict[str, Any]: ...


def caller_headers(ctx: CallContext) -> dict[str, str]:
    """The headers that make a nested call the current call's caller: its token and its labels
    (a history policy keys on the agent label, so the nested call meets the same rules)."""
    headers = {MD_AUTHORIZATION: f"Bearer {ctx.token}"}
    for key, value in ((MD_AGENT, ctx.agent), (MD_USER, ctx.user), (MD_SESSION, ctx.session), (MD_RUN_ID, ctx.run_id)):
        if value:
            headers[key] = value
    return headers


class HttpOpCaller:
    """Loom's ops over HTTP (`POST {url}/v1/{op}`): a cluster's plane, with no gateway in its process."""

    def __init__(self, base_url: str, timeout: float = 30.0) -> None:
        self._http = httpx.AsyncClient(base_url=base_url.rstrip("/"), timeout=timeout)

    async def __call__(self, op: str, args: dict[str, Any], headers: Mapping[str, str], transport: str) -> dict[str, Any]:
        try:
            r = await self._http.post(f"/v1/{op}", json=args, headers=dict(headers))
        except httpx.HTTPError as exc:
            raise Unavailable(ErrorCode.BACKEND_UNAVAILABLE, f"the gateway did not answer {op} ({type(exc).__name__})") from None
        if r.status_code != 200:
            raise LoomError.from_payload(r.json().get("error") or {})
        out: dict[str, Any] = r.json()
        return out

    async def close(self) -> None:
        await self._http.aclose()

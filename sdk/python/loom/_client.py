"""The SDK's one path to Loom: ``POST {base_url}/v1/{op}`` with the op's arguments as JSON.

Every method of the SDK ends here. Generated op methods (``agent.ops.<group>.<op>``) and the
plane helpers (``agent.tasks``, ``agent.assistant``, ...) call exactly one method, the agent's:

    await self._agent.call(op, **args)

A plane helper is a class in ``loom/<plane>.py`` built with the agent (``__init__(self, agent)``)
that adds what no single op does (a worker's loop, a stream) over the generated op methods
(``Ops(agent)``: typed arguments and answers, never restated) or ``self._agent.call(...)``; the
``Agent`` builds one per plane in its ``__init__``. Helpers never touch HTTP, headers or
errors: the transport below translates every failure into the typed errors of ``loom._errors``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

import httpx

from ._errors import LoomError, from_response, from_transport_error

CLIENT_LABEL = "sdk"
USER_AGENT = "loom-python/0.1.0"


class OpCaller(Protocol):
    """What plane helpers and generated op groups need from an agent: ``call``."""

    async def call(self, op: str, /, **args: Any) -> dict[str, Any]:
        """Call ``op`` with ``args`` (``None`` values left out) and return its JSON answer."""
        ...


def _json_value(value: object) -> str:
    """What ``json`` cannot print by itself: a ``datetime`` as RFC 3339 in UTC (a naive one is
    taken as UTC), the form every timestamp argument takes."""
    if isinstance(value, datetime):
        moment = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")
    raise TypeError(f"{type(value).__name__} is not JSON")


class Transport:
    """An ``httpx.AsyncClient`` bound to one Loom gateway and one caller's headers."""

    def __init__(
        self,
        base_url: str,
        headers: Mapping[str, str],
        *,
        timeout: float,
        transport: httpx.AsyncBaseTransport | None = None,
        auth: httpx.Auth | None = None,
    ) -> None:
        self._http = httpx.AsyncClient(
            auth=auth,
            base_url=base_url.rstrip("/"),
            headers={"User-Agent": USER_AGENT, **headers},
            timeout=timeout,
            transport=transport,
        )

    async def _call(self, op: str, args: Mapping[str, Any]) -> dict[str, Any]:
        """POST the op; return the JSON object it answers or raise the typed error."""
        try:
            response = await self._http.post(
                f"/v1/{op}", content=json.dumps(dict(args), default=_json_value), headers={"Content-Type": "application/json"}
            )
        except httpx.TransportError as exc:
            raise from_transport_error(exc, op) from exc
        if not response.is_success:
            raise from_response(response, op)
        try:
            body = response.json()
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError both
            raise LoomError("INTERNAL", "the answer is not JSON", {}, response.status_code, op=op) from exc
        if not isinstance(body, dict):
            raise LoomError("INTERNAL", "the answer is not a JSON object", {}, response.status_code, op=op)
        return body

    @property
    def closed(self) -> bool:
        """Whether the underlying HTTP client is closed."""
        return self._http.is_closed

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

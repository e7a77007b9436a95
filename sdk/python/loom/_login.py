"""The credential ``loom login`` keeps, used when an ``Agent`` is given no API key.

``loom login`` writes ``$XDG_CONFIG_HOME/loom/credentials.json`` (default ``~/.config/loom``,
mode 0600): one entry per Loom URL, holding the sign-in session's refresh token and its latest
access token. ``SessionAuth`` sends the access token and, when it is near its end or the server
answers ``AUTH_EXPIRED``, asks ``POST /v1/session/refresh`` for a fresh one (docs/dashboard-api.md).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import AsyncGenerator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

# A token with less than this left is refreshed before it is sent.
REFRESH_MARGIN_SECONDS = 60


def credentials_path() -> Path:
    """Where ``loom login`` keeps its credentials."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "loom" / "credentials.json"


def stored_credential(base_url: str) -> dict[str, Any] | None:
    """The ``loom login`` entry for ``base_url``, if there is one."""
    try:
        data = json.loads(credentials_path().read_text())
    except (OSError, ValueError):
        return None
    entry = data.get(base_url.rstrip("/")) if isinstance(data, dict) else None
    return entry if isinstance(entry, dict) and entry.get("refresh_token") else None


def _epoch(rfc3339: str) -> float:
    try:
        return datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()
    except (TypeError, ValueError):
        return 0.0


class SessionAuth(httpx.Auth):
    """Bearer auth from a ``loom login`` session, refreshed when it nears its end."""

    def __init__(self, base_url: str, credential: dict[str, Any]) -> None:
        self._refresh_url = f"{base_url.rstrip('/')}/v1/session/refresh"
        self._refresh_token = str(credential["refresh_token"])
        self._token = str(credential.get("token") or "")
        self._expires = _epoch(str(credential.get("expires_at") or ""))

    def _refresh_request(self) -> httpx.Request:
        return httpx.Request("POST", self._refresh_url, json={"refresh_token": self._refresh_token})

    async def _take(self, response: httpx.Response) -> bool:
        await response.aread()
        if response.status_code != 200:
            return False
        body = response.json()
        self._token, self._expires = str(body["token"]), _epoch(str(body["expires_at"]))
        return True

    async def async_auth_flow(self, request: httpx.Request) -> AsyncGenerator[httpx.Request, httpx.Response]:
        """Send the request with the session's token, refreshing it first when needed. A
        refresh the server refuses (the session ended) is the answer the caller sees. Only a
        401's body is read here, so a streamed answer still streams."""
        if (not self._token or self._expires - time.time() < REFRESH_MARGIN_SECONDS) and not await self._take(
            (yield self._refresh_request())
        ):
            return
        request.headers["Authorization"] = f"Bearer {self._token}"
        response = yield request
        if response.status_code == 401:
            await response.aread()
            if _code(response) == "AUTH_EXPIRED" and await self._take((yield self._refresh_request())):
                request.headers["Authorization"] = f"Bearer {self._token}"
                yield request


def _code(response: httpx.Response) -> str:
    try:
        return str(response.json()["error"]["code"])
    except (ValueError, KeyError, TypeError):
        return ""

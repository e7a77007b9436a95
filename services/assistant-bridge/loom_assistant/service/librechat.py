"""LibreChat over HTTP (librechat-protocol.md): the agents API with the service key, and the
signed-in routes the boot-time setup uses (with a browser user agent: LibreChat answers a
non-browser client on them with HTTP 200 and an `Illegal request` event)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx

BROWSER_UA = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0 Safari/537.36"
EMAIL_UNKNOWN = "Email does not exist."


class LibreChatError(Exception):
    """A LibreChat answer other than the one expected: its status, and its message (never a
    credential: request bodies are not kept)."""

    def __init__(self, status: int, message: str, kind: str = "") -> None:
        super().__init__(f"LibreChat {status}: {message}")
        self.status = status
        self.message = message
        self.kind = kind


@dataclass(frozen=True, slots=True)
class ApiKey:
    id: str
    name: str
    key: str = ""


def _message(resp: httpx.Response) -> str:
    try:
        body = resp.json()
    except ValueError:
        return resp.text[:200]
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict):
            return str(err.get("message", ""))
        if isinstance(err, str):
            return err
        return str(body.get("message", ""))
    return ""


class LibreChatClient:
    def __init__(self, base_url: str, *, timeout: float = 30.0, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            timeout=httpx.Timeout(timeout, read=None),
            headers={"Accept-Encoding": "identity"},
            transport=transport,
        )

    async def close(self) -> None:
        await self._http.aclose()

    # -- the agents API (service key) --------------------------------------------------------

    @asynccontextmanager
    async def stream_chat(self, api_key: str, body: dict[str, Any]) -> AsyncIterator[httpx.Response]:
        """The streamed answer; closing the context closes the upstream request."""
        req = self._http.build_request(
            "POST",
            "/api/agents/v1/chat/completions",
            json={**body, "stream": True},
            headers={"Authorization": f"Bearer {api_key}", "Accept": "text/event-stream", "Accept-Encoding": "identity"},
        )
        resp = await self._http.send(req, stream=True)
        try:
            if resp.status_code != 200:
                await resp.aread()
                raise LibreChatError(resp.status_code, _message(resp))
            yield resp
        finally:
            await resp.aclose()

    async def chat(self, api_key: str, body: dict[str, Any]) -> dict[str, Any]:
        resp = await self._http.post(
            "/api/agents/v1/chat/completions",
            json={**body, "stream": False},
            headers={"Authorization": f"Bearer {api_key}", "Accept-Encoding": "identity"},
        )
        if resp.status_code != 200:
            raise LibreChatError(resp.status_code, _message(resp))
        out: dict[str, Any] = resp.json()
        return out

    async def agent_exists(self, api_key: str, agent_id: str) -> bool:
        """GET /api/agents/v1/models/<id>: True, False on 404; LibreChatError(401) for a lost key."""
        resp = await self._http.get(f"/api/agents/v1/models/{agent_id}", headers={"Authorization": f"Bearer {api_key}"})
        if resp.status_code == 200:
            return True
        if resp.status_code == 404:
            return False
        raise LibreChatError(resp.status_code, _message(resp))

    # -- signed-in routes (the setup) --------------------------------------------------------

    def _signed(self, jwt: str | None = None) -> dict[str, str]:
        h = {"User-Agent": BROWSER_UA}
        if jwt:
            h["Authorization"] = f"Bearer {jwt}"
        return h

    async def _json(self, resp: httpx.Response, *ok: int) -> Any:
        if resp.status_code == 200 and resp.headers.get("content-type", "").startswith("text/event-stream"):
            # LibreChat's non-browser refusal: status 200 with an error event.
            raise LibreChatError(200, "Illegal request", "illegal_request")
        if resp.status_code not in ok:
            kind = "rate_limited" if resp.status_code == 429 else ""
            raise LibreChatError(resp.status_code, _message(resp), kind)
        if resp.status_code == 204 or not resp.content:
            return None
        return resp.json()

    async def login(self, email: str, password: str) -> str:
        resp = await self._http.post("/api/auth/login", json={"email": email, "password": password}, headers=self._signed())
        body = await self._json(resp, 200)
        return str(body["token"])

    async def register(self, name: str, email: str, password: str) -> None:
        payload = {"name": name, "username": name, "email": email, "password": password, "confirm_password": password}
        resp = await self._http.post("/api/auth/register", json=payload, headers=self._signed())
        await self._json(resp, 200)

    async def list_keys(self, jwt: str) -> list[ApiKey]:
        body = await self._json(await self._http.get("/api/api-keys", headers=self._signed(jwt)), 200)
        return [ApiKey(str(k["id"]), str(k.get("name", ""))) for k in body.get("keys", [])]

    async def delete_key(self, jwt: str, key_id: str) -> None:
        resp = await self._http.delete(f"/api/api-keys/{key_id}", headers=self._signed(jwt))
        if resp.status_code != 404:
            await self._json(resp, 204, 200)

    async def create_key(self, jwt: str, name: str) -> ApiKey:
        body = await self._json(await self._http.post("/api/api-keys", json={"name": name}, headers=self._signed(jwt)), 201, 200)
        return ApiKey(str(body["id"]), str(body["name"]), str(body["key"]))

    async def list_agents(self, jwt: str, name: str) -> list[dict[str, Any]]:
        resp = await self._http.get("/api/agents", params={"search": name}, headers=self._signed(jwt))
        body = await self._json(resp, 200)
        return [a for a in body.get("data", []) if a.get("name") == name]

    async def create_agent(self, jwt: str, body: dict[str, Any]) -> str:
        out = await self._json(await self._http.post("/api/agents", json=body, headers=self._signed(jwt)), 201, 200)
        return str(out["id"])

    async def update_agent(self, jwt: str, agent_id: str, body: dict[str, Any]) -> None:
        await self._json(await self._http.patch(f"/api/agents/{agent_id}", json=body, headers=self._signed(jwt)), 200)

    async def delete_agent(self, jwt: str, agent_id: str) -> None:
        resp = await self._http.delete(f"/api/agents/{agent_id}", headers=self._signed(jwt))
        if resp.status_code != 404:
            await self._json(resp, 200, 204)


def sse_data(line: str) -> str | None:
    """The payload of an SSE `data:` line, else None."""
    if not line.startswith("data:"):
        return None
    return line[5:].lstrip(" ")


def parse_chunk(payload: str) -> dict[str, Any] | None:
    try:
        value = json.loads(payload)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None

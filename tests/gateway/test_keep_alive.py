"""Idle keep-alive connections outlive a client's own expiry (httpx keeps one 5 s), so the client
always closes first: with equal timeouts a request sent as the server closes fails mid-read."""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

from tests.conftest import Tenant

REQUEST = b"POST /v1/auth.whoami HTTP/1.1\r\nHost: loom\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


async def _response(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length:"))
    return head + await reader.readexactly(length)


async def test_an_idle_connection_still_answers_after_a_clients_keep_alive_expiry(tenant: Tenant) -> None:
    url = urlsplit(tenant.base_url)
    reader, writer = await asyncio.open_connection(url.hostname, url.port)
    try:
        for pause in (6, 0):
            writer.write(REQUEST % tenant.token.encode())
            await writer.drain()
            assert (await asyncio.wait_for(_response(reader), 30)).startswith(b"HTTP/1.1 200")
            await asyncio.sleep(pause)  # past httpx's 5 s (and uvicorn's default): the server must not have closed
    finally:
        writer.close()

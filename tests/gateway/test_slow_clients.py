"""Slow clients cannot hold the gateway: a request's headers must arrive within a time limit (a
slowloris client is answered 408 and closed), so is its body, and while 200 such connections
trickle in, other clients are served."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import httpx
import pytest
from loom_gateway.app import create_app
from loom_runner.embedded import Instance
from loom_runner.http import HttpServer

from tests.conftest import Tenant

SLOW_CONNECTIONS = 200
LIMIT_SECONDS = 1.0


@pytest.fixture
async def gateway(stack: Instance) -> AsyncIterator[str]:
    """The stack's gateway app served with short header and body read limits."""
    assert stack.relay is not None
    server = HttpServer(create_app(stack.relay, {}), header_read_seconds=LIMIT_SECONDS, body_read_seconds=LIMIT_SECONDS)
    await server.start()
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        await server.stop()


async def read_all(reader: asyncio.StreamReader) -> bytes:
    """Everything the server sends until it closes the connection (bounded: the test fails, not hangs)."""
    return await asyncio.wait_for(reader.read(), 30)


async def test_200_slowloris_connections_are_closed_with_a_408_and_others_are_served(gateway: str, tenant: Tenant) -> None:
    port = int(gateway.rsplit(":", 1)[1])
    conns = [await asyncio.open_connection("127.0.0.1", port) for _ in range(SLOW_CONNECTIONS)]
    for _, writer in conns:
        writer.write(b"POST /v1/auth.whoami HTTP/1.1\r\nHost: loom\r\nX-Loom-Agent: sl")  # never finishes its headers
    # One more header byte now and then: a slowloris client keeps every connection busy.
    for _, writer in conns:
        writer.write(b"o")
    async with httpx.AsyncClient(base_url=gateway, headers={"Authorization": f"Bearer {tenant.token}"}, timeout=30) as c:
        served = await c.post("/v1/auth.whoami", json={})
    assert served.status_code == 200 and served.json()["org"] == tenant.org
    answers = await asyncio.gather(*(read_all(reader) for reader, _ in conns))
    for answer in answers:
        assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
        body = json.loads(answer.split(b"\r\n\r\n", 1)[1])
        assert body["error"]["code"] == "REQUEST_TIMEOUT" and body["error"]["retryable"] is True
    for _, writer in conns:
        writer.close()


async def test_a_connection_that_sends_nothing_is_closed(gateway: str) -> None:
    port = int(gateway.rsplit(":", 1)[1])
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    answer = await read_all(reader)
    writer.close()
    assert answer.startswith(b"HTTP/1.1 408")


async def test_a_body_that_trickles_in_is_a_408_naming_the_limit(gateway: str, tenant: Tenant) -> None:
    port = int(gateway.rsplit(":", 1)[1])
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        b"POST /v1/auth.whoami HTTP/1.1\r\nHost: loom\r\nAuthorization: Bearer %s\r\n"
        b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{" % tenant.token.encode()
    )
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
    length = next(int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length:"))
    body = json.loads(await reader.readexactly(length))
    writer.close()
    assert head.startswith(b"HTTP/1.1 408")
    assert body["error"]["code"] == "REQUEST_TIMEOUT" and body["error"]["detail"]["timeout_seconds"] == LIMIT_SECONDS


async def test_a_prompt_keep_alive_request_after_the_first_is_not_cut_short(gateway: str, tenant: Tenant) -> None:
    # The header limit runs per request, from its first byte: a keep-alive connection idle for
    # longer than the limit between requests is still served (idle time is the keep-alive limit's).
    async with httpx.AsyncClient(base_url=gateway, headers={"Authorization": f"Bearer {tenant.token}"}, timeout=30) as c:
        first = await c.post("/v1/auth.whoami", json={})
        await asyncio.sleep(LIMIT_SECONDS * 2)
        second = await c.post("/v1/auth.whoami", json={})
    assert first.status_code == 200 and second.status_code == 200

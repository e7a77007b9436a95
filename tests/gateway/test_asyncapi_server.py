"""The AsyncAPI document names the NATS server Loom is configured with, never a hard-coded
localhost, and without the credentials its URL may carry."""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx
from loom_core.bus import NatsServer
from loom_gateway.asyncapi import public_nats_url
from loom_runner.embedded import Instance


async def test_the_document_names_the_configured_nats_server(stack: Instance, nats_server: NatsServer) -> None:
    async with httpx.AsyncClient(base_url=stack.base_url) as c:
        doc = (await c.get("/asyncapi.json")).json()
    hosts = [server["host"] for server in doc["servers"].values()]
    assert hosts == [urlsplit(nats_server.url).netloc]
    assert "localhost:4222" not in hosts


def test_credentials_never_reach_the_document() -> None:
    assert public_nats_url("nats://loom:s3cret@nats.internal:4222") == "nats://nats.internal:4222"
    assert public_nats_url("nats://a:b@n1:4222, nats://n2:4222") == "nats://n1:4222,nats://n2:4222"

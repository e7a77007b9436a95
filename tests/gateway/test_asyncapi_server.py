"""The AsyncAPI document names the NATS server Loom is configured with, never a hard-coded
localhost, and without the credentials its URL may carry."""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx
from loom_core.bus import Consumer, NatsServer, auth_callout
from loom_core.chain import ledger
from loom_core.identity import authenticator
from loom_gateway.asyncapi import document, public_nats_url
from loom_policy.bus import LAYOUT as POLICY
from loom_runner.embedded import Instance
from loom_tasks.consumers.layout import CONSUMERS as TASKS
from loom_tasks.events import STREAM_SUBJECTS
from loom_tasks.webhooks import WEBHOOKS


async def test_the_document_names_the_configured_nats_server(stack: Instance, nats_server: NatsServer) -> None:
    async with httpx.AsyncClient(base_url=stack.base_url) as c:
        doc = (await c.get("/asyncapi.json")).json()
    hosts = [server["host"] for server in doc["servers"].values()]
    assert hosts == [urlsplit(nats_server.url).netloc]
    assert "localhost:4222" not in hosts


def test_credentials_never_reach_the_document() -> None:
    assert public_nats_url("nats://loom:s3cret@nats.internal:4222") == "nats://nats.internal:4222"
    assert public_nats_url("nats://a:b@n1:4222, nats://n2:4222") == "nats://n1:4222,nats://n2:4222"


def test_the_document_covers_every_subject_loom_publishes_or_consumes() -> None:
    """Every consumer Loom declares (core's and each plane's) is a channel of the document, under
    its own name, beside the task events subscribers read."""
    declared: list[Consumer] = [
        *authenticator.LAYOUT.consumers,
        *ledger.LAYOUT.consumers,
        *auth_callout.LAYOUT.consumers,
        *POLICY.consumers,
        *TASKS,
        WEBHOOKS,
    ]
    channels = document("nats://127.0.0.1:4222")["channels"]
    missing = [c.name for c in declared if channels.get(c.name, {}).get("address") != c.subject]
    assert missing == []
    # Every subject a consumer reads is published by Loom: the task events' stream included.
    addresses = {ch["address"] for ch in channels.values()}
    assert set(STREAM_SUBJECTS) <= addresses

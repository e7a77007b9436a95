"""A replica started before JetStream answers (a NATS cluster still electing its leader) waits for
it, for LOOM_NATS_STARTUP_SECONDS, and then exits with the bus's 503 error."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from loom_core.bus import NatsServer
from loom_core.errors import Unavailable
from loom_core.runtime import Runtime
from loom_core.store.embedded import EmbeddedStore

from tests.conftest import make_settings


async def test_a_replica_waits_for_jetstream_then_starts(tmp_path: Path, store: EmbeddedStore) -> None:
    core_only = NatsServer(tmp_path / "core", jetstream=False)
    await asyncio.to_thread(core_only.start)
    try:
        settings = make_settings(tmp_path, nats_request_timeout_seconds=0.5, nats_startup_seconds=60)
        starting = asyncio.create_task(Runtime.start(settings, store=store, nats_url=core_only.url))
        await asyncio.sleep(1.5)
        assert not starting.done(), "the replica gave up (or started) while JetStream had not answered"
    finally:
        await asyncio.to_thread(core_only.stop)
    # JetStream comes up on the same address (the cluster elected its leader); the client reconnects.
    async with NatsServer(tmp_path / "nats", port=core_only.port):
        runtime = await asyncio.wait_for(starting, 30)
        try:
            lease = await runtime.leases.acquire("startup-probe", "t", ttl=5)
            assert lease.holder == "t"
        finally:
            await runtime.stop()


async def test_a_replica_exits_when_jetstream_never_answers(tmp_path: Path, store: EmbeddedStore) -> None:
    async with NatsServer(tmp_path / "core", jetstream=False) as core_only:
        settings = make_settings(tmp_path, nats_request_timeout_seconds=0.5, nats_startup_seconds=1)
        with pytest.raises(Unavailable, match="loom_leases"):
            await asyncio.wait_for(Runtime.start(settings, store=store, nats_url=core_only.url), 15)

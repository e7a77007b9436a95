"""A replica started before JetStream answers (a NATS cluster still electing its leader) waits for
it, for LOOM_NATS_STARTUP_SECONDS, and then exits with the bus's 503 error."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from loom_core.bus import NatsServer
from loom_core.bus.natsserver import free_port, nats_server_binary
from loom_core.errors import Unavailable
from loom_core.runtime import Runtime
from loom_core.store.embedded import EmbeddedStore

from tests.conftest import make_settings


@dataclass
class CoreNats:
    """A nats-server without JetStream: no JetStream request is answered."""

    proc: subprocess.Popen[bytes]
    port: int

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=5)


@pytest.fixture
def core_nats_only(tmp_path: Path) -> Iterator[CoreNats]:
    port = free_port()
    with open(tmp_path / "core-nats.log", "ab") as log:
        server = CoreNats(subprocess.Popen([nats_server_binary(), "-a", "127.0.0.1", "-p", str(port)], stdout=log, stderr=log), port)
    try:
        yield server
    finally:
        server.stop()


async def _listening(port: int) -> None:
    for _ in range(100):
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.05)
            continue
        writer.close()
        return
    raise AssertionError(f"nothing listens on {port}")


async def test_a_replica_waits_for_jetstream_then_starts(tmp_path: Path, store: EmbeddedStore, core_nats_only: CoreNats) -> None:
    port = core_nats_only.port
    await _listening(port)
    settings = make_settings(tmp_path, nats_request_timeout_seconds=0.5, nats_startup_seconds=60)
    starting = asyncio.create_task(Runtime.start(settings, store=store, nats_url=f"nats://127.0.0.1:{port}"))
    await asyncio.sleep(1.5)
    assert not starting.done(), "the replica gave up (or started) while JetStream had not answered"
    # JetStream comes up on the same address (the cluster elected its leader); the client reconnects.
    core_nats_only.stop()
    async with NatsServer(tmp_path / "nats", port=port):
        runtime = await asyncio.wait_for(starting, 30)
        try:
            lease = await runtime.leases.acquire("startup-probe", "t", ttl=5)
            assert lease.holder == "t"
        finally:
            await runtime.stop()


async def test_a_replica_exits_when_jetstream_never_answers(tmp_path: Path, store: EmbeddedStore, core_nats_only: CoreNats) -> None:
    port = core_nats_only.port
    await _listening(port)
    settings = make_settings(tmp_path, nats_request_timeout_seconds=0.5, nats_startup_seconds=1)
    with pytest.raises(Unavailable, match="loom_leases"):
        await asyncio.wait_for(Runtime.start(settings, store=store, nats_url=f"nats://127.0.0.1:{port}"), 15)

"""Fixtures for the core tests: a bus connection of their own on the session's nats-server."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from loom_core.bus import Bus, LeaseStore, NatsServer, connect_bus


@pytest.fixture
async def bus(nats_server: NatsServer) -> AsyncIterator[Bus]:
    b = await connect_bus(nats_server.url, name="core-test")
    yield b
    await b.close()


@pytest.fixture
async def leases(bus: Bus) -> LeaseStore:
    return await LeaseStore.open(bus)

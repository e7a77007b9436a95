"""Real parts for every test: one nats-server child, one chDB engine (chDB allows one per
process), and one running Loom instance (every plane's gRPC server + the gateway on loopback).
Each test gets its own org and namespace, so tests never see each other's rows."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from loom_core.bus import NatsServer
from loom_core.settings import Settings
from loom_core.store.embedded import EmbeddedStore
from loom_gateway.identity import bootstrap_org
from loom_runner.embedded import Instance, start_instance

TEST_SECRET = "test-secret-0123456789abcdef0123456789abcdef"


# The gateway reaches its planes two ways (loom_gateway.relay): in process (embedded mode's
# default) and over gRPC (a cluster's gateway). Every test that uses `stack` runs on both: the
# session fixture `transport` is a parameter, pytest groups the tests by it, and each
# transport's instances start once. `make_settings` follows the parameter in force, so the
# instances other fixtures start from it (policy's, tasks') use the same transport.
TRANSPORTS = ("inproc", "grpc")
_current_transport = [TRANSPORTS[0]]


def make_settings(data_dir: Path, **overrides: object) -> Settings:
    base: dict[str, object] = {
        "gateway_transport": _current_transport[0],
        "data_dir": data_dir,
        "jwt_secret": TEST_SECRET,
        "clickhouse_database": "loom_test",
        "http_port": 0,
        "ledger_flush_interval_seconds": 0.05,
        "grant_cache_ttl_seconds": 5.0,
    }
    base.update(overrides)
    # A name that is not a core setting is a plane's (loom_core.settings: plane settings).
    planes = {k: base.pop(k) for k in list(base) if k not in Settings.model_fields}
    return Settings(**base, plane_overrides=planes)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("loom")


@pytest.fixture(scope="session")
def settings(data_dir: Path) -> Settings:
    return make_settings(data_dir)


@pytest.fixture(scope="session")
async def nats_server(data_dir: Path) -> AsyncIterator[NatsServer]:
    async with NatsServer(data_dir / "nats") as srv:
        yield srv


@pytest.fixture(scope="session")
def store(data_dir: Path) -> EmbeddedStore:
    existing = next(iter(EmbeddedStore._open.values()), None)
    return existing or EmbeddedStore.open(data_dir / "chdb", "loom_test")


@pytest.fixture(scope="session", params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> str:
    _current_transport[0] = str(request.param)
    return str(request.param)


@pytest.fixture(scope="session")
async def stack(settings: Settings, store: EmbeddedStore, nats_server: NatsServer, transport: str) -> AsyncIterator[Instance]:
    inst = await start_instance(settings, store=store, nats_url=nats_server.url, name=f"loom-test-{transport}", transport=transport)
    yield inst
    await inst.stop()


@dataclass
class Tenant:
    """A fresh org with one namespace and its bootstrap admin token."""

    org: str
    namespace: str
    token: str
    base_url: str

    def client(self, token: str | None = None, **headers: str) -> httpx.AsyncClient:
        h = {"Authorization": f"Bearer {token or self.token}", **headers}
        return httpx.AsyncClient(base_url=self.base_url, headers=h, timeout=30)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture
async def tenant(stack: Instance) -> Tenant:
    org, ns = unique("org"), unique("ns")
    token, _ = await bootstrap_org(stack.runtime.identity, stack.runtime.codec, org, ns, 3600)
    return Tenant(org, ns, token, stack.base_url)


async def call(client: httpx.AsyncClient, op: str, **args: object) -> httpx.Response:
    return await client.post(f"/v1/{op}", json=args)

"""Policy fixtures: Loom instances in shadow and enforce mode beside the default (off) stack,
sharing its chDB engine and nats-server, and helpers to act as a tenant on any of them."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from loom_core.bus import NatsServer
from loom_core.store.embedded import EmbeddedStore
from loom_gateway.identity import bootstrap_org
from loom_policy.service.gate import PolicyGate
from loom_runner.embedded import Instance, start_instance

from tests.conftest import Tenant, call, make_settings, unique


async def start_policy_instance(data_dir: Path, store: EmbeddedStore, nats: NatsServer, name: str, **overrides: Any) -> Instance:
    inst = await start_instance(make_settings(data_dir, **overrides), store=store, nats_url=nats.url, name=name)
    # The gate's decision rows (a few a test) keep the 0.05 s pacing they had: the tests read
    # them by polling `policy.decisions`. Its ledger keeps production's pacing, as the suite's.
    gate = inst.runtime.gate
    if isinstance(gate, PolicyGate) and gate.decisions is not None:
        gate.decisions.flush_interval = 0.05
    return inst


@pytest.fixture(scope="session")
async def enforce_stack(stack: Instance, data_dir: Path, store: EmbeddedStore, nats_server: NatsServer) -> AsyncIterator[Instance]:
    inst = await start_policy_instance(data_dir, store, nats_server, "policy-enforce", policy_mode="enforce")
    yield inst
    await inst.stop()


@pytest.fixture(scope="session")
async def shadow_stack(stack: Instance, data_dir: Path, store: EmbeddedStore, nats_server: NatsServer) -> AsyncIterator[Instance]:
    inst = await start_policy_instance(data_dir, store, nats_server, "policy-shadow", policy_mode="shadow")
    yield inst
    await inst.stop()


async def new_tenant(inst: Instance) -> Tenant:
    org, ns = unique("org"), unique("ns")
    token, _ = await bootstrap_org(inst.runtime.identity, inst.runtime.codec, org, ns, 3600)
    return Tenant(org, ns, token, inst.base_url)


@pytest.fixture
async def enforce_tenant(enforce_stack: Instance) -> Tenant:
    return await new_tenant(enforce_stack)


@pytest.fixture
async def shadow_tenant(shadow_stack: Instance) -> Tenant:
    return await new_tenant(shadow_stack)


def on(tenant: Tenant, inst: Instance) -> Tenant:
    """The same org, namespace and token, talking to another instance."""
    return Tenant(tenant.org, tenant.namespace, tenant.token, inst.base_url)


def gate_of(inst: Instance) -> PolicyGate:
    gate = inst.runtime.gate
    assert isinstance(gate, PolicyGate)
    return gate


async def ok(client: httpx.AsyncClient, op: str, **args: Any) -> dict[str, Any]:
    r = await call(client, op, **args)
    assert r.status_code == 200, r.text
    body = r.json()
    assert isinstance(body, dict)
    return body


async def refused(client: httpx.AsyncClient, op: str, status: int, code: str, **args: Any) -> dict[str, Any]:
    r = await call(client, op, **args)
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["code"] == code, err
    return dict(err)


async def eventually(probe: Callable[[], Awaitable[Any]], within: float = 5.0, interval: float = 0.05) -> Any:
    """Poll until `probe` returns something truthy (background writes land in batches)."""
    deadline = time.monotonic() + within
    while True:
        got = await probe()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(interval)


ONE_PER_HOUR = {"op": "count_within", "within": "1h", "operation": "grants.list", "cmp": "gte", "value": 1}


def one_list_per_hour(name: str = "one-list-per-hour", **over: Any) -> dict[str, Any]:
    """A rule every test can trigger with identity ops: the second grants.list within the hour
    (by the same agent) is denied."""
    return {"name": name, "effect": "forbid", "actions": ["grants.list"], "condition": ONE_PER_HOUR, **over}


@asynccontextmanager
async def ledger_held(*instances: Instance) -> AsyncIterator[None]:
    """Hold these instances' ledger rows in memory (no batch reaches the table) while inside,
    so a test can show the gate reading rows the table does not have yet."""
    saved = [i.runtime.ledger.flush_interval for i in instances]
    for i in instances:
        await i.runtime.ledger.flush()
        i.runtime.ledger.flush_interval = 3600.0
        # Wake the flusher so it takes the long interval now: it clears the event, flushes
        # (whatever arrives from then on stays in its buffer) and waits the hour.
        i.runtime.ledger._wake.set()

    async def waiting_the_hour() -> bool:
        return not any(i.runtime.ledger._wake.is_set() for i in instances)

    await eventually(waiting_the_hour, interval=0.005)
    try:
        yield
    finally:
        for i, interval in zip(instances, saved, strict=True):
            i.runtime.ledger.flush_interval = interval
            i.runtime.ledger.hurry()  # end the long wait now


async def ledger_rows(inst: Instance, tenant: Tenant, op: str) -> int:
    rows = await inst.runtime.store.query(
        "SELECT count() AS n FROM {db}.agent_events WHERE org = {org:String} AND op = {op:String}", {"org": tenant.org, "op": op}
    )
    return int(rows[0]["n"])

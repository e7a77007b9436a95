"""A rule change reaches every replica: at once by push, and within
LOOM_POLICY_CACHE_TTL_SECONDS at worst when the push is lost."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from loom_core.bus import NatsServer
from loom_core.store.embedded import EmbeddedStore
from loom_policy.bus import RULE_PUSHES
from loom_policy.settings import PolicySettings
from loom_runner.embedded import Instance

from tests.conftest import Tenant

from .conftest import eventually, gate_of, ok, on, one_list_per_hour, refused, start_policy_instance


@pytest.fixture
async def replica_long_ttl(
    enforce_stack: Instance, data_dir: Path, store: EmbeddedStore, nats_server: NatsServer
) -> AsyncIterator[Instance]:
    inst = await start_policy_instance(data_dir, store, nats_server, "policy-b", policy_mode="enforce", policy_cache_ttl_seconds=300.0)
    yield inst
    await inst.stop()


@pytest.fixture
async def replica_short_ttl(
    enforce_stack: Instance, data_dir: Path, store: EmbeddedStore, nats_server: NatsServer
) -> AsyncIterator[Instance]:
    inst = await start_policy_instance(data_dir, store, nats_server, "policy-c", policy_mode="enforce", policy_cache_ttl_seconds=1.0)
    yield inst
    await inst.stop()


async def test_a_rule_change_reaches_another_replica_at_once_by_push(enforce_tenant: Tenant, replica_long_ttl: Instance) -> None:
    b = gate_of(replica_long_ttl)
    assert b.rules is not None
    pushes = b.rules.push_received
    async with enforce_tenant.client() as a:
        await ok(a, "policy.set", **one_list_per_hour())
    # A 300 s TTL: only the push can bring the rule this soon.
    await eventually(lambda: _sees(replica_long_ttl, enforce_tenant, True), within=2)
    assert b.rules.push_received > pushes
    async with on(enforce_tenant, replica_long_ttl).client(**{"X-Loom-Agent": "bot"}) as c:
        await ok(c, "grants.list")
        await refused(c, "grants.list", 403, "POLICY_FORBIDDEN")
    async with enforce_tenant.client() as a:
        await ok(a, "policy.delete", name="one-list-per-hour")
    await eventually(lambda: _sees(replica_long_ttl, enforce_tenant, False), within=2)


async def test_without_the_push_a_change_is_seen_within_the_cache_ttl(enforce_tenant: Tenant, replica_short_ttl: Instance) -> None:
    c = gate_of(replica_short_ttl)
    assert c.rules is not None
    await c.stop_consumer(RULE_PUSHES.name)  # as if every push to this replica were lost
    ttl = replica_short_ttl.runtime.settings.plane(PolicySettings).policy_cache_ttl_seconds
    async with enforce_tenant.client() as a:
        await ok(a, "policy.set", **one_list_per_hour())
    written = time.monotonic()
    await eventually(lambda: _gate_sees(replica_short_ttl, enforce_tenant), within=ttl + 2, interval=0.02)
    assert time.monotonic() - written <= ttl + 0.5
    assert c.rules.push_received == 0
    async with on(enforce_tenant, replica_short_ttl).client(**{"X-Loom-Agent": "bot"}) as cl:
        await ok(cl, "grants.list")
        await refused(cl, "grants.list", 403, "POLICY_FORBIDDEN")


async def _sees(inst: Instance, tenant: Tenant, present: bool) -> bool:
    rules = gate_of(inst).rules
    assert rules is not None
    return (rules.cached(tenant.org, tenant.namespace).get("one-list-per-hour") is not None) == present


async def _gate_sees(inst: Instance, tenant: Tenant) -> bool:
    rules = gate_of(inst).rules
    assert rules is not None
    # The call path: fresh within the TTL, else reloaded before use.
    return (await rules.get(tenant.org, tenant.namespace)).get("one-list-per-hour") is not None

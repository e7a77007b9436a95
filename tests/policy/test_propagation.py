"""A rule change reaches every replica: at once by push, and within
LOOM_POLICY_CACHE_TTL_SECONDS at worst when the push is lost."""

from __future__ import annotations

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


async def test_a_rule_change_reaches_another_replica_at_once_by_push(enforce_tenant: Tenant, replica_long_ttl: Instance) -> None:
    b = gate_of(replica_long_ttl)
    assert b.rules is not None
    pushes = b.rules.push_received
    async with enforce_tenant.client() as a:
        await ok(a, "policy.set", **one_list_per_hour())
    # The TTL is 300 s and the wait below at most 60 s: only the push can bring the rule.
    await eventually(lambda: _sees(replica_long_ttl, enforce_tenant, True), within=60)
    assert b.rules.push_received > pushes
    async with on(enforce_tenant, replica_long_ttl).client(**{"X-Loom-Agent": "bot"}) as c:
        await ok(c, "grants.list")
        await refused(c, "grants.list", 403, "POLICY_FORBIDDEN")
    async with enforce_tenant.client() as a:
        await ok(a, "policy.delete", name="one-list-per-hour")
    await eventually(lambda: _sees(replica_long_ttl, enforce_tenant, False), within=60)


async def test_without_the_push_a_change_is_applied_once_the_cache_ttl_has_passed(
    enforce_tenant: Tenant, replica_long_ttl: Instance
) -> None:
    c = gate_of(replica_long_ttl)
    assert c.rules is not None
    await c.stop_consumer(RULE_PUSHES.name)  # as if every push to this replica were lost
    ttl = replica_long_ttl.runtime.settings.plane(PolicySettings).policy_cache_ttl_seconds
    await c.rules.get(enforce_tenant.org, enforce_tenant.namespace)  # confirmed now, before the change
    async with enforce_tenant.client() as a:
        await ok(a, "policy.set", **one_list_per_hour())
    assert c.rules.push_received == 0
    # Within the TTL the replica may serve what it confirmed; once the TTL has passed, the call
    # path reloads before applying any rule. The TTL passing is made, not waited for: the
    # book's confirmation instants move back by more than the TTL.
    key = (enforce_tenant.org, enforce_tenant.namespace)
    c.rules._confirmed[key] = c.rules._confirmed.get(key, 0.0) - ttl - 1.0
    c.rules._full_at -= ttl + 1.0
    async with on(enforce_tenant, replica_long_ttl).client(**{"X-Loom-Agent": "bot"}) as cl:
        await ok(cl, "grants.list")
        await refused(cl, "grants.list", 403, "POLICY_FORBIDDEN")


async def _sees(inst: Instance, tenant: Tenant, present: bool) -> bool:
    rules = gate_of(inst).rules
    assert rules is not None
    return (rules.cached(tenant.org, tenant.namespace).get("one-list-per-hour") is not None) == present

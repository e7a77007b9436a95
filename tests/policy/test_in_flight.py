"""Calls in flight count toward count_within: a reservation is taken at the gate and settled
by the call's ledger row, so racing calls cannot all pass a limit meant for fewer."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from loom_core.bus import NatsServer
from loom_core.store.embedded import EmbeddedStore
from loom_runner.embedded import Instance

from tests.conftest import Tenant, call
from tests.policy.conftest import eventually, gate_of, new_tenant, ok, on, start_policy_instance

LIMIT = 10


def at_most(n: int, operation: str, key: str = "actor") -> dict[str, Any]:
    return {
        "name": f"at-most-{n}",
        "effect": "forbid",
        "actions": [operation],
        "condition": {"op": "count_within", "within": "1h", "operation": operation, "cmp": "gte", "value": n, "key": key},
    }


async def race(tenant: Tenant, n: int, **headers: str) -> list[int]:
    async with tenant.client(**headers) as c:
        responses = await asyncio.gather(*(call(c, "grants.set", subject=f"user:u{i}", role="viewer") for i in range(n)))
    return [r.status_code for r in responses]


async def test_fifty_parallel_calls_against_a_limit_of_ten_let_exactly_ten_through(enforce_stack: Instance, enforce_tenant: Tenant) -> None:
    async with enforce_tenant.client() as c:
        await ok(c, "policy.set", **at_most(LIMIT, "grants.set"))

    statuses = await race(enforce_tenant, 50)

    assert statuses.count(200) == LIMIT, statuses
    assert statuses.count(403) == 50 - LIMIT
    # Every reservation is settled by its call's ledger row: none is left in flight.
    gate = gate_of(enforce_stack)
    await eventually(lambda: _no_pending(gate, enforce_tenant))


async def _no_pending(gate: Any, tenant: Tenant) -> bool:
    return not gate.reservations.pending(tenant.org, tenant.namespace, 0)


async def test_a_failed_call_releases_its_reservation(enforce_stack: Instance, enforce_tenant: Tenant) -> None:
    async with enforce_tenant.client() as c:
        await ok(c, "policy.set", **at_most(2, "grants.set"))
        # Refused by the handler (a malformed subject): it passed the gate, reserved, then failed.
        bad = await call(c, "grants.set", subject="not a subject", role="viewer")
        assert bad.status_code == 422, bad.text
        first = await call(c, "grants.set", subject="user:a", role="viewer")
        second = await call(c, "grants.set", subject="user:b", role="viewer")
        third = await call(c, "grants.set", subject="user:c", role="viewer")
    assert [first.status_code, second.status_code, third.status_code] == [200, 200, 403]


async def test_the_actor_key_bounds_a_caller_whatever_agent_label_it_sends(enforce_stack: Instance, enforce_tenant: Tenant) -> None:
    async with enforce_tenant.client() as c:
        await ok(c, "policy.set", **at_most(3, "grants.set", key="actor"))
    statuses = []
    for i in range(6):
        async with enforce_tenant.client(**{"X-Loom-Agent": f"label-{i}"}) as c:
            statuses.append((await call(c, "grants.set", subject=f"user:x{i}", role="viewer")).status_code)
    assert statuses == [200, 200, 200, 403, 403, 403]


@pytest.fixture(scope="session")
async def shared_pair(stack: Instance, data_dir: Path, store: EmbeddedStore, nats_server: NatsServer) -> AsyncIterator[list[Instance]]:
    """Two enforcing replicas that share their reservations (LOOM_POLICY_RESERVATIONS=shared)."""
    pair = [
        await start_policy_instance(data_dir, store, nats_server, f"policy-shared-{i}", policy_mode="enforce", policy_reservations="shared")
        for i in range(2)
    ]
    yield pair
    for inst in pair:
        await inst.stop()


@pytest.mark.slow  # starts two replicas of its own (shared_pair)
async def test_fifty_parallel_calls_across_two_replicas_let_exactly_ten_through(shared_pair: list[Instance]) -> None:
    tenant = await new_tenant(shared_pair[0])
    async with tenant.client() as c:
        await ok(c, "policy.set", **at_most(LIMIT, "grants.set"))
    for inst in shared_pair:  # both replicas hold the rule before the race
        await gate_of(inst).rules.changed(tenant.org, tenant.namespace)  # type: ignore[union-attr]

    halves = await asyncio.gather(race(tenant, 25), race(on(tenant, shared_pair[1]), 25))

    statuses = [s for half in halves for s in half]
    assert statuses.count(200) == LIMIT, statuses
    assert statuses.count(403) == 50 - LIMIT


@pytest.mark.slow  # starts two replicas of its own (shared_pair)
async def test_limit_is_still_exact_across_replicas_once_the_first_calls_have_finished(shared_pair: list[Instance]) -> None:
    tenant = await new_tenant(shared_pair[0])
    async with tenant.client() as c:
        await ok(c, "policy.set", **at_most(4, "grants.set"))
    for inst in shared_pair:
        await gate_of(inst).rules.changed(tenant.org, tenant.namespace)  # type: ignore[union-attr]
    first = await race(tenant, 2)  # finished on replica 0; replica 1 may not have their rows yet
    second = await race(on(tenant, shared_pair[1]), 4)
    assert first == [200, 200]
    assert sorted(second) == [200, 200, 403, 403]


async def test_sdk_leaf_helper_bounds_the_actor_by_default(enforce_stack: Instance, enforce_tenant: Tenant) -> None:
    from loom import Agent
    from loom.policy import count_within

    leaf = count_within("grants.set", within="1h", cmp="gte", value=2)
    assert leaf["key"] == "actor"
    async with Agent(
        org=enforce_tenant.org,
        namespace=enforce_tenant.namespace,
        agent="first-label",
        api_key=enforce_tenant.token,
        base_url=enforce_stack.base_url,
    ) as a:
        await a.policy.set("two-sets", effect="forbid", actions=["grants.set"], condition=leaf)
    statuses = []
    for label in ("a", "b", "c"):
        async with enforce_tenant.client(**{"X-Loom-Agent": label}) as c:
            statuses.append((await call(c, "grants.set", subject=f"user:{label}", role="viewer")).status_code)
    assert statuses == [200, 200, 403]

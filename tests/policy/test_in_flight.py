"""Calls in flight count toward count_within: a reservation is taken at the gate and settled
by the call's ledger row, so racing calls cannot all pass a limit meant for fewer."""

from __future__ import annotations

import asyncio
from typing import Any

from loom_runner.embedded import Instance

from tests.conftest import Tenant, call
from tests.policy.conftest import eventually, gate_of, ok

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

"""Two replicas sharing the bus and the store: a revocation or a grant change made on one is
honoured by the other within a second (pushed over NATS, not waiting for a cache to age)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from loom_core.bus import NatsServer
from loom_core.settings import Settings
from loom_core.store.embedded import EmbeddedStore
from loom_runner.embedded import Instance, start_instance

from tests.conftest import Tenant, call

PUSH_DEADLINE_S = 1.0


@pytest.fixture(scope="module")
async def replica_b(settings: Settings, store: EmbeddedStore, nats_server: NatsServer, stack: Instance) -> AsyncIterator[Instance]:
    inst = await start_instance(settings, store=store, nats_url=nats_server.url, name="b")
    yield inst
    await inst.stop()


def on(replica: Instance, token: str, **headers: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=replica.base_url, headers={"Authorization": f"Bearer {token}", **headers}, timeout=30)


async def whoami(replica: Instance, token: str) -> httpx.Response:
    async with on(replica, token) as c:
        return await call(c, "auth.whoami")


async def until(check: Any, deadline_s: float) -> float:
    """Poll `check()` until it is true; the seconds it took, or fail past the deadline."""
    started = time.monotonic()
    while True:
        if await check():
            return time.monotonic() - started
        if time.monotonic() - started > deadline_s:
            pytest.fail(f"not honoured within {deadline_s}s")
        await asyncio.sleep(0.02)


async def mint(replica: Instance, token: str, **args: Any) -> dict[str, Any]:
    async with on(replica, token) as c:
        r = await call(c, "token.mint", **args)
    assert r.status_code == 200, r.text
    return dict(r.json())


async def test_replicas_are_separate_servers(stack: Instance, replica_b: Instance) -> None:
    assert stack.base_url != replica_b.base_url
    assert stack.grpc_address("identity") != replica_b.grpc_address("identity")
    assert stack.runtime.auth is not replica_b.runtime.auth


async def test_token_revoked_on_a_is_refused_by_b_within_a_second(tenant: Tenant, stack: Instance, replica_b: Instance) -> None:
    t = await mint(stack, tenant.token, roles={tenant.namespace: "writer"}, ttl_seconds=600)
    assert (await whoami(stack, t["token"])).status_code == 200
    assert (await whoami(replica_b, t["token"])).status_code == 200
    async with on(stack, tenant.token) as c:
        assert (await call(c, "token.revoke", token_id=t["token_id"])).status_code == 200

    async def refused_on_b() -> bool:
        r = await whoami(replica_b, t["token"])
        return r.status_code == 401 and r.json()["error"]["code"] == "AUTH_REVOKED"

    await until(refused_on_b, PUSH_DEADLINE_S)
    r = await whoami(stack, t["token"])
    assert r.status_code == 401 and r.json()["error"]["code"] == "AUTH_REVOKED"


async def test_session_revoked_on_b_is_refused_by_a_within_a_second(tenant: Tenant, stack: Instance, replica_b: Instance) -> None:
    t = await mint(replica_b, tenant.token, roles={tenant.namespace: "viewer"}, ttl_seconds=600, start_session=True)
    assert (await whoami(stack, t["token"])).status_code == 200
    async with on(replica_b, tenant.token) as c:
        assert (await call(c, "token.revoke", session_id=t["session_id"])).status_code == 200

    async def refused_on_a() -> bool:
        r = await whoami(stack, t["token"])
        return r.status_code == 401 and r.json()["error"]["code"] == "AUTH_REVOKED"

    await until(refused_on_a, PUSH_DEADLINE_S)


async def test_grant_lowered_on_a_invalidates_bs_cache(tenant: Tenant, stack: Instance, replica_b: Instance) -> None:
    subject = f"user:{uuid.uuid4().hex[:8]}"
    async with on(stack, tenant.token) as c:
        assert (await call(c, "grants.set", subject=subject, role="admin")).status_code == 200
    t = await mint(stack, tenant.token, subject=subject, roles={tenant.namespace: "admin"}, ttl_seconds=600)
    # B caches the admin grant (LOOM_GRANT_CACHE_TTL_SECONDS is 5 s in the tests).
    assert (await whoami(replica_b, t["token"])).json()["role"] == "admin"
    assert replica_b.runtime.settings.grant_cache_ttl_seconds > 2 * PUSH_DEADLINE_S
    async with on(stack, tenant.token) as c:
        assert (await call(c, "grants.set", subject=subject, role="viewer")).status_code == 200

    async def lowered_on_b() -> bool:
        return bool((await whoami(replica_b, t["token"])).json()["role"] == "viewer")

    await until(lowered_on_b, PUSH_DEADLINE_S)
    async with on(replica_b, t["token"]) as c:
        r = await call(c, "grants.set", subject="user:someone", role="viewer")
    assert r.status_code == 403 and r.json()["error"]["code"] == "AUTH_INSUFFICIENT"


async def test_replica_started_after_a_revocation_refuses_the_token(
    tenant: Tenant, settings: Settings, store: EmbeddedStore, nats_server: NatsServer, stack: Instance
) -> None:
    t = await mint(stack, tenant.token, roles={tenant.namespace: "viewer"}, ttl_seconds=600)
    async with on(stack, tenant.token) as c:
        assert (await call(c, "token.revoke", token_id=t["token_id"])).status_code == 200
    late = await start_instance(settings, store=store, nats_url=nats_server.url, name="late")
    try:
        r = await whoami(late, t["token"])
        assert r.status_code == 401 and r.json()["error"]["code"] == "AUTH_REVOKED"
        assert (await whoami(late, tenant.token)).status_code == 200
    finally:
        await late.stop()


async def test_calls_on_either_replica_are_ledgered_once(tenant: Tenant, stack: Instance, replica_b: Instance) -> None:
    run = f"run-{uuid.uuid4().hex}"
    for replica in (stack, replica_b, replica_b):
        async with on(replica, tenant.token, **{"X-Loom-Run-Id": run}) as c:
            assert (await call(c, "auth.whoami")).status_code == 200

    async def three_rows() -> bool:
        for replica in (stack, replica_b):
            await replica.runtime.ledger.flush()
        rows = await stack.runtime.store.query("SELECT count() AS n FROM {db}.agent_events WHERE run_id = {run:String}", {"run": run})
        return int(rows[0]["n"]) >= 3

    await until(three_rows, 3.0)
    await asyncio.sleep(0.3)
    rows = await stack.runtime.store.query("SELECT count() AS n FROM {db}.agent_events WHERE run_id = {run:String}", {"run": run})
    assert int(rows[0]["n"]) == 3

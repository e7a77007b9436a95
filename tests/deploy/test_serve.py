"""`loom serve` in cluster mode: what it refuses to start, the storeless relay gateway and its
readiness, the planes' gRPC health service, and the container probe Compose runs."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from loom_core.bus.natsserver import free_port
from loom_core.settings import Settings
from loom_runner.cluster import plane_addresses, serve_problem, start_relay_gateway
from loom_runner.embedded import Instance
from loom_runner.probe import check

from tests.conftest import Tenant

LOOM = Path(sys.executable).parent / "loom"


def test_serve_refuses_what_cannot_run() -> None:
    s = Settings()
    assert "--planes, --gateway" in (serve_problem(s, set(), False) or "")
    assert "LOOM_NATS_URL" in (serve_problem(s, {"tasks"}, False) or "")
    assert "LOOM_PLANE_ADDRESSES" in (serve_problem(s, set(), True) or "")
    assert "LOOM_CLICKHOUSE_URL" in (serve_problem(Settings(nats_url="nats://n:4222", clickhouse_cluster="c"), {"tasks"}, False) or "")
    # Allowed: planes on the embedded store (one owner process), a gateway that only relays.
    assert serve_problem(Settings(nats_url="nats://n:4222"), {"tasks", "policy"}, False) is None
    assert serve_problem(Settings(plane_addresses="tasks=t:7000"), set(), True) is None


def test_the_serve_command_exits_with_the_reason() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOM_")}
    out = subprocess.run([str(LOOM), "serve", "--planes", "tasks"], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "LOOM_NATS_URL" in out.stderr


def test_plane_addresses_are_parsed_from_the_setting() -> None:
    s = Settings(plane_addresses=" tasks=tasks:7000, policy=policy:7000,bad,=x:1")
    assert plane_addresses(s) == {"tasks": "tasks:7000", "policy": "policy:7000"}


async def test_each_plane_serves_grpc_health_and_the_probe_reads_it(stack: Instance) -> None:
    # The probe runs its own event loop, as in a container: here in a thread beside the stack's.
    for plane in stack.servers:
        assert await asyncio.to_thread(check, f"grpc://{stack.grpc_address(plane)}") is None
    assert await asyncio.to_thread(check, f"grpc://127.0.0.1:{free_port()}") is not None
    assert await asyncio.to_thread(check, f"{stack.base_url}/v1/health/ready") is None
    assert await asyncio.to_thread(check, f"http://127.0.0.1:{free_port()}/v1/health/ready") is not None
    assert check("ftp://x") is not None


def test_the_probe_command_exits_nonzero_when_unhealthy() -> None:
    out = subprocess.run([sys.executable, "-m", "loom_runner.probe", f"grpc://127.0.0.1:{free_port()}"], capture_output=True, timeout=60)
    assert out.returncode == 1 and b"unhealthy" in out.stderr
    assert subprocess.run([sys.executable, "-m", "loom_runner.probe"], capture_output=True, timeout=60).returncode == 2


async def test_a_relay_gateway_holds_no_store_and_is_ready_only_while_its_planes_serve(stack: Instance, tenant: Tenant) -> None:
    settings = Settings(http_port=0, plane_addresses="")
    down = await start_relay_gateway(settings, {"identity": f"127.0.0.1:{free_port()}"})
    try:
        async with httpx.AsyncClient(base_url=down.base_url) as c:
            r = await c.get("/v1/health/ready")
            assert r.status_code == 503 and r.json()["checks"]["planes"]["ok"] is False
            assert (await c.get("/v1/health")).status_code == 200
            err = await c.post("/v1/auth.whoami", json={}, headers={"Authorization": f"Bearer {tenant.token}"})
            assert err.status_code == 503 and err.json()["error"]["code"] == "BACKEND_UNAVAILABLE"
    finally:
        await down.stop()
    up = await start_relay_gateway(settings, {"identity": stack.grpc_address("identity")})
    try:
        async with httpx.AsyncClient(base_url=up.base_url, headers={"Authorization": f"Bearer {tenant.token}"}) as c:
            assert (await c.get("/v1/health/ready")).json() == {"status": "ready", "checks": {"planes": {"ok": True, "required": True}}}
            me = await c.post("/v1/auth.whoami", json={})
            assert me.status_code == 200 and me.json()["org"] == tenant.org
            unknown = await c.post("/v1/task.create", json={})
            assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "UNKNOWN_OP", "a plane it does not relay"
    finally:
        await up.stop()


@pytest.mark.parametrize("target", ["grpc://", "http://"])
def test_the_probe_answers_for_a_target_with_no_address(target: str) -> None:
    assert check(target) is not None

"""/v1/health and /v1/health/ready show each plane's `health()` checks under `checks`; a check
marked `required: false` never turns ready into not-ready (the common agreement's hook)."""

from __future__ import annotations

from typing import Any

import httpx
from loom_gateway.app import create_app
from loom_gateway.relay import Relay
from loom_runner.embedded import Instance


def app_with(stack: Instance, plane_checks: dict[str, dict[str, Any]]) -> Any:
    async def health() -> dict[str, dict[str, Any]]:
        return plane_checks

    async def ok() -> None:
        return None

    return create_app(Relay(stack.runtime.catalog, {}), {"store": ok}, plane_health={"fake": health})


async def get(app: Any, path: str) -> httpx.Response:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://loom") as http:
        return await http.get(path)


async def test_a_failing_optional_plane_check_shows_but_keeps_ready(stack: Instance) -> None:
    app = app_with(
        stack, {"fake_cache": {"ok": False, "reason": "warming up", "required": False}, "fake_db": {"ok": True, "required": True}}
    )
    ready, health = await get(app, "/v1/health/ready"), await get(app, "/v1/health")
    assert ready.status_code == 200 and ready.json()["status"] == "ready"
    assert ready.json()["checks"]["fake_cache"] == {"ok": False, "reason": "warming up", "required": False}
    assert ready.json()["checks"]["fake_db"] == {"ok": True, "required": True}
    # An optional check that is not ok is shown with its reason but degrades nothing (embedded
    # mode's analysis check is never ok, and `loom up` is not degraded for it).
    assert health.status_code == 200 and health.json()["status"] == "ok"
    assert health.json()["checks"]["fake_cache"] == {"ok": False, "reason": "warming up", "required": False}


async def test_a_failing_required_plane_check_makes_ready_503(stack: Instance) -> None:
    app = app_with(stack, {"fake_db": {"ok": False, "reason": "no connection", "required": True}})
    ready = await get(app, "/v1/health/ready")
    assert ready.status_code == 503 and ready.json()["status"] == "not_ready"
    assert ready.json()["checks"]["fake_db"] == {"ok": False, "reason": "no connection", "required": True}


async def test_a_plane_hook_that_raises_is_a_failed_required_check(stack: Instance) -> None:
    async def broken() -> dict[str, dict[str, Any]]:
        raise RuntimeError("boom")

    async def ok() -> None:
        return None

    app = create_app(Relay(stack.runtime.catalog, {}), {"store": ok}, plane_health={"fake": broken})
    ready = await get(app, "/v1/health/ready")
    assert ready.status_code == 503 and ready.json()["checks"]["fake"]["ok"] is False


async def test_the_running_stack_shows_its_plane_checks(stack: Instance) -> None:
    async with httpx.AsyncClient(base_url=stack.base_url) as http:
        body = (await http.get("/v1/health/ready")).json()
    expected = {"store", "bus"}
    for plane in stack.planes:
        hook = getattr(plane, "health", None)
        if callable(hook):
            expected |= set(await hook())
    assert expected <= set(body["checks"])


async def test_a_check_that_does_not_apply_is_marked_so_not_failing(stack: Instance) -> None:
    app = app_with(stack, {"fake_analysis": {"applicable": False, "reason": "needs a server", "required": True}})
    health, ready = await get(app, "/v1/health"), await get(app, "/v1/health/ready")
    assert health.json()["status"] == "ok" and ready.status_code == 200
    assert health.json()["checks"]["fake_analysis"] == {"applicable": False, "required": False, "reason": "needs a server"}

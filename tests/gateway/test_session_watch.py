"""GET /v1/task/watch with the sign-in cookie, as a browser's `EventSource` opens it (no header
it could add: no Authorization, no CSRF token, no Origin when same-origin), over real HTTP on
loopback with httpx streaming (docs/dashboard-api.md)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from loom_gateway.sessions import SESSION_COOKIE, make_login_code
from loom_runner.embedded import Instance

from tests.conftest import TEST_SECRET, Tenant, call
from tests.gateway.test_sessions import Browser, error, grant
from tests.tasks.test_watch import Frame, frames, next_events

INBOX = "people"


@pytest.fixture
async def alice(tenant: Tenant, stack: Instance) -> AsyncIterator[Browser]:
    """user:alice, viewer in the tenant's namespace (a read is all a watch needs), signed in."""
    await grant(stack, tenant.org, "user:alice", tenant.namespace, "viewer")
    b = Browser(tenant.base_url)
    r = await b.login(make_login_code(TEST_SECRET, tenant.org, "user:alice", 900))
    assert r.status_code == 200, r.text
    yield b
    await b.close()


async def post(tenant: Tenant, op: str, **args: Any) -> dict[str, Any]:
    """An op as the tenant's admin (Bearer): what an agent does while the page watches."""
    async with tenant.client(**{"X-Loom-Namespace": tenant.namespace}) as admin:
        r = await call(admin, op, **args)
        assert r.status_code == 200, r.text
        return dict(r.json())


def watch_params(tenant: Tenant, **extra: str) -> dict[str, str]:
    return {"inbox": INBOX, "namespace": tenant.namespace, "heartbeat_seconds": "1", **extra}


async def test_the_cookie_alone_opens_an_inboxs_stream(tenant: Tenant, alice: Browser) -> None:
    await post(tenant, "inbox.register", inbox=INBOX)
    before = (await post(tenant, "task.create", inbox=INBOX, kind="chore", title="before the page"))["task"]
    async with alice.client.stream("GET", "/v1/task/watch", params=watch_params(tenant), timeout=60) as r:
        assert r.status_code == 200, await r.aread()
        assert r.headers["content-type"].startswith("text/event-stream")
        it = frames(r)
        [first] = await next_events(it, 1)
        assert first.body()["task_id"] == before["task_id"] and first.body()["kind"] == "created"
        created = asyncio.create_task(post(tenant, "task.create", inbox=INBOX, kind="chore", title="posted by an agent"))
        [live] = await next_events(it, 1)
        assert live.body()["title"] == "posted by an agent" and live.body()["actor"] == "user:admin"
        assert live.id == str(live.body()["seq"])
        await created


async def test_start_now_skips_the_history_and_names_its_cursor_first(tenant: Tenant, alice: Browser) -> None:
    await post(tenant, "inbox.register", inbox=INBOX)
    for n in range(3):
        await post(tenant, "task.create", inbox=INBOX, kind="chore", title=f"old {n}")
    async with alice.client.stream("GET", "/v1/task/watch", params=watch_params(tenant, start="now"), timeout=60) as r:
        assert r.status_code == 200, await r.aread()
        lines = r.aiter_lines()
        opening = [await lines.__anext__() for _ in range(3)]
        assert opening[0] == "retry: 1000" and opening[1].startswith("id: ") and opening[2] == ""
        cursor = int(opening[1].removeprefix("id: "))
        assert cursor > 0  # past the three old tasks' events, none of which is sent
        created = asyncio.create_task(post(tenant, "task.create", inbox=INBOX, kind="chore", title="new"))
        f = Frame()
        async for line in lines:
            if line.startswith("data: "):
                f.data = line.removeprefix("data: ")
                break
        assert f.body()["title"] == "new" and f.body()["seq"] > cursor
        await created
    # A reconnect's Last-Event-ID wins over start=now: the events after it are sent again.
    headers = {"Last-Event-ID": str(cursor)}
    async with alice.client.stream("GET", "/v1/task/watch", params=watch_params(tenant, start="now"), headers=headers) as r:
        [again] = await next_events(frames(r), 1)
        assert again.body()["title"] == "new"
    error(await alice.client.get("/v1/task/watch", params=watch_params(tenant, start="later")), 422, "VALIDATION_FAILED")


async def test_no_cookie_or_a_foreign_origin_is_refused(tenant: Tenant, alice: Browser) -> None:
    await post(tenant, "inbox.register", inbox=INBOX)
    async with httpx.AsyncClient(base_url=tenant.base_url, timeout=30) as anonymous:
        error(await anonymous.get("/v1/task/watch", params=watch_params(tenant)), 401, "AUTH_REQUIRED")
    # A cross-origin EventSource names its Origin: refused before anything is read.
    r = await alice.client.get("/v1/task/watch", params=watch_params(tenant), headers={"Origin": "https://evil.example.com"})
    assert error(r, 403, "CSRF_REJECTED")["detail"]["reason"] == "origin"
    # Loom's own origin, named, is fine (and a GET needs no CSRF token).
    async with alice.client.stream("GET", "/v1/task/watch", params=watch_params(tenant), headers={"Origin": alice.origin}) as ok:
        assert ok.status_code == 200


async def test_a_viewer_of_another_namespace_is_refused(tenant: Tenant, stack: Instance) -> None:
    await post(tenant, "inbox.register", inbox=INBOX)
    await grant(stack, tenant.org, "user:vic", "elsewhere", "viewer")
    vic = Browser(tenant.base_url)
    try:
        assert (await vic.login(make_login_code(TEST_SECRET, tenant.org, "user:vic", 900))).status_code == 200
        err = error(await vic.client.get("/v1/task/watch", params=watch_params(tenant)), 403, "AUTH_INSUFFICIENT")
        assert err["detail"]["needed"] == "viewer"
        r = await vic.client.get("/v1/task/watch", params={**watch_params(tenant), "namespace": "elsewhere"})
        error(r, 404, "RESOURCE_NOT_FOUND")  # no such inbox there
    finally:
        await vic.close()


async def test_sign_out_ends_an_open_stream_and_refuses_the_cookie_after(tenant: Tenant, alice: Browser) -> None:
    await post(tenant, "inbox.register", inbox=INBOX)
    cookie = alice.cookie
    async with alice.client.stream("GET", "/v1/task/watch", params=watch_params(tenant, start="now"), timeout=60) as r:
        assert r.status_code == 200
        out = await alice.client.post("/v1/session/logout", headers={"X-Loom-CSRF": alice.csrf, "Origin": alice.origin})
        assert out.status_code == 204
        tail = [f async for f in frames(r)]  # the stream ends by itself
        assert tail[-1].event == "error" and tail[-1].body()["error"]["code"] == "AUTH_REVOKED"
        assert not any(f.data and not f.event for f in tail)
    async with httpx.AsyncClient(base_url=tenant.base_url, timeout=30) as c:
        r = await c.get("/v1/task/watch", params=watch_params(tenant), headers={"Cookie": f"{SESSION_COOKIE}={cookie}"})
        assert error(r, 401, "AUTH_REVOKED")["detail"]["reason"] == "session"
        assert SESSION_COOKIE in r.headers["set-cookie"] and "Max-Age=0" in r.headers["set-cookie"]

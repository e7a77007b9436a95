"""Sign-in sessions over real HTTP on loopback (docs/dashboard-api.md): sign-in links, the
cookie, CSRF and Origin, the session's grants and no more, sign-out, `loom login`'s flow, and
the same session on two replicas."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from loom_core.bus import NatsServer
from loom_core.settings import Settings
from loom_core.store.embedded import EmbeddedStore
from loom_gateway.sessions import SESSION_COOKIE, make_login_code
from loom_runner.cluster import start_relay_gateway
from loom_runner.embedded import Instance, start_instance

from tests.conftest import TEST_SECRET, Tenant, call, make_settings, unique


async def grant(stack: Instance, org: str, subject: str, namespace: str, role: str) -> None:
    await stack.runtime.identity.set_grant(org, namespace, subject, role)
    await stack.runtime.auth.publish_grant_change(org, subject)


class Browser:
    """A browser's view of Loom: one cookie jar, its own origin on every request."""

    def __init__(self, base_url: str, origin: str | None = None) -> None:
        self.base_url = base_url
        self.origin = base_url if origin is None else origin
        self.client = httpx.AsyncClient(base_url=base_url, timeout=30)
        self.csrf = ""

    async def login(self, code: str) -> httpx.Response:
        r = await self.client.post("/v1/session/login", json={"code": code}, headers={"Origin": self.origin})
        if r.status_code == 200:
            self.csrf = r.json()["csrf_token"]
        return r

    async def op(self, op: str, *, csrf: str | None = None, origin: str | None = None, namespace: str = "", **args: Any) -> httpx.Response:
        headers = {
            "X-Loom-CSRF": self.csrf if csrf is None else csrf,
            "Origin": self.origin if origin is None else origin,
            "X-Loom-Namespace": namespace,
        }
        return await self.client.post(f"/v1/{op}", json=args, headers={k: v for k, v in headers.items() if v})

    @property
    def cookie(self) -> str:
        return str(self.client.cookies.get(SESSION_COOKIE) or "")

    async def close(self) -> None:
        await self.client.aclose()


@pytest.fixture
async def alice(tenant: Tenant, stack: Instance) -> AsyncIterator[Browser]:
    """user:alice, writer in the tenant's namespace, signed in with a link."""
    await grant(stack, tenant.org, "user:alice", tenant.namespace, "writer")
    b = Browser(tenant.base_url)
    r = await b.login(make_login_code(TEST_SECRET, tenant.org, "user:alice", 900))
    assert r.status_code == 200, r.text
    yield b
    await b.close()


def error(r: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert r.status_code == status, r.text
    err: dict[str, Any] = r.json()["error"]
    assert err["code"] == code, err
    return err


async def test_a_login_link_signs_in_with_an_httponly_strict_cookie(tenant: Tenant, stack: Instance) -> None:
    await grant(stack, tenant.org, "user:alice", tenant.namespace, "writer")
    b = Browser(tenant.base_url)
    try:
        r = await b.login(make_login_code(TEST_SECRET, tenant.org, "user:alice", 900))
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["subject"] == "user:alice" and body["org"] == tenant.org
        assert body["namespaces"] == [{"namespace": tenant.namespace, "role": "writer"}]
        assert body["session_id"].startswith("sid-") and body["csrf_token"] and body["expires_at"].endswith("Z")
        cookie = r.headers["set-cookie"]
        assert cookie.startswith(f"{SESSION_COOKIE}=") and "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
        assert "Secure" not in cookie  # served over plain HTTP here
        assert b.cookie and b.cookie not in r.text  # the secret is in the cookie alone, never in the body
        again = await b.client.get("/v1/session")
        assert again.status_code == 200 and again.json()["session_id"] == body["session_id"]
        assert again.json()["namespaces"] == body["namespaces"]
    finally:
        await b.close()


async def test_a_login_link_works_once(tenant: Tenant, stack: Instance) -> None:
    await grant(stack, tenant.org, "user:alice", tenant.namespace, "viewer")
    code = make_login_code(TEST_SECRET, tenant.org, "user:alice", 900)
    first, second = Browser(tenant.base_url), Browser(tenant.base_url)
    try:
        assert (await first.login(code)).status_code == 200
        err = error(await second.login(code), 401, "AUTH_INVALID")
        assert err["detail"]["reason"] == "link_used" and "already used" in err["message"]
        assert not second.cookie
    finally:
        await first.close()
        await second.close()


async def test_an_expired_or_forged_login_link_is_refused(tenant: Tenant) -> None:
    b = Browser(tenant.base_url)
    try:
        expired = make_login_code(TEST_SECRET, tenant.org, "user:alice", 900, now=time.time() - 901)
        assert error(await b.login(expired), 401, "AUTH_EXPIRED")["detail"]["reason"] == "link_expired"
        other_key = make_login_code("another-secret-0123456789abcdef0123456789", tenant.org, "user:alice", 900)
        assert error(await b.login(other_key), 401, "AUTH_INVALID")["detail"]["reason"] == "link_invalid"
        sig = make_login_code(TEST_SECRET, tenant.org, "user:alice", 900).partition(".")[2]
        forged = make_login_code(TEST_SECRET, tenant.org, "user:admin", 900).split(".")[0] + "." + sig
        assert error(await b.login(forged), 401, "AUTH_INVALID")["detail"]["reason"] == "link_invalid"
        error(await b.client.post("/v1/session/login", json={}), 422, "VALIDATION_FAILED")
        assert not b.cookie
        error(await b.client.get("/v1/session"), 401, "AUTH_REQUIRED")
    finally:
        await b.close()


async def test_a_login_from_another_origin_is_refused(tenant: Tenant, stack: Instance) -> None:
    await grant(stack, tenant.org, "user:alice", tenant.namespace, "viewer")
    b = Browser(tenant.base_url, origin="https://evil.example.com")
    try:
        code = make_login_code(TEST_SECRET, tenant.org, "user:alice", 900)
        assert error(await b.login(code), 403, "CSRF_REJECTED")["detail"]["reason"] == "origin"
        assert not b.cookie
    finally:
        await b.close()


async def test_a_cookie_call_runs_as_the_sessions_subject_and_is_ledgered_with_its_session(
    tenant: Tenant, stack: Instance, alice: Browser
) -> None:
    sid = (await alice.client.get("/v1/session")).json()["session_id"]
    r = await alice.op("auth.whoami", namespace=tenant.namespace)
    assert r.status_code == 200, r.text
    me = r.json()
    assert me["subject"] == "user:alice" and me["role"] == "writer" and me["session_id"] == sid and me["session"] == sid
    # A label the page sends cannot file the row under another session.
    r = await alice.client.post(
        "/v1/auth.whoami", json={}, headers={"X-Loom-CSRF": alice.csrf, "Origin": alice.origin, "X-Loom-Session": "forged"}
    )
    assert r.json()["session"] == sid
    await stack.runtime.ledger.flush()
    rows: list[dict[str, Any]] = []
    for _ in range(100):
        rows = await stack.runtime.store.query(
            "SELECT subject, session, token_id FROM {db}.agent_events WHERE org = {o:String} AND op = 'auth.whoami'", {"o": tenant.org}
        )
        if len(rows) >= 2:
            break
        await asyncio.sleep(0.05)
    assert len(rows) == 2 and all(row["subject"] == "user:alice" and row["session"] == sid for row in rows)
    assert all(row["token_id"].startswith("session-") for row in rows)


async def test_a_cookie_write_without_the_csrf_token_or_from_another_origin_is_403(tenant: Tenant, alice: Browser) -> None:
    cases = [
        ({"csrf": ""}, "csrf_missing"),
        ({"csrf": "wrong"}, "csrf_mismatch"),
        ({"origin": "https://evil.example.com"}, "origin"),
        ({"origin": tenant.base_url.replace("127.0.0.1", "localhost")}, "origin"),
    ]
    for kwargs, reason in cases:
        err = error(await alice.op("auth.whoami", **kwargs), 403, "CSRF_REJECTED")  # type: ignore[arg-type]
        assert err["detail"]["reason"] == reason
    # Every door the cookie reaches takes the same checks: MCP and the assistant's chat route.
    for path in ("/mcp", "/v1/assistant/chat/completions"):
        r = await alice.client.post(path, json={}, headers={"Origin": alice.origin})
        assert error(r, 403, "CSRF_REJECTED")["detail"]["reason"] == "csrf_missing"
    # No Origin and no Referer: refused too; a same-origin Referer stands in for a missing Origin.
    r = await alice.client.post("/v1/auth.whoami", json={}, headers={"X-Loom-CSRF": alice.csrf})
    assert error(r, 403, "CSRF_REJECTED")["detail"]["reason"] == "origin"
    r = await alice.client.post("/v1/auth.whoami", json={}, headers={"X-Loom-CSRF": alice.csrf, "Referer": f"{tenant.base_url}/tasks"})
    assert r.status_code == 200 and r.json()["subject"] == "user:alice"


async def test_a_bearer_request_is_unaffected_by_a_cookie(tenant: Tenant, alice: Browser) -> None:
    r = await alice.client.post(
        "/v1/auth.whoami", json={}, headers={"Authorization": f"Bearer {tenant.token}", "Origin": "https://evil.example.com"}
    )
    assert r.status_code == 200 and r.json()["subject"] == "user:admin"


async def test_a_session_has_the_subjects_grants_and_no_more(tenant: Tenant, stack: Instance) -> None:
    await grant(stack, tenant.org, "user:vic", tenant.namespace, "viewer")
    vic = Browser(tenant.base_url)
    try:
        assert (await vic.login(make_login_code(TEST_SECRET, tenant.org, "user:vic", 900))).json()["namespaces"] == [
            {"namespace": tenant.namespace, "role": "viewer"}
        ]
        assert (await vic.op("grants.list", namespace=tenant.namespace)).status_code == 200
        err = error(await vic.op("grants.set", namespace=tenant.namespace, subject="user:vic", role="admin"), 403, "AUTH_INSUFFICIENT")
        assert err["detail"]["needed"] == "admin"
        error(await vic.op("namespace.create", name=unique("ns")), 403, "AUTH_INSUFFICIENT")
        # A grant raised while signed in applies at once; lowered, it is gone at once too.
        await grant(stack, tenant.org, "user:vic", tenant.namespace, "admin")
        assert (await vic.op("auth.whoami", namespace=tenant.namespace)).json()["role"] == "admin"
        await grant(stack, tenant.org, "user:vic", tenant.namespace, "none")
        error(await vic.op("grants.list", namespace=tenant.namespace), 403, "AUTH_INSUFFICIENT")
        assert (await vic.client.get("/v1/session")).json()["namespaces"] == []
    finally:
        await vic.close()


async def test_a_session_reads_its_own_org_alone(tenant: Tenant, stack: Instance, alice: Browser) -> None:
    other = unique("org")
    r = await alice.client.post(
        "/v1/auth.whoami", json={}, headers={"X-Loom-CSRF": alice.csrf, "Origin": alice.origin, "X-Loom-Org": other}
    )
    error(r, 403, "AUTH_WRONG_ORG")
    # A link names its org: alice's grant in the tenant's org gives her nothing in another org.
    b = Browser(tenant.base_url)
    try:
        r = await b.login(make_login_code(TEST_SECRET, other, "user:alice", 900))
        assert r.status_code == 200 and r.json()["namespaces"] == []
        error(await b.op("grants.list", namespace=tenant.namespace), 403, "AUTH_INSUFFICIENT")
    finally:
        await b.close()


async def test_sign_out_ends_the_session_and_every_token_under_it(tenant: Tenant, alice: Browser) -> None:
    minted = await alice.op("token.mint", ttl_seconds=600, ends_with_session=True)
    assert minted.status_code == 200, minted.text
    child = minted.json()["token"]
    cookie, csrf = alice.cookie, alice.csrf
    error(await alice.client.post("/v1/session/logout", headers={"Origin": alice.origin}), 403, "CSRF_REJECTED")
    r = await alice.client.post("/v1/session/logout", headers={"X-Loom-CSRF": csrf, "Origin": alice.origin})
    assert r.status_code == 204
    assert SESSION_COOKIE in r.headers["set-cookie"] and "Max-Age=0" in r.headers["set-cookie"]
    assert not alice.cookie
    # The old cookie, replayed, is refused everywhere it could be used.
    headers = {"Cookie": f"{SESSION_COOKIE}={cookie}", "X-Loom-CSRF": csrf, "Origin": alice.origin}
    async with httpx.AsyncClient(base_url=tenant.base_url, timeout=30) as c:
        assert error(await c.get("/v1/session", headers=headers), 401, "AUTH_REVOKED")["detail"]["reason"] == "session"
        error(await c.post("/v1/auth.whoami", json={}, headers=headers), 401, "AUTH_REVOKED")
        error(await c.post("/v1/session/logout", headers=headers), 401, "AUTH_REVOKED")
        # What needs no credential still answers with the stale cookie.
        assert (await c.get("/v1/health", headers=headers)).status_code == 200
        assert (await c.get("/v1/ops", headers=headers)).status_code == 200
        bearer = await call(httpx.AsyncClient(base_url=tenant.base_url, headers={"Authorization": f"Bearer {child}"}), "auth.whoami")
        assert error(bearer, 401, "AUTH_REVOKED")["detail"]["reason"] == "session"


async def test_loom_login_approved_in_the_dashboard_gives_a_refreshable_credential(tenant: Tenant, alice: Browser) -> None:
    async with httpx.AsyncClient(base_url=tenant.base_url, timeout=30) as cli:
        started = (await cli.post("/v1/session/cli_start")).json()
        # A loopback address reads as localhost, where a person's browser signed in.
        local = tenant.base_url.replace("127.0.0.1", "localhost")
        assert started["approve_url"] == f"{local}/cli-login#code={started['code']}"
        assert (await cli.post("/v1/session/cli_poll", json={"poll_token": started["poll_token"]})).json() == {"status": "pending"}
        # Approving is a cookie write: CSRF and Origin apply.
        error(await alice.client.post("/v1/session/cli_approve", json={"code": started["code"]}), 403, "CSRF_REJECTED")
        error(await alice.op("session/cli_approve", code="BCDF-GHJK"), 404, "RESOURCE_NOT_FOUND")
        approved = await alice.op("session/cli_approve", code=started["code"].lower())
        assert approved.status_code == 200 and approved.json()["subject"] == "user:alice"
        error(await alice.op("session/cli_approve", code=started["code"]), 404, "RESOURCE_NOT_FOUND")
        got = (await cli.post("/v1/session/cli_poll", json={"poll_token": started["poll_token"]})).json()
        assert got["status"] == "approved" and got["subject"] == "user:alice" and got["org"] == tenant.org
        error(await cli.post("/v1/session/cli_poll", json={"poll_token": started["poll_token"]}), 401, "AUTH_INVALID")  # once
        me = await call(httpx.AsyncClient(base_url=tenant.base_url, headers={"Authorization": f"Bearer {got['token']}"}), "auth.whoami")
        assert me.json()["subject"] == "user:alice" and me.json()["session_id"] == got["session_id"]
        refreshed = (await cli.post("/v1/session/refresh", json={"refresh_token": got["refresh_token"]})).json()
        assert refreshed["session_id"] == got["session_id"]
        # The CLI's refresh token is not a browser cookie, and a browser cookie is not a refresh token.
        error(await cli.post("/v1/session/refresh", json={"refresh_token": alice.cookie}), 401, "AUTH_INVALID")
        assert (await cli.post("/v1/session/logout", json={"refresh_token": got["refresh_token"]})).status_code == 204
        error(await cli.post("/v1/session/refresh", json={"refresh_token": got["refresh_token"]}), 401, "AUTH_REVOKED")
        after = await call(httpx.AsyncClient(base_url=tenant.base_url, headers={"Authorization": f"Bearer {got['token']}"}), "auth.whoami")
        error(after, 401, "AUTH_REVOKED")
        error(await cli.post("/v1/session/cli_poll", json={"poll_token": "nope"}), 401, "AUTH_INVALID")
    # Alice's own browser session is another session: still signed in.
    assert (await alice.client.get("/v1/session")).status_code == 200


async def test_an_admin_ends_a_session_by_its_id(tenant: Tenant, alice: Browser) -> None:
    sid = (await alice.client.get("/v1/session")).json()["session_id"]
    async with tenant.client() as admin:
        assert (await call(admin, "token.revoke", session_id=sid)).status_code == 200
    assert error(await alice.op("auth.whoami"), 401, "AUTH_REVOKED")["detail"]["reason"] == "session"


async def test_revoking_the_subject_ends_its_sessions_on_every_replica(
    tenant: Tenant, stack: Instance, replica_b: Instance, alice: Browser
) -> None:
    assert (await alice.op("auth.whoami")).status_code == 200
    cookie = alice.cookie
    async with tenant.client() as admin:
        assert (await call(admin, "token.revoke", subject="user:alice")).status_code == 200
    error(await alice.op("auth.whoami"), 401, "AUTH_REVOKED")
    assert not alice.cookie  # a refused cookie is cleared
    # Replica b never minted for this session: the token it mints now is refused as well.
    b = Browser(replica_b.base_url)
    b.client.cookies.set(SESSION_COOKIE, cookie)
    b.csrf = alice.csrf
    try:
        assert error(await b.op("auth.whoami"), 401, "AUTH_REVOKED")["detail"]["reason"] == "parent_subject"
    finally:
        await b.close()
    # A new sign-in after the revocation is a new session, and works.
    again = Browser(tenant.base_url)
    try:
        assert (await again.login(make_login_code(TEST_SECRET, tenant.org, "user:alice", 900))).status_code == 200
        assert (await again.op("auth.whoami")).json()["subject"] == "user:alice"
    finally:
        await again.close()


@pytest.fixture(scope="module")
async def replica_b(settings: Settings, store: EmbeddedStore, nats_server: NatsServer, stack: Instance) -> AsyncIterator[Instance]:
    inst = await start_instance(settings, store=store, nats_url=nats_server.url, name="sessions-b")
    yield inst
    await inst.stop()


async def test_a_session_made_on_one_replica_works_and_ends_on_the_other(tenant: Tenant, stack: Instance, replica_b: Instance) -> None:
    await grant(stack, tenant.org, "user:alice", tenant.namespace, "writer")
    code = make_login_code(TEST_SECRET, tenant.org, "user:alice", 900)
    a = Browser(stack.base_url)
    b = Browser(replica_b.base_url)
    try:
        assert (await a.login(code)).status_code == 200
        error(await b.login(code), 401, "AUTH_INVALID")  # the link's single use holds across replicas
        b.client.cookies.set(SESSION_COOKIE, a.cookie)
        b.csrf = a.csrf
        assert (await b.op("auth.whoami")).json()["subject"] == "user:alice"
        assert (await a.client.post("/v1/session/logout", headers={"X-Loom-CSRF": a.csrf, "Origin": a.origin})).status_code == 204
        for _ in range(100):  # the revocation is pushed over NATS; replica b's row cache does not hide it
            r = await b.op("auth.whoami")
            if r.status_code == 401:
                break
            await asyncio.sleep(0.02)
        error(r, 401, "AUTH_REVOKED")
    finally:
        await a.close()
        await b.close()


async def test_calls_without_a_session_are_rate_limited_per_client(data_dir: Path, store: EmbeddedStore, nats_server: NatsServer) -> None:
    inst = await start_instance(make_settings(data_dir, rate_admin_per_minute=3), store=store, nats_url=nats_server.url, name="sessions-rl")
    try:
        async with httpx.AsyncClient(base_url=inst.base_url, timeout=30) as c:
            answers = [await c.post("/v1/session/cli_poll", json={"poll_token": "nope"}) for _ in range(3)]
            assert [r.status_code for r in answers] == [401, 401, 401]
            limited = await c.post("/v1/session/refresh", json={"refresh_token": "nope"})
            error(limited, 429, "RATE_LIMITED")
            assert int(limited.headers["retry-after"]) >= 1
            assert (await c.get("/v1/health")).status_code == 200
    finally:
        await inst.stop()


async def test_a_relay_only_gateway_says_it_holds_no_sessions_and_still_serves_the_app(stack: Instance) -> None:
    relay = await start_relay_gateway(Settings(http_port=0, plane_addresses=""), {"identity": stack.grpc_address("identity")})
    try:
        async with httpx.AsyncClient(base_url=relay.base_url) as c:
            err = error(await c.post("/v1/session/login", json={"code": "x"}), 503, "BACKEND_UNAVAILABLE")
            assert err["detail"]["reason"] == "no_sessions" and "--planes identity" in err["message"]
            # A cookie means nothing there: the call is unauthenticated, not a 5xx.
            r = await c.post("/v1/auth.whoami", json={}, headers={"Cookie": f"{SESSION_COOKIE}=x", "Origin": relay.base_url})
            error(r, 401, "AUTH_REQUIRED")
            assert (await c.get("/")).headers["content-type"].startswith("text/html")
    finally:
        await relay.stop()


async def test_a_page_reloaded_after_start_reads_its_fence_and_marks_the_task_done(tenant: Tenant, alice: Browser) -> None:
    """The dashboard's Start: task.claim under a day's lease held by `loom-ui`, over the cookie;
    a new page (nothing kept) reads the fence back with task.get and finishes the task."""
    async with tenant.client(**{"X-Loom-Namespace": tenant.namespace}) as admin:
        r = await call(admin, "inbox.register", inbox="people", owner_agent="loom-ui")
        assert r.status_code == 200, r.text
        task = (await call(admin, "task.create", inbox="people", kind="chore", title="water the plants")).json()["task"]

    async def ui(op: str, **args: Any) -> dict[str, Any]:
        r = await alice.client.post(
            f"/v1/{op}",
            json=args,
            headers={"X-Loom-CSRF": alice.csrf, "Origin": alice.origin, "X-Loom-Namespace": tenant.namespace, "X-Loom-Agent": "loom-ui"},
        )
        assert r.status_code == 200, r.text
        return dict(r.json())

    claimed = (await ui("task.claim", task_id=task["task_id"], lease_seconds=86400))["task"]
    assert claimed["claimed_by"] == "user:alice" and claimed["claimed_agent"] == "loom-ui"
    reloaded = (await ui("task.get", task_id=task["task_id"]))["task"]
    assert reloaded["fence"] == claimed["fence"] > 0
    done = (await ui("task.complete", task_id=task["task_id"], fence=reloaded["fence"]))["task"]
    assert done["status"] == "done"
    kinds = [e["kind"] for e in (await ui("task.history", task_id=task["task_id"]))["events"]]
    assert "claimed" in kinds and "done" in kinds

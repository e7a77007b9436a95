"""People's sign-in and the operator's doctor from the CLI as they run them, on one data dir and
one `loom up` (a start costs ~5 CPU-s; docs/development/testing.md): `loom admin login-link` with
and without `loom up` on the data dir, `loom login` approved in a signed-in browser session, its
credential file (0600), `loom token` and `loom logout` (docs/dashboard-api.md); `loom doctor`
asking the running server over its admin socket (chDB opens one process per data dir) and, once
it stops, opening the store itself and saying NATS could not be checked."""

from __future__ import annotations

import asyncio
import json
import re
import stat
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from loom_core.bus.natsserver import free_port

from tests.gateway.test_cli import LOOM, DataDir, Up, bootstrap, loom_up, run_cli

pytestmark = pytest.mark.slow
LINK = re.compile(r"^(http://[^/]+)/login#code=([A-Za-z0-9_.-]+)$")


async def login_link(d: DataDir, org: str, subject: str, *extra: str) -> tuple[int, str]:
    return await run_cli(d, "admin", "login-link", "--org", org, "--subject", subject, *extra)


async def sign_in(d: DataDir, code: str) -> tuple[httpx.AsyncClient, str]:
    """A browser signed in with the link's code: its client (cookie jar) and CSRF token."""
    browser = httpx.AsyncClient(base_url=d.base_url, timeout=30)
    r = await browser.post("/v1/session/login", json={"code": code}, headers={"Origin": d.base_url})
    assert r.status_code == 200, r.text
    return browser, str(r.json()["csrf_token"])


@dataclass
class Served:
    """The module's `loom up`, and what `loom admin login-link` printed before it started."""

    up: Up
    offline: tuple[int, str]  # user:admin, who holds a grant in acme
    offline_refused: tuple[int, str]  # user:nobody, who holds none

    @property
    def data(self) -> DataDir:
        return self.up.data


@pytest.fixture(scope="module")
async def served(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Served]:
    """acme bootstrapped and two sign-in links asked for with no server on the data dir, then one
    `loom up` for the module's tests; the last test stops it."""
    d = DataDir(tmp_path_factory.mktemp("loom-session") / "data", free_port())
    await bootstrap(d, "acme", "private")
    offline = await login_link(d, "acme", "user:admin")
    offline_refused = await login_link(d, "acme", "user:nobody")
    async with loom_up(d) as up:
        yield Served(up, offline, offline_refused)


@pytest.mark.timeout(300)
async def test_login_links_and_loom_login_with_and_without_a_server(served: Served, tmp_path: Path) -> None:
    d = served.data
    # No server: the CLI opened the store, checked the grant and signed the link itself.
    code, out = served.offline
    assert code == 0, out
    offline = LINK.match(out.strip())
    assert offline and offline.group(1) == f"http://localhost:{d.port}"
    code, out = served.offline_refused
    assert code != 0 and "holds no grant" in out

    browser, csrf = await sign_in(d, offline.group(2))  # made with no server, used on it
    try:
        # With the server up: through its admin socket; the base URL as asked.
        code, out = await login_link(d, "acme", "user:admin", "--base-url", "https://example.com")
        online = LINK.match(out.strip().replace("https://", "http://"))
        assert code == 0 and out.startswith("https://example.com/login#code=") and online, out
        second, _ = await sign_in(d, online.group(2))
        await second.aclose()
        code, out = await login_link(d, "acme", "user:nobody")
        assert code != 0 and "holds no grant" in out

        # `loom login`: prints the approve link, waits for the person to approve it.
        config = tmp_path / "config"
        proc = await asyncio.create_subprocess_exec(
            LOOM, "login", "--url", d.base_url, env=d.env(XDG_CONFIG_HOME=str(config)),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert proc.stdout is not None
        await proc.stdout.readline()
        approve_url = (await asyncio.wait_for(proc.stdout.readline(), timeout=60)).decode().strip()
        assert approve_url.startswith(f"http://localhost:{d.port}/cli-login#code=")
        cli_code = approve_url.split("#code=", 1)[1]
        r = await browser.post("/v1/session/cli_approve", json={"code": cli_code}, headers={"X-Loom-CSRF": csrf, "Origin": d.base_url})
        assert r.status_code == 200, r.text
        out_b, err_b = await asyncio.wait_for(proc.communicate(), timeout=60)
        assert proc.returncode == 0, err_b.decode()
        assert "signed in as user:admin" in out_b.decode()
        creds = config / "loom" / "credentials.json"
        assert stat.S_IMODE(creds.stat().st_mode) == 0o600
        assert stat.S_IMODE(creds.parent.stat().st_mode) == 0o700
        entry = json.loads(creds.read_text())[d.base_url]
        assert entry["subject"] == "user:admin" and entry["refresh_token"]

        code, token = await run_cli(d, "token", "--url", d.base_url, XDG_CONFIG_HOME=str(config))
        assert code == 0, token
        async with httpx.AsyncClient(base_url=d.base_url, headers={"Authorization": f"Bearer {token.strip()}"}) as c:
            me = (await c.post("/v1/auth.whoami", json={})).json()
        assert me["subject"] == "user:admin" and me["session_id"] == entry["session_id"]

        code, out = await run_cli(d, "logout", "--url", d.base_url, XDG_CONFIG_HOME=str(config))
        assert code == 0 and "signed out" in out, out
        async with httpx.AsyncClient(base_url=d.base_url, headers={"Authorization": f"Bearer {token.strip()}"}) as c:
            refused = await c.post("/v1/auth.whoami", json={})
        assert refused.status_code == 401 and refused.json()["error"]["code"] == "AUTH_REVOKED"
        assert d.base_url not in json.loads(creds.read_text())
        code, out = await run_cli(d, "token", "--url", d.base_url, XDG_CONFIG_HOME=str(config))
        assert code != 0 and "not signed in" in out
        # The browser session that approved is a session of its own: still signed in.
        assert (await browser.get("/v1/session")).status_code == 200
    finally:
        await browser.aclose()


@pytest.mark.timeout(300)
async def test_loom_doctor_asks_the_running_server(served: Served) -> None:
    code, out = await run_cli(served.data, "doctor", "--json")
    report = json.loads(out)
    assert code == 0 and report["status"] == "healthy" and report["exit_code"] == 0, out
    verdicts = {c["name"]: c["verdict"] for c in report["checks"]}
    assert verdicts["nats.reachable"] == "ok" and verdicts["nats.stream.LOOM_TASK_STATE"] == "ok"
    assert verdicts["analysis.boundary"] == "not_applicable" and verdicts["librechat.reachable"] == "not_applicable"
    assert verdicts["secrets.file"] == "ok" and verdicts["policy.mode"] == "ok"
    code, text = await run_cli(served.data, "doctor")
    assert code == 0 and text.startswith("loom doctor: healthy"), text


@pytest.mark.timeout(300)
async def test_once_the_server_stops_loom_doctor_says_what_it_could_not_check(served: Served) -> None:
    stopped, _ = await served.up.stop()
    assert stopped == 0
    d = served.data
    code, text = await run_cli(d, "doctor")
    assert code == 2, text
    assert "no `loom up` runs on LOOM_DATA_DIR" in text and "clickhouse.reachable" in text
    weak = DataDir(d.path, d.port, secret="short")
    code, text = await run_cli(weak, "doctor")
    assert code == 1 and "FAULT secrets.root" in text and "see: docs/operations/doctor/weak-root-secret.md" in text, text

"""People's sign-in from the CLI as a user runs it (docs/dashboard-api.md): `loom admin
login-link` with and without `loom up` on the data dir, and `loom login` approved in a signed-in
browser session, its credential file (0600), `loom token` and `loom logout`."""

from __future__ import annotations

import asyncio
import json
import re
import stat
from pathlib import Path

import httpx
import pytest
from loom_core.bus.natsserver import free_port

from tests.gateway.test_cli import LOOM, DataDir, bootstrap, loom_up, run_cli

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


@pytest.mark.timeout(300)
async def test_login_links_and_loom_login_with_and_without_a_server(tmp_path: Path) -> None:
    d = DataDir(tmp_path / "data", free_port())
    await bootstrap(d, "acme", "private")
    # No server: the CLI opens the store, checks the grant and signs the link itself.
    code, out = await login_link(d, "acme", "user:admin")
    assert code == 0, out
    offline = LINK.match(out.strip())
    assert offline and offline.group(1) == f"http://localhost:{d.port}"
    code, out = await login_link(d, "acme", "user:nobody")
    assert code != 0 and "holds no grant" in out

    async with loom_up(d) as up:
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
        code, _ = await up.stop()
        assert code == 0

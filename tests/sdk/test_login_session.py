"""An ``Agent`` with no API key uses the session ``loom login`` keeps, refreshing its token."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from loom import Agent, AuthError
from loom_gateway.sessions import make_login_code
from loom_runner.embedded import Instance

from tests.conftest import TEST_SECRET, Tenant
from tests.gateway.test_sessions import Browser, grant


async def cli_session(tenant: Tenant, stack: Instance) -> dict[str, str]:
    """A `loom login` session of user:alice, approved in her browser session."""
    await grant(stack, tenant.org, "user:alice", tenant.namespace, "writer")
    browser = Browser(tenant.base_url)
    try:
        assert (await browser.login(make_login_code(TEST_SECRET, tenant.org, "user:alice", 900))).status_code == 200
        async with httpx.AsyncClient(base_url=tenant.base_url) as cli:
            started = (await cli.post("/v1/session/cli_start")).json()
            assert (await browser.op("session/cli_approve", code=started["code"])).status_code == 200
            got: dict[str, str] = (await cli.post("/v1/session/cli_poll", json={"poll_token": started["poll_token"]})).json()
    finally:
        await browser.close()
    return got


async def test_an_agent_without_a_key_uses_and_refreshes_the_loom_login_session(
    tenant: Tenant, stack: Instance, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    got = await cli_session(tenant, stack)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv("LOOM_API_KEY", raising=False)
    (tmp_path / "loom").mkdir()
    # As `loom login` wrote it, its access token since expired: the agent refreshes first.
    entry = {**got, "token": "expired", "expires_at": "2020-01-01T00:00:00Z"}
    (tmp_path / "loom" / "credentials.json").write_text(json.dumps({tenant.base_url: entry}))
    async with Agent(org=tenant.org, namespace=tenant.namespace, agent="cli-bot", base_url=tenant.base_url) as a:
        me = await a.ops.auth.whoami()
        assert me["subject"] == "user:alice" and me["session_id"] == got["session_id"] and me["role"] == "writer"
        async with httpx.AsyncClient(base_url=tenant.base_url) as cli:
            assert (await cli.post("/v1/session/logout", json={"refresh_token": got["refresh_token"]})).status_code == 204
        with pytest.raises(AuthError) as ended:
            await a.ops.auth.whoami()
        assert ended.value.code == "AUTH_REVOKED"
    # Another URL has no session kept: no credential is sent at all.
    other = tenant.base_url.replace("127.0.0.1", "localhost")
    async with Agent(org=tenant.org, namespace=tenant.namespace, agent="cli-bot", base_url=other) as c:
        with pytest.raises(AuthError) as none:
            await c.ops.auth.whoami()
        assert none.value.code == "AUTH_REQUIRED"

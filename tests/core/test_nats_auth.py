"""NATS subscriptions to task events with a Loom token: nats-server's auth callout, answered by
Loom, on a nats-server of this module's own (the shared one runs without auth)."""

from __future__ import annotations

import asyncio
import json
import secrets
import sys
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import nats
import pytest
from loom_core.bus import NatsServer
from loom_core.bus.auth_callout import embedded_nats_auth, new_account_seed, public_key, render_nats_config
from loom_core.identity.tokens import Principal, TokenCodec, new_token_id
from loom_gateway.identity import bootstrap_org
from loom_runner.embedded import Instance, start_instance
from nats.aio.client import Client

from tests.conftest import make_settings

INTERNAL_USER = "loom-internal"


@dataclass
class Secured:
    server: NatsServer
    inst: Instance
    password: str


@pytest.fixture(scope="module")
async def secured(data_dir: Path, store: Any, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Secured]:
    seed = new_account_seed()
    password = secrets.token_urlsafe(24)
    conf = render_nats_config(issuer_public_key=public_key(seed), internal_user=INTERNAL_USER, internal_password=password)
    async with NatsServer(tmp_path_factory.mktemp("nats-auth"), config=conf) as srv:
        settings = make_settings(
            data_dir,
            nats_internal_user=INTERNAL_USER,
            nats_internal_password=password,
            nats_auth_callout_issuer_seed=seed,
            # This replica shares chDB with the other test replicas: no sweep, no webhooks.
            task_lease_sweep_enabled=False,
            task_webhook_deliver_enabled=False,
        )
        inst = await start_instance(settings, store=store, nats_url=srv.url, name="loom-nats-auth", only_planes={"identity", "tasks"})
        yield Secured(srv, inst, password)
        await inst.stop()


@dataclass
class Cast:
    org: str
    a: str
    b: str
    admin_token: str
    secured: Secured

    def token(self, subject: str, roles: dict[str, str], *, ttl: int = 3600, codec: TokenCodec | None = None, **extra: Any) -> str:
        now = int(time.time())
        p = Principal(jti=new_token_id("nats-"), sub=subject, org=self.org, roles=roles, iat=now, exp=now + ttl, **extra)
        return (codec or self.secured.inst.runtime.codec).encode(p)

    async def reader(self, name: str, namespace: str, role: str = "viewer") -> str:
        rt = self.secured.inst.runtime
        # A fresh subject: nothing cached its grants yet, so no grant-change notice is needed
        # (one arriving after the connect would, rightly, disconnect it once).
        await rt.identity.set_grant(self.org, namespace, f"sa:{name}", role)
        return self.token(f"sa:{name}", {namespace: role})

    async def publish(self, namespace: str, inbox: str = "bot", kind: str = "created", **payload: Any) -> None:
        body = {"org": self.org, "namespace": namespace, "inbox": inbox, "kind": kind, **payload}
        await self.secured.inst.runtime.bus.js.publish(f"loom.tasks.{self.org}.{namespace}.{inbox}.{kind}", json.dumps(body).encode())


@pytest.fixture
async def cast(secured: Secured) -> Cast:
    org = f"org-{uuid.uuid4().hex[:8]}"
    a, b = f"ns-a-{uuid.uuid4().hex[:6]}", f"ns-b-{uuid.uuid4().hex[:6]}"
    rt = secured.inst.runtime
    token, _ = await bootstrap_org(rt.identity, rt.codec, org, a, 3600)
    await rt.identity.create_namespace(org, b, "")
    return Cast(org, a, b, token, secured)


@dataclass
class Agent:
    """An external agent's nats-py connection, recording what reaches it."""

    nc: Client
    errors: list[str] = field(default_factory=list)
    got: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    events: list[str] = field(default_factory=list)

    async def subscribe(self, subject: str) -> None:
        async def on(msg: Any) -> None:
            self.got.append((msg.subject, json.loads(msg.data)))

        await self.nc.subscribe(subject, cb=on)
        await self.nc.flush()
        # flush() confirms the SUB in the agents' account; the interest reaches the LOOM
        # account's export asynchronously inside nats-server, with no client-side signal.
        await asyncio.sleep(0.2)

    async def wait(self, check: Any, timeout: float = 5.0) -> None:  # noqa: ASYNC109 - a polling helper
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                raise AssertionError(f"not in time: errors={self.errors} got={self.got} events={self.events}")
            await asyncio.sleep(0.02)


async def connect(url: str, token: str, **kw: Any) -> Agent:
    agent = Agent(nc=Client())

    async def on_error(e: Exception) -> None:
        agent.errors.append(str(e))

    async def on_disconnect() -> None:
        agent.events.append("disconnected")

    async def on_reconnect() -> None:
        agent.events.append("reconnected")

    async def on_close() -> None:
        agent.events.append("closed")

    kw.setdefault("reconnect_time_wait", 0.1)
    await agent.nc.connect(
        url,
        token=token,
        error_cb=on_error,
        disconnected_cb=on_disconnect,
        reconnected_cb=on_reconnect,
        closed_cb=on_close,
        connect_timeout=3,
        **kw,
    )
    return agent


async def refused(url: str, **auth: Any) -> str:
    async def quiet(_e: Exception) -> None:
        return None

    with pytest.raises(Exception) as err:
        nc = await nats.connect(url, allow_reconnect=False, max_reconnect_attempts=0, connect_timeout=3, error_cb=quiet, **auth)
        await nc.close()
    return str(err.value)


async def test_token_receives_task_events_of_a_namespace_it_may_read(cast: Cast) -> None:
    token = await cast.reader("reader-a", cast.a)
    agent = await connect(cast.secured.server.url, token)
    try:
        await agent.subscribe(f"loom.tasks.{cast.org}.{cast.a}.>")
        await cast.publish(cast.a, task_id="t-1")
        await agent.wait(lambda: agent.got)
    finally:
        await agent.nc.close()
    assert agent.got == [
        (
            f"loom.tasks.{cast.org}.{cast.a}.bot.created",
            {"org": cast.org, "namespace": cast.a, "inbox": "bot", "kind": "created", "task_id": "t-1"},
        )
    ]
    assert agent.errors == []


async def test_subscription_to_another_namespace_is_refused(cast: Cast) -> None:
    token = await cast.reader("reader-a2", cast.a)
    agent = await connect(cast.secured.server.url, token)
    try:
        await agent.subscribe(f"loom.tasks.{cast.org}.{cast.b}.>")
        await agent.wait(lambda: agent.errors)
        # Wider subjects that would take B in are refused too.
        await agent.subscribe(f"loom.tasks.{cast.org}.*.>")
        await agent.subscribe("loom.tasks.>")
        await agent.subscribe(">")
        await agent.wait(lambda: len(agent.errors) >= 4)
        await agent.subscribe(f"loom.tasks.{cast.org}.{cast.a}.>")
        await cast.publish(cast.b, task_id="secret-b")
        await cast.publish(cast.a, task_id="fine-a")
        await agent.wait(lambda: agent.got)
        await asyncio.sleep(0.2)
    finally:
        await agent.nc.close()
    assert [e for e in agent.errors if "permissions violation for subscription" in e] == agent.errors
    assert f'"loom.tasks.{cast.org}.{cast.b}.>"' in agent.errors[0]
    assert [p["task_id"] for _, p in agent.got] == ["fine-a"]


async def test_a_namespace_of_the_same_name_in_another_org_is_refused(cast: Cast, secured: Secured) -> None:
    other = f"org-{uuid.uuid4().hex[:8]}"
    await bootstrap_org(secured.inst.runtime.identity, secured.inst.runtime.codec, other, cast.a, 3600)
    token = await cast.reader("reader-a3", cast.a)
    agent = await connect(secured.server.url, token)
    try:
        await agent.subscribe(f"loom.tasks.{other}.{cast.a}.>")
        await agent.wait(lambda: agent.errors)
    finally:
        await agent.nc.close()
    assert "permissions violation for subscription" in agent.errors[0]


async def test_subscriber_may_publish_nothing_and_reach_no_jetstream(cast: Cast) -> None:
    token = await cast.reader("reader-a4", cast.a)
    agent = await connect(cast.secured.server.url, token)
    seen: list[str] = []

    async def internal(msg: Any) -> None:
        seen.append(msg.subject)

    rt = cast.secured.inst.runtime
    sub = await rt.bus.nc.subscribe(f"loom.tasks.{cast.org}.>", cb=internal)
    try:
        await agent.nc.publish(f"loom.tasks.{cast.org}.{cast.a}.bot.done", b"{}")
        await agent.nc.publish("$JS.API.STREAM.INFO.LOOM_TASK_EVENTS", b"")
        await agent.nc.publish(f"loom.task_wake.{cast.org}.bot", b"")
        await agent.nc.flush()
        await agent.wait(lambda: len(agent.errors) >= 3)
        with pytest.raises(Exception):  # noqa: B017 - no JetStream API for agents
            # the refused request is never answered: half a second stands for nats-py's 5 s wait
            await agent.nc.jetstream(timeout=0.5).stream_info("LOOM_TASK_EVENTS")
        await asyncio.sleep(0.2)
    finally:
        await sub.unsubscribe()
        await agent.nc.close()
    assert all("permissions violation for publish" in e for e in agent.errors[:3])
    assert seen == []


async def test_bad_expired_and_foreign_tokens_cannot_connect(cast: Cast) -> None:
    url = cast.secured.server.url
    await cast.reader("reader-a5", cast.a)
    assert "authorization violation" in (await refused(url, token="not-a-token")).lower()
    assert "authorization violation" in (await refused(url, token=cast.token("sa:reader-a5", {cast.a: "viewer"}, ttl=-10))).lower()
    forged = cast.token("sa:reader-a5", {cast.a: "viewer"}, codec=TokenCodec("another-secret-0123456789abcdef0123456789"))
    assert "authorization violation" in (await refused(url, token=forged)).lower()
    assert "authorization violation" in (await refused(url)).lower()  # no credential at all
    # Loom's internal user with a wrong password is no way in either.
    assert "authorization violation" in (await refused(url, user=INTERNAL_USER, password="wrong")).lower()


async def test_token_without_a_live_grant_cannot_connect(cast: Cast) -> None:
    # The claim names A, but the subject holds no grant there: the lower of the two is none.
    token = cast.token("sa:nobody", {cast.a: "viewer"})
    assert "authorization violation" in (await refused(cast.secured.server.url, token=token)).lower()


async def test_revoked_token_cannot_connect(cast: Cast) -> None:
    token = await cast.reader("reader-a6", cast.a)
    rt = cast.secured.inst.runtime
    jti = rt.codec.decode(token).jti
    await rt.auth.publish_revocation(await rt.identity.revoke(cast.org, "token", jti, "user:admin"))
    assert "authorization violation" in (await refused(cast.secured.server.url, token=token)).lower()


async def test_token_may_also_be_given_as_password(cast: Cast) -> None:
    token = await cast.reader("reader-a7", cast.a)
    nc = await nats.connect(cast.secured.server.url, user="loom", password=token, connect_timeout=3)
    await nc.close()


async def test_org_wide_token_reads_every_namespace_of_its_org(cast: Cast) -> None:
    agent = await connect(cast.secured.server.url, cast.admin_token)
    try:
        await agent.subscribe(f"loom.tasks.{cast.org}.{cast.a}.>")
        await agent.subscribe(f"loom.tasks.{cast.org}.{cast.b}.>")
        await cast.publish(cast.a, task_id="a")
        await cast.publish(cast.b, task_id="b")
        await agent.wait(lambda: len(agent.got) == 2)
    finally:
        await agent.nc.close()
    assert sorted(p["task_id"] for _, p in agent.got) == ["a", "b"]
    assert agent.errors == []


async def test_open_connection_of_a_revoked_token_is_disconnected_and_kept_out(cast: Cast) -> None:
    token = await cast.reader("reader-a8", cast.a)
    agent = await connect(cast.secured.server.url, token, max_reconnect_attempts=3)
    rt = cast.secured.inst.runtime
    try:
        await agent.subscribe(f"loom.tasks.{cast.org}.{cast.a}.>")
        await cast.publish(cast.a, task_id="before")
        await agent.wait(lambda: agent.got)
        await rt.auth.publish_revocation(await rt.identity.revoke(cast.org, "subject", "sa:reader-a8", "user:admin"))
        await agent.wait(lambda: "closed" in agent.events, timeout=15)  # kicked, then every reconnect refused
        await cast.publish(cast.a, task_id="after")
        await asyncio.sleep(0.2)
    finally:
        await agent.nc.close()
    assert agent.events[0] == "disconnected" and "reconnected" not in agent.events
    assert [p["task_id"] for _, p in agent.got] == ["before"]


async def test_open_connection_follows_a_grant_change(cast: Cast) -> None:
    rt = cast.secured.inst.runtime
    token = await cast.reader("reader-a9", cast.a)
    agent = await connect(cast.secured.server.url, token)
    try:
        await agent.subscribe(f"loom.tasks.{cast.org}.{cast.a}.>")
        # The grant is withdrawn: the connection is put out, and its reconnect is refused.
        await rt.identity.set_grant(cast.org, cast.a, "sa:reader-a9", "none")
        await rt.auth.publish_grant_change(cast.org, "sa:reader-a9")
        await agent.wait(lambda: "disconnected" in agent.events, timeout=15)
        await cast.publish(cast.a, task_id="after-withdrawal")
        await asyncio.sleep(0.3)
    finally:
        await agent.nc.close()
    assert agent.got == []


async def test_a_widened_grant_reaches_an_open_connection(cast: Cast) -> None:
    rt = cast.secured.inst.runtime
    await rt.identity.set_grant(cast.org, cast.a, "sa:reader-a11", "viewer")
    token = cast.token("sa:reader-a11", {cast.a: "viewer", cast.b: "viewer"})  # B claimed, not yet granted
    agent = await connect(cast.secured.server.url, token)
    try:
        await agent.subscribe(f"loom.tasks.{cast.org}.{cast.b}.>")
        await agent.wait(lambda: agent.errors)  # refused: no live grant on B
        await rt.identity.set_grant(cast.org, cast.b, "sa:reader-a11", "viewer")
        await rt.auth.publish_grant_change(cast.org, "sa:reader-a11")
        await agent.wait(lambda: "reconnected" in agent.events, timeout=15)  # re-authorised; nats-py re-subscribes
        await agent.nc.flush()
        await cast.publish(cast.b, task_id="now-readable")
        await agent.wait(lambda: agent.got)
    finally:
        await agent.nc.close()
    assert [p["task_id"] for _, p in agent.got] == ["now-readable"]


async def test_task_created_over_rest_reaches_a_subscribed_agent(cast: Cast) -> None:
    """End to end: the tasks plane publishes the event; the agent reads it with its token."""
    token = await cast.reader("reader-a10", cast.a)
    agent = await connect(cast.secured.server.url, token)
    headers = {"Authorization": f"Bearer {cast.admin_token}", "X-Loom-Namespace": cast.a, "X-Loom-Agent": "admin"}
    try:
        await agent.subscribe(f"loom.tasks.{cast.org}.{cast.a}.>")
        async with httpx.AsyncClient(base_url=cast.secured.inst.base_url, headers=headers, timeout=30) as c:
            r = await c.post("/v1/inbox.register", json={"inbox": "private-bot"})
            assert r.status_code == 200, r.text
            r = await c.post("/v1/task.create", json={"inbox": "private-bot", "kind": "chore", "title": "tidy"})
            assert r.status_code == 200, r.text
            task_id = r.json()["task"]["task_id"]
        await agent.wait(lambda: agent.got, timeout=10)
    finally:
        await agent.nc.close()
    subject, event = agent.got[0]
    assert subject == f"loom.tasks.{cast.org}.{cast.a}.private-bot.created"
    assert event["task_id"] == task_id and event["org"] == cast.org and event["namespace"] == cast.a


async def test_loom_internal_connections_keep_working_under_the_callout(secured: Secured) -> None:
    rt = secured.inst.runtime
    await rt.bus.ping()
    lease = await rt.leases.acquire(f"nats-auth-test/{uuid.uuid4().hex}", "me", 5)
    assert await rt.leases.release(lease)
    info = await rt.bus.js.stream_info("LOOM_TASK_EVENTS")
    assert info.config.name == "LOOM_TASK_EVENTS"


def test_embedded_mode_generates_credentials_and_a_matching_config(data_dir: Path) -> None:
    config, settings = embedded_nats_auth(make_settings(data_dir))
    assert settings.nats_internal_user == INTERNAL_USER and len(settings.nats_internal_password) >= 32
    assert settings.nats_auth_callout_issuer_seed.startswith("SA")
    assert public_key(settings.nats_auth_callout_issuer_seed) in config
    assert f'password: "{settings.nats_internal_password}"' in config
    assert 'auth_users: [ "loom-internal", "loom-internal-sys" ]' in config
    # Configured values are kept.
    again, kept = embedded_nats_auth(settings)
    assert kept.nats_internal_password == settings.nats_internal_password and again == config


def test_rendered_config_refuses_values_that_could_break_out_of_a_string() -> None:
    seed = new_account_seed()
    for bad in ('pw"\n}', "pw with space", "pw\\", ""):
        with pytest.raises(ValueError):
            render_nats_config(issuer_public_key=public_key(seed), internal_user="loom-internal", internal_password=bad)


@pytest.mark.slow
async def test_loom_up_serves_task_events_to_token_holders(tmp_path: Path) -> None:
    """Embedded mode end to end: `loom up` starts nats-server with the callout config and
    answers it; a bootstrap token subscribes and sees a task created over REST."""
    import os
    import re

    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOM_")}
    env.update(
        {
            "LOOM_DATA_DIR": str(tmp_path / "data"),
            "LOOM_HTTP_PORT": "0",
            "LOOM_JWT_SECRET": "up-test-secret-0123456789abcdef0123456789",
            "LOOM_LOG_LEVEL": "WARNING",
        }
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "loom_runner.cli", "up", env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    try:
        assert proc.stdout is not None
        gateway = nats_url = ""

        async def read_banner() -> None:
            nonlocal gateway, nats_url
            assert proc.stdout is not None
            while not nats_url:
                line = (await proc.stdout.readline()).decode()
                if not line:
                    raise AssertionError("loom up exited")
                if m := re.search(r"gateway (http://\S+)", line):
                    gateway = m.group(1)
                if m := re.search(r"task events\s+(nats://\S+)", line):
                    nats_url = m.group(1)

        await asyncio.wait_for(read_banner(), 60)
        boot = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "loom_runner.cli",
            "admin",
            "bootstrap",
            "--org",
            "acme",
            "--namespace",
            "private",
            env=env,
            stdout=asyncio.subprocess.PIPE,
        )
        out, _ = await asyncio.wait_for(boot.communicate(), 60)
        token = out.decode().strip().splitlines()[-1]
        # Without a token there is no way in; with one, its namespace's events arrive.
        assert "authorization violation" in (await refused(nats_url)).lower()
        agent = await connect(nats_url, token)
        try:
            await agent.subscribe("loom.tasks.acme.private.>")
            headers = {"Authorization": f"Bearer {token}", "X-Loom-Namespace": "private"}
            async with httpx.AsyncClient(base_url=gateway, headers=headers, timeout=30) as c:
                assert (await c.post("/v1/inbox.register", json={"inbox": "private-bot"})).status_code == 200
                assert (await c.post("/v1/task.create", json={"inbox": "private-bot", "kind": "chore", "title": "x"})).status_code == 200
            await agent.wait(lambda: agent.got, timeout=10)
        finally:
            await agent.nc.close()
        assert agent.got[0][0] == "loom.tasks.acme.private.private-bot.created"
        conf = tmp_path / "data" / "nats" / "nats.conf"
        assert conf.stat().st_mode & 0o077 == 0  # it holds the internal password
    finally:
        if proc.returncode is None:
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 20)
            except TimeoutError:
                proc.kill()
                await proc.wait()

"""Task inbox fixtures: two replicas of Loom of their own (fast sweep, high rate limits), an org
per test with the spec's cast (an admin, the owner bot on "private", an outside poster on
"public"), and helpers to call ops over REST."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from loom_core.bus import NatsServer
from loom_core.identity.tokens import Principal, new_token_id
from loom_core.settings import Settings
from loom_core.store.embedded import EmbeddedStore
from loom_gateway.identity import bootstrap_org
from loom_runner.embedded import Instance, start_instance
from loom_tasks.consumers.sweep import Sweeper
from loom_tasks.plane import TasksPlane

from tests.conftest import make_settings

FAST: dict[str, object] = {
    "task_sweep_interval_seconds": 0.2,
    "task_pull_poll_seconds": 0.5,
    "task_reconcile_interval_seconds": 3600.0,  # reconcile tests call it themselves
    "task_config_cache_ttl_seconds": 2.0,
    "rate_write_per_minute": 1_000_000,
    "rate_read_per_minute": 1_000_000,
    "rate_admin_per_minute": 100_000,
}


def task_settings(data_dir: Path, **overrides: object) -> Settings:
    return make_settings(data_dir, **{**FAST, **overrides})


# Like `stack` (tests/conftest.py), the tasks replicas follow the session's `transport`
# parameter: every tasks test runs with the gateway reaching the planes in process and over gRPC.
@pytest.fixture(scope="session")
async def tasks_a(data_dir: Path, store: EmbeddedStore, nats_server: NatsServer, transport: str) -> AsyncIterator[Instance]:
    inst = await start_instance(
        task_settings(data_dir), store=store, nats_url=nats_server.url, name=f"tasks-a-{transport}", transport=transport
    )
    yield inst
    await inst.stop()


@pytest.fixture(scope="session")
async def tasks_b(
    data_dir: Path, store: EmbeddedStore, nats_server: NatsServer, tasks_a: Instance, transport: str
) -> AsyncIterator[Instance]:
    inst = await start_instance(
        task_settings(data_dir), store=store, nats_url=nats_server.url, name=f"tasks-b-{transport}", transport=transport
    )
    yield inst
    await inst.stop()


@pytest.fixture
async def make_instance(
    data_dir: Path, store: EmbeddedStore, nats_server: NatsServer, transport: str
) -> AsyncIterator[Callable[..., Awaitable[Instance]]]:
    """A replica with settings of its own (and the session's transport), stopped at the end of the test."""
    started: list[Instance] = []

    async def make(nats_url: str | None = None, **overrides: object) -> Instance:
        inst = await start_instance(
            task_settings(data_dir, **overrides), store=store, nats_url=nats_url or nats_server.url, name=f"tasks-{uuid.uuid4().hex[:6]}"
        )
        started.append(inst)
        return inst

    yield make
    for inst in reversed(started):
        with contextlib.suppress(Exception):  # a test may have broken its bus on purpose
            await asyncio.wait_for(inst.stop(), 10)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


class ApiError(AssertionError):
    pass


def _answer(op: str, r: httpx.Response) -> dict[str, Any]:
    """A call's 200 body; any other answer fails the test, naming the op."""
    if r.status_code != 200:
        raise ApiError(f"{op} -> {r.status_code} {r.text}")
    body = r.json()
    assert isinstance(body, dict)
    return body


@dataclass
class Api:
    """One caller over REST: a token, a label, an instance."""

    client: httpx.AsyncClient
    subject: str
    agent: str

    async def raw(self, op: str, /, **args: Any) -> httpx.Response:
        return await self.client.post(f"/v1/{op}", json=args)

    async def __call__(self, op: str, /, **args: Any) -> dict[str, Any]:
        return _answer(op, await self.raw(op, **args))

    async def retrying(self, op: str, /, **args: Any) -> dict[str, Any]:
        """As a call, retrying a retryable 503 (a projection behind on a busy machine) after its
        `retry_after_s`, a few times, as the SDKs do: nothing was written by the refused call."""
        for _ in range(4):
            r = await self.raw(op, **args)
            if r.status_code != 503 or not r.json()["error"].get("retryable"):
                break
            await asyncio.sleep(float(r.json()["error"]["detail"].get("retry_after_s", 1)))
        return _answer(op, r)

    async def refused(self, status: int, code: str, op: str, /, **args: Any) -> dict[str, Any]:
        r = await self.raw(op, **args)
        assert r.status_code == status, f"{op}: expected {status} {code}, got {r.status_code} {r.text}"
        err = r.json()["error"]
        assert err["code"] == code, err
        return dict(err)


@dataclass
class Org:
    """A fresh org with the spec's cast: namespaces `private` (the inbox's owner namespace) and
    `public` (the outside poster's), each under a unique prefix."""

    name: str
    private: str
    public: str
    inst: Instance
    admin_token: str
    clients: list[httpx.AsyncClient] = field(default_factory=list)
    granted: dict[tuple[str, str], str] = field(default_factory=dict)  # (subject, namespace) -> the role this Org wrote

    def token(self, subject: str, roles: dict[str, str], default_namespace: str = "", ttl: int = 3600) -> str:
        now = int(time.time())
        p = Principal(
            jti=new_token_id("test-"), sub=subject, org=self.name, roles=roles, iat=now, exp=now + ttl, default_namespace=default_namespace
        )
        return self.inst.runtime.codec.encode(p)

    async def grant(self, subject: str, namespace: str, role: str) -> None:
        # A test asks for the same member again and again (twenty workers are twenty `owner()`s):
        # a grant this Org wrote already is live, so it is written (a chDB insert) and pushed once.
        if self.granted.get((subject, namespace)) == role:
            return
        await self.inst.runtime.identity.set_grant(self.name, namespace, subject, role)
        await self.inst.runtime.auth.publish_grant_change(self.name, subject)
        self.granted[subject, namespace] = role

    async def member(self, subject: str, roles: dict[str, str], agent: str = "", namespace: str = "", via: Instance | None = None) -> Api:
        """A subject holding `roles` (namespace -> role) as live grants and token claims."""
        for ns, role in roles.items():
            await self.grant(subject, ns, role)
        ns = namespace or next(iter(roles))
        return self.api(self.token(subject, roles, ns), subject, agent=agent, namespace=ns, via=via)

    def api(self, token: str, subject: str, *, agent: str = "", namespace: str = "", via: Instance | None = None) -> Api:
        headers = {"Authorization": f"Bearer {token}"}
        if agent:
            headers["X-Loom-Agent"] = agent
        if namespace:
            headers["X-Loom-Namespace"] = namespace
        client = httpx.AsyncClient(base_url=(via or self.inst).base_url, headers=headers, timeout=60)
        self.clients.append(client)
        return Api(client, subject, agent)

    async def admin(self, via: Instance | None = None) -> Api:
        return self.api(self.admin_token, "user:admin", agent="admin", namespace=self.private, via=via)

    async def owner(self, via: Instance | None = None, agent: str = "private-bot") -> Api:
        return await self.member("sa:private-bot", {self.private: "writer"}, agent=agent, via=via)

    async def outsider(self, via: Instance | None = None, name: str = "public-bot") -> Api:
        return await self.member(f"sa:{name}", {self.public: "writer"}, agent=name, via=via)

    async def close(self) -> None:
        for c in self.clients:
            await c.aclose()


@pytest.fixture
async def org(tasks_a: Instance) -> AsyncIterator[Org]:
    name = unique("org")
    private, public = f"private-{uuid.uuid4().hex[:6]}", f"public-{uuid.uuid4().hex[:6]}"
    token, _ = await bootstrap_org(tasks_a.runtime.identity, tasks_a.runtime.codec, name, private, 3600)
    await tasks_a.runtime.identity.create_namespace(name, public, "")
    o = Org(name, private, public, tasks_a, token)
    yield o
    await o.close()


async def register(admin: Api, inbox: str = "private-bot", **args: Any) -> dict[str, Any]:
    body = await admin("inbox.register", inbox=inbox, **{"owner_agent": "private-bot", **args})
    return dict(body["inbox"])


async def eventually(check: Callable[[], Awaitable[bool]], within: float = 10.0, every: float = 0.05) -> None:
    deadline = time.monotonic() + within
    while True:
        if await check():
            return
        if time.monotonic() >= deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(every)


def tasks_plane(inst: Instance) -> TasksPlane:
    p = next(p for p in inst.planes if p.name == "tasks")
    assert isinstance(p, TasksPlane)
    return p


async def sweep_passes(n: int = 2) -> None:
    """Wait until the sweep (whichever replica in this process holds its lease) has run `n` more passes."""
    start = Sweeper.passes_in_process

    async def ran() -> bool:
        return Sweeper.passes_in_process >= start + n

    await eventually(ran, within=15, every=0.02)


async def retire(org: Org, task_id: str) -> None:
    """Do what the sweep does to a finished task once its retention is over (here: none), until
    the task has left NATS (it waits for the projection to hold the task first)."""
    p = tasks_plane(org.inst)
    rt = org.inst.runtime
    sweeper = Sweeper(p.engine, p.truth, rt.bus, p.directory, rt.leases, interval=0.05, retention=0.0, tombstone_ttl=3600.0)

    async def gone() -> bool:
        await sweeper.sweep_task(org.name, task_id)
        st = await p.truth.read(org.name, task_id)
        return st is not None and st.row is None

    await eventually(gone, within=15)

"""Decisions fixtures: callers of the test's tenant under chosen agent labels and roles, over
REST on the running stack, and helpers that assert an answer or a refusal."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from loom_core.identity.tokens import Principal, new_token_id
from loom_runner.embedded import Instance

from tests.conftest import Tenant, call


@dataclass
class Api:
    client: httpx.AsyncClient
    agent: str

    async def raw(self, op: str, /, **args: Any) -> httpx.Response:
        return await call(self.client, op, **args)

    async def ok(self, op: str, /, **args: Any) -> dict[str, Any]:
        r = await self.raw(op, **args)
        assert r.status_code == 200, f"{op}: {r.status_code} {r.text}"
        body = r.json()
        assert isinstance(body, dict)
        return body

    async def refused(self, status: int, code: str, op: str, /, **args: Any) -> dict[str, Any]:
        r = await self.raw(op, **args)
        assert r.status_code == status, f"{op}: expected {status} {code}, got {r.status_code} {r.text}"
        err = r.json()["error"]
        assert err["code"] == code, err
        return dict(err)


@dataclass
class Desk:
    """The tenant, and callers of it under agent labels (admin token unless a role is asked)."""

    tenant: Tenant
    inst: Instance
    clients: list[httpx.AsyncClient] = field(default_factory=list)

    def as_agent(self, agent: str, *, role: str = "", run_id: str = "", user: str = "", session: str = "") -> Api:
        token = self.tenant.token
        if role:
            now = int(time.time())
            p = Principal(
                jti=new_token_id("test-"),
                sub=f"sa:{agent}",
                org=self.tenant.org,
                roles={self.tenant.namespace: role},
                iat=now,
                exp=now + 3600,
                default_namespace=self.tenant.namespace,
            )
            token = self.inst.runtime.codec.encode(p)
        headers = {"X-Loom-Agent": agent, "X-Loom-Namespace": self.tenant.namespace}
        for name, value in (("X-Loom-Run-Id", run_id), ("X-Loom-User", user), ("X-Loom-Session", session)):
            if value:
                headers[name] = value
        client = self.tenant.client(token, **headers)
        self.clients.append(client)
        return Api(client, agent)

    async def grant(self, agent: str, role: str) -> None:
        await self.inst.runtime.identity.set_grant(self.tenant.org, self.tenant.namespace, f"sa:{agent}", role)
        await self.inst.runtime.auth.publish_grant_change(self.tenant.org, f"sa:{agent}")


@pytest.fixture
async def desk(tenant: Tenant, stack: Instance) -> AsyncIterator[Desk]:
    d = Desk(tenant, stack)
    yield d
    for c in d.clients:
        await c.aclose()


STORAGE = {
    "category": "storage",
    "scenario": "retention for raw transcripts in the support namespace",
    "reasoning": "Replay needs 30 days; legal hold is handled by export, not by retention.",
    "outcome": "keep transcripts 30 days",
    "alternatives": ["keep forever", "7 days"],
    "confidence": 0.8,
    "influenced_by": ["policy/legal/hold"],
}

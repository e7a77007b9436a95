from __future__ import annotations

from tests.conftest import Tenant, call


async def test_whoami_through_rest_answers_the_verified_subject(tenant: Tenant) -> None:
    async with tenant.client() as c:
        r = await call(c, "auth.whoami")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["subject"] == "user:admin"
    assert body["org"] == tenant.org
    assert body["namespace"] == tenant.namespace
    assert body["role"] == "admin"

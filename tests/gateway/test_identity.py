"""Identity through the REST door: every refusal of the token check, role and scope, and the
identity ops (mint, revoke, grants) on a running instance."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from loom_core.identity.tokens import Principal, TokenCodec, new_token_id
from loom_gateway.identity import bootstrap_org
from loom_runner.embedded import Instance

from tests.conftest import TEST_SECRET, Tenant, call, unique


def error_of(r: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["code"] == code, err
    return dict(err)


async def mint(c: httpx.AsyncClient, **args: Any) -> dict[str, Any]:
    r = await call(c, "token.mint", **args)
    assert r.status_code == 200, r.text
    return dict(r.json())


async def whoami(tenant: Tenant, token: str, **headers: str) -> httpx.Response:
    async with tenant.client(token, **headers) as c:
        return await call(c, "auth.whoami")


async def grant(tenant: Tenant, subject: str, role: str, namespace: str | None = None) -> None:
    async with tenant.client() as c:
        r = await call(c, "grants.set", namespace=namespace or tenant.namespace, subject=subject, role=role)
    assert r.status_code == 200, r.text


async def grants_in(tenant: Tenant, namespace: str | None = None) -> dict[str, str]:
    async with tenant.client() as c:
        r = await call(c, "grants.list", namespace=namespace or tenant.namespace)
    assert r.status_code == 200, r.text
    return {g["subject"]: g["role"] for g in r.json()["grants"] if g["namespace"] != "*"}


def principal_for(tenant: Tenant, **over: Any) -> Principal:
    now = int(time.time())
    base: dict[str, Any] = {
        "jti": new_token_id("t-"),
        "sub": "user:admin",
        "org": tenant.org,
        "roles": {"*": "admin"},
        "iat": now,
        "exp": now + 600,
        "default_namespace": tenant.namespace,
    }
    base.update(over)
    return Principal(**base)


# --- the token ---------------------------------------------------------------------------------


async def test_no_token_is_refused_with_auth_required(tenant: Tenant) -> None:
    async with httpx.AsyncClient(base_url=tenant.base_url) as c:
        r = await call(c, "auth.whoami")
    error_of(r, 401, "AUTH_REQUIRED")


async def test_non_bearer_authorization_is_refused_with_auth_required(tenant: Tenant) -> None:
    async with httpx.AsyncClient(base_url=tenant.base_url, headers={"Authorization": f"Basic {tenant.token}"}) as c:
        r = await call(c, "auth.whoami")
    error_of(r, 401, "AUTH_REQUIRED")


async def test_token_with_a_bad_signature_is_refused_with_auth_invalid(tenant: Tenant) -> None:
    forged = TokenCodec("not-the-server-secret-0123456789abcdef").encode(principal_for(tenant))
    error_of(await whoami(tenant, forged), 401, "AUTH_INVALID")


async def test_garbage_token_is_refused_with_auth_invalid(tenant: Tenant) -> None:
    error_of(await whoami(tenant, "not.a.jwt"), 401, "AUTH_INVALID")


async def test_expired_token_is_refused_with_auth_expired(tenant: Tenant, stack: Instance) -> None:
    now = int(time.time())
    expired = stack.runtime.codec.encode(principal_for(tenant, iat=now - 120, exp=now - 1))
    error_of(await whoami(tenant, expired), 401, "AUTH_EXPIRED")


async def test_token_of_another_org_is_refused_when_the_org_header_differs(tenant: Tenant) -> None:
    err = error_of(await whoami(tenant, tenant.token, **{"X-Loom-Org": unique("org")}), 403, "AUTH_WRONG_ORG")
    assert err["detail"]["reason"] == "wrong_org"
    r = await whoami(tenant, tenant.token, **{"X-Loom-Org": tenant.org})
    assert r.status_code == 200, r.text


# --- revocation ----------------------------------------------------------------------------------


async def test_revoked_token_id_and_its_child_are_refused(tenant: Tenant) -> None:
    async with tenant.client() as admin:
        parent = await mint(admin, roles={tenant.namespace: "writer"}, ttl_seconds=600)
        async with tenant.client(parent["token"]) as pc:
            child = await mint(pc, roles={tenant.namespace: "viewer"}, ttl_seconds=600)
        assert (await whoami(tenant, child["token"])).status_code == 200
        r = await call(admin, "token.revoke", token_id=parent["token_id"])
        assert r.status_code == 200, r.text
        assert r.json()["revoked"] == 1
    assert error_of(await whoami(tenant, parent["token"]), 401, "AUTH_REVOKED")["detail"]["reason"] == "token"
    assert error_of(await whoami(tenant, child["token"]), 401, "AUTH_REVOKED")["detail"]["reason"] == "parent_token"
    # The admin's own token is untouched.
    assert (await whoami(tenant, tenant.token)).status_code == 200


async def test_revoked_subject_ends_its_tokens_and_their_children(tenant: Tenant) -> None:
    await grant(tenant, "user:bob", "writer")
    async with tenant.client() as admin:
        bob = await mint(admin, subject="user:bob", roles={tenant.namespace: "writer"}, ttl_seconds=600)
        async with tenant.client(bob["token"]) as bc:
            bobs_child = await mint(bc, roles={tenant.namespace: "viewer"}, ttl_seconds=600)
        assert (await whoami(tenant, bobs_child["token"])).json()["subject"] == "user:bob"
        r = await call(admin, "token.revoke", subject="user:bob")
        assert r.status_code == 200, r.text
    assert error_of(await whoami(tenant, bob["token"]), 401, "AUTH_REVOKED")["detail"]["reason"] == "subject"
    assert error_of(await whoami(tenant, bobs_child["token"]), 401, "AUTH_REVOKED")["detail"]["reason"] == "subject"


async def test_token_minted_right_after_a_subject_revocation_is_valid(tenant: Tenant) -> None:
    """Revoke, then mint at once (the same second, as a re-login does): the new token works,
    the old one does not. Issue times compare in microseconds, not whole seconds."""
    from jose import jwt

    await grant(tenant, "user:dave", "writer")
    async with tenant.client() as admin:
        for _ in range(5):  # until revocation and re-mint fall in one second (almost always the first try)
            old = await mint(admin, subject="user:dave", roles={tenant.namespace: "writer"}, ttl_seconds=600)
            assert (await call(admin, "token.revoke", subject="user:dave")).status_code == 200
            fresh = await mint(admin, subject="user:dave", roles={tenant.namespace: "writer"}, ttl_seconds=600)
            old_iat = jwt.decode(old["token"], TEST_SECRET, algorithms=["HS256"])["iat"]
            if jwt.decode(fresh["token"], TEST_SECRET, algorithms=["HS256"])["iat"] == old_iat:
                break
        assert jwt.decode(fresh["token"], TEST_SECRET, algorithms=["HS256"])["iat"] == old_iat, "no attempt fell within one second"
    assert error_of(await whoami(tenant, old["token"]), 401, "AUTH_REVOKED")["detail"]["reason"] == "subject"
    assert (await whoami(tenant, fresh["token"])).json()["subject"] == "user:dave"


async def test_revoked_subject_ends_a_token_it_delegated_to_another(tenant: Tenant) -> None:
    await grant(tenant, "user:carol", "admin")
    await grant(tenant, "user:dave", "viewer")
    async with tenant.client() as admin:
        carol = await mint(admin, subject="user:carol", roles={tenant.namespace: "admin"}, ttl_seconds=600)
        async with tenant.client(carol["token"]) as cc:
            dave = await mint(cc, subject="user:dave", roles={tenant.namespace: "viewer"}, ttl_seconds=600)
        assert (await whoami(tenant, dave["token"])).status_code == 200
        assert (await call(admin, "token.revoke", subject="user:carol")).status_code == 200
    assert error_of(await whoami(tenant, dave["token"]), 401, "AUTH_REVOKED")["detail"]["reason"] == "parent_subject"


async def test_revoked_session_ends_every_token_of_the_session(tenant: Tenant) -> None:
    async with tenant.client() as admin:
        signed_in = await mint(admin, roles={tenant.namespace: "writer"}, ttl_seconds=600, start_session=True)
        assert signed_in["session_id"].startswith("sid-")
        async with tenant.client(signed_in["token"]) as sc:
            answer = await mint(sc, roles={tenant.namespace: "viewer"}, ttl_seconds=600, ends_with_session=True)
        assert answer["session_id"] == signed_in["session_id"]
        r = await call(admin, "token.revoke", session_id=signed_in["session_id"])
        assert r.status_code == 200, r.text
    assert error_of(await whoami(tenant, signed_in["token"]), 401, "AUTH_REVOKED")["detail"]["reason"] == "session"
    assert error_of(await whoami(tenant, answer["token"]), 401, "AUTH_REVOKED")["detail"]["reason"] == "session"


async def test_a_token_may_revoke_itself_but_not_anothers(tenant: Tenant) -> None:
    async with tenant.client() as admin:
        mine = await mint(admin, roles={tenant.namespace: "viewer"}, ttl_seconds=600)
        other = await mint(admin, roles={tenant.namespace: "viewer"}, ttl_seconds=600)
    await grant(tenant, "user:erin", "viewer")
    async with tenant.client() as admin:
        erin = await mint(admin, subject="user:erin", roles={tenant.namespace: "viewer"}, ttl_seconds=600)
    async with tenant.client(erin["token"]) as ec:
        err = error_of(await call(ec, "token.revoke", token_id=other["token_id"]), 403, "AUTH_INSUFFICIENT")
        assert err["detail"]["reason"] == "org_admin"
        assert (await call(ec, "token.revoke", token_id=erin["token_id"])).status_code == 200
    # Nothing was revoked by the refused call.
    assert (await whoami(tenant, other["token"])).status_code == 200
    assert (await whoami(tenant, mine["token"])).status_code == 200
    error_of(await whoami(tenant, erin["token"]), 401, "AUTH_REVOKED")


async def test_revoke_naming_nothing_is_a_validation_failure(tenant: Tenant) -> None:
    async with tenant.client() as admin:
        err = error_of(await call(admin, "token.revoke"), 422, "VALIDATION_FAILED")
    assert err["detail"]["field"] == "token_id"


# --- role and scope ------------------------------------------------------------------------------


async def test_namespace_the_token_lacks_is_refused(tenant: Tenant) -> None:
    other_ns = unique("ns")
    async with tenant.client() as admin:
        assert (await call(admin, "namespace.create", name=other_ns)).status_code == 200
        narrow = await mint(admin, roles={tenant.namespace: "admin"}, ttl_seconds=600)
    async with tenant.client(narrow["token"]) as c:
        err = error_of(await call(c, "grants.list", namespace=other_ns), 403, "AUTH_INSUFFICIENT")
        assert err["detail"]["reason"] == "namespace"
        assert err["detail"]["namespace"] == other_ns
        error_of(await call(c, "grants.set", namespace=other_ns, subject="user:x", role="viewer"), 403, "AUTH_INSUFFICIENT")
        assert (await call(c, "grants.list")).status_code == 200
    assert "user:x" not in await grants_in(tenant, other_ns)


async def test_viewer_calling_grants_set_is_refused_and_nothing_is_granted(tenant: Tenant) -> None:
    async with tenant.client() as admin:
        viewer = await mint(admin, roles={tenant.namespace: "viewer"}, ttl_seconds=600)
    async with tenant.client(viewer["token"]) as c:
        err = error_of(await call(c, "grants.set", subject="user:mallory", role="admin"), 403, "AUTH_INSUFFICIENT")
    assert err["detail"] == {"reason": "role", "needed": "admin", "role": "viewer", "namespace": tenant.namespace}
    assert "user:mallory" not in await grants_in(tenant)


async def test_namespaced_admin_cannot_create_a_namespace(tenant: Tenant) -> None:
    name = unique("ns")
    async with tenant.client() as admin:
        ns_admin = await mint(admin, roles={tenant.namespace: "admin"}, ttl_seconds=600)
    async with tenant.client(ns_admin["token"]) as c:
        err = error_of(await call(c, "namespace.create", name=name), 403, "AUTH_INSUFFICIENT")
        assert err["detail"]["reason"] == "org_admin"
    async with tenant.client() as admin:
        names = [n["name"] for n in (await call(admin, "namespace.list")).json()["namespaces"]]
    assert name not in names


async def test_lowered_live_grant_wins_over_the_tokens_claim(tenant: Tenant) -> None:
    await grant(tenant, "user:frank", "admin")
    async with tenant.client() as admin:
        frank = await mint(admin, subject="user:frank", roles={tenant.namespace: "admin"}, ttl_seconds=600)
    async with tenant.client(frank["token"]) as fc:
        assert (await call(fc, "grants.set", subject="user:g1", role="viewer")).status_code == 200
        await grant(tenant, "user:frank", "viewer")
        who = await call(fc, "auth.whoami")
        assert who.json()["role"] == "viewer"
        assert who.json()["token_roles"] == [{"namespace": tenant.namespace, "role": "admin"}]
        err = error_of(await call(fc, "grants.set", subject="user:g2", role="viewer"), 403, "AUTH_INSUFFICIENT")
        assert err["detail"]["role"] == "viewer"
        # Still a viewer: reads pass.
        assert (await call(fc, "grants.list")).status_code == 200
    assert "user:g2" not in await grants_in(tenant)
    # Removing the grant entirely leaves no role at all.
    await grant(tenant, "user:frank", "none")
    async with tenant.client(frank["token"]) as fc:
        err = error_of(await call(fc, "grants.list"), 403, "AUTH_INSUFFICIENT")
    assert err["detail"]["role"] == "none"


# --- token.mint ----------------------------------------------------------------------------------


async def test_minted_token_works_and_carries_the_roles_asked(tenant: Tenant) -> None:
    async with tenant.client() as admin:
        t = await mint(admin, roles={tenant.namespace: "viewer"}, ttl_seconds=300, consumer="ci")
    assert t["roles"] == {tenant.namespace: "viewer"}
    assert "token" in t and t["token_id"]
    r = await whoami(tenant, t["token"])
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["role"] == "viewer"
    assert body["token_roles"] == [{"namespace": tenant.namespace, "role": "viewer"}]
    assert body["token_id"] == t["token_id"]
    assert body["consumer"] == "ci"
    assert body["parents"] and body["parents"][-1].startswith("bootstrap-")


async def test_mint_wider_than_the_parent_is_refused(tenant: Tenant) -> None:
    async with tenant.client() as admin:
        viewer = await mint(admin, roles={tenant.namespace: "viewer"}, ttl_seconds=600)
    async with tenant.client(viewer["token"]) as c:
        r = await call(c, "token.mint", roles={tenant.namespace: "writer"}, ttl_seconds=60)
        err = error_of(r, 403, "AUTH_INSUFFICIENT")
        assert err["detail"]["reason"] == "wider_than_parent"
        assert "eyJ" not in r.text  # no token was minted
        err = error_of(await call(c, "token.mint", roles={"*": "viewer"}, ttl_seconds=60), 403, "AUTH_INSUFFICIENT")
        assert err["detail"]["reason"] == "wider_than_parent"


async def test_mint_is_never_longer_lived_than_the_parent(tenant: Tenant, stack: Instance) -> None:
    now = int(time.time())
    short = stack.runtime.codec.encode(principal_for(tenant, exp=now + 120))
    async with tenant.client(short) as c:
        child = await mint(c, roles={tenant.namespace: "viewer"}, ttl_seconds=3600)
    r = await whoami(tenant, child["token"])
    assert r.json()["expires_time"] == time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now + 120))


async def test_mint_past_the_chain_depth_is_refused(tenant: Tenant, stack: Instance) -> None:
    token = tenant.token
    for _ in range(stack.runtime.settings.token_max_chain_depth):
        async with tenant.client(token) as c:
            token = (await mint(c, roles={tenant.namespace: "viewer"}, ttl_seconds=600))["token"]
    async with tenant.client(token) as c:
        err = error_of(await call(c, "token.mint", roles={tenant.namespace: "viewer"}, ttl_seconds=600), 403, "AUTH_INSUFFICIENT")
    assert err["detail"]["reason"] == "chain_too_deep"


async def test_mint_for_another_subject_is_capped_by_its_grant(tenant: Tenant) -> None:
    await grant(tenant, "user:henry", "viewer")
    async with tenant.client() as admin:
        err = error_of(
            await call(admin, "token.mint", subject="user:henry", roles={tenant.namespace: "writer"}, ttl_seconds=60),
            403,
            "AUTH_INSUFFICIENT",
        )
        assert err["detail"]["reason"] == "wider_than_parent"
        ok = await mint(admin, subject="user:henry", roles={tenant.namespace: "viewer"}, ttl_seconds=60)
    assert (await whoami(tenant, ok["token"])).json()["subject"] == "user:henry"


async def test_non_admin_cannot_mint_for_another_subject(tenant: Tenant) -> None:
    await grant(tenant, "user:ivy", "writer")
    await grant(tenant, "user:jack", "viewer")
    async with tenant.client() as admin:
        ivy = await mint(admin, subject="user:ivy", roles={tenant.namespace: "writer"}, ttl_seconds=600)
    async with tenant.client(ivy["token"]) as c:
        r = await call(c, "token.mint", subject="user:jack", roles={tenant.namespace: "viewer"}, ttl_seconds=60)
    assert error_of(r, 403, "AUTH_INSUFFICIENT")["detail"]["reason"] == "role"


async def test_service_account_gets_its_grant_and_a_token(tenant: Tenant) -> None:
    name = unique("bot")
    async with tenant.client() as admin:
        r = await call(admin, "sa.create", name=name, role="writer", description="ci bot")
        assert r.status_code == 200, r.text
        assert r.json()["subject"] == f"sa:{name}" and r.json()["created"] is True
        sa = await mint(admin, subject=f"sa:{name}", roles={tenant.namespace: "writer"}, ttl_seconds=600)
    who = (await whoami(tenant, sa["token"])).json()
    assert who["subject"] == f"sa:{name}"
    assert who["role"] == "writer"
    assert (await grants_in(tenant))[f"sa:{name}"] == "writer"


async def test_namespace_list_shows_only_namespaces_the_caller_holds(tenant: Tenant) -> None:
    hidden = unique("ns")
    async with tenant.client() as admin:
        assert (await call(admin, "namespace.create", name=hidden, description="d")).status_code == 200
        narrow = await mint(admin, roles={tenant.namespace: "viewer"}, ttl_seconds=600)
        everything = [n["name"] for n in (await call(admin, "namespace.list")).json()["namespaces"]]
    assert {tenant.namespace, hidden} <= set(everything)
    async with tenant.client(narrow["token"]) as c:
        seen = [n["name"] for n in (await call(c, "namespace.list")).json()["namespaces"]]
    assert seen == [tenant.namespace]


RFC3339_UTC = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z$")


async def test_every_identity_timestamp_is_rfc3339_utc_with_z(tenant: Tenant) -> None:
    before = datetime.now(UTC) - timedelta(seconds=5)
    seen: list[str] = []
    async with tenant.client() as c:
        created = (await call(c, "namespace.create", name=unique("ns"))).json()["namespace"]["created_time"]
        seen.append(created)
        seen += [n["created_time"] for n in (await call(c, "namespace.list")).json()["namespaces"]]
        seen.append((await call(c, "grants.set", subject="user:stamp", role="viewer")).json()["grant"]["updated_time"])
        seen += [g["updated_time"] for g in (await call(c, "grants.list")).json()["grants"]]
        seen.append((await call(c, "sa.create", name=unique("sa"), role="viewer")).json()["grant"]["updated_time"])
        seen.append((await call(c, "auth.whoami")).json()["expires_time"])
        seen.append((await mint(c, ttl_seconds=60))["expires_time"])
    assert len(seen) >= 7
    for stamp in seen:
        assert RFC3339_UTC.match(stamp), stamp
    # The namespace just created is stamped now, in UTC.
    assert before <= datetime.fromisoformat(created.replace("Z", "+00:00")) <= datetime.now(UTC) + timedelta(seconds=5)


async def test_bootstrap_again_keeps_the_orgs_namespaces_and_adds_one_it_lacks(tenant: Tenant, stack: Instance) -> None:
    identity, codec = stack.runtime.identity, stack.runtime.codec
    first = await identity.get_namespace(tenant.org, tenant.namespace)
    assert first is not None
    token, _ = await bootstrap_org(identity, codec, tenant.org, tenant.namespace, 600)
    assert await identity.get_namespace(tenant.org, tenant.namespace) == first  # not written again
    other = unique("ns")
    await bootstrap_org(identity, codec, tenant.org, other, 600)
    assert [n["name"] for n in await identity.list_namespaces(tenant.org)] == sorted([tenant.namespace, other])
    async with tenant.client(token) as c:
        assert (await call(c, "auth.whoami")).status_code == 200

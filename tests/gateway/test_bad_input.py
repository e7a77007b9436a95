"""Bad input never gets a 5xx or a traceback: deep JSON, oversize headers, wrong methods,
unknown paths, explicit zeros and blanks, malformed ids; and every timestamp a door prints is
RFC 3339 UTC with a Z."""

from __future__ import annotations

import logging
import re

import httpx
import pytest

from tests.conftest import Tenant, call

DEEP = 100_000
RFC3339_Z = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$")


def error_of(r: httpx.Response, status: int, code: str) -> dict[str, object]:
    assert r.status_code == status, r.text[:500]
    body = r.json()
    assert set(body) == {"error"}
    err = body["error"]
    assert err["code"] == code and err["message"], err
    return dict(err)


@pytest.mark.parametrize("with_token", [True, False])
async def test_json_nested_100000_levels_is_a_422_without_a_traceback(
    tenant: Tenant, with_token: bool, caplog: pytest.LogCaptureFixture
) -> None:
    body = ("[" * DEEP + "]" * DEEP).encode()
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {tenant.token}"} if with_token else {})}
    with caplog.at_level(logging.DEBUG):
        async with httpx.AsyncClient(base_url=tenant.base_url, timeout=30) as c:
            r = await c.post("/v1/auth.whoami", content=body, headers=headers)
            nested_object = await c.post("/v1/namespace.create", content=('{"a":' * DEEP + "1" + "}" * DEEP).encode(), headers=headers)
    for response in (r, nested_object):
        err = error_of(response, 422, "VALIDATION_FAILED")
        assert err["retryable"] is False
    assert not [rec for rec in caplog.records if rec.exc_info or "Traceback" in rec.getMessage()]


async def test_a_deep_but_parsable_body_is_refused_as_arguments_not_a_5xx(tenant: Tenant) -> None:
    deep_value = "[" * 900 + "]" * 900
    async with tenant.client() as c:
        r = await c.post("/v1/task.complete", content=f'{{"task_id":"abcdefgh1234","fence":1,"outcome":{{"x":{deep_value}}}}}'.encode())
    assert r.status_code < 500, r.text[:300]


@pytest.mark.parametrize("header", ["Authorization", "X-Loom-Agent", "X-Loom-Run-Id", "X-Loom-Namespace"])
async def test_an_oversize_header_is_a_non_retryable_4xx(tenant: Tenant, header: str) -> None:
    value = "x" * 20_000
    headers = {"Authorization": f"Bearer {tenant.token}", header: ("Bearer " + value) if header == "Authorization" else value}
    async with httpx.AsyncClient(base_url=tenant.base_url, timeout=30) as c:
        r = await c.post("/v1/auth.whoami", json={}, headers=headers)
    assert 400 <= r.status_code < 500, r.text[:300]
    assert r.json()["error"]["retryable"] is False


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "PATCH"])
async def test_non_post_on_an_op_is_405_allow_post(tenant: Tenant, method: str) -> None:
    async with tenant.client() as c:
        r = await c.request(method, "/v1/auth.whoami")
    error_of(r, 405, "VALIDATION_FAILED")
    assert r.headers["allow"] == "POST"


@pytest.mark.parametrize("path", ["/nope", "/v1", "/v1/ops/extra", "/v2/auth.whoami", "/.env"])
async def test_unknown_path_is_404_in_looms_error_body(tenant: Tenant, path: str) -> None:
    async with tenant.client() as c:
        r = await c.get(path)
    error_of(r, 404, "RESOURCE_NOT_FOUND")


@pytest.mark.parametrize("body", [b" ", b"\n\t ", b"0", b"null", b"[]", b'"x"'])
async def test_a_whitespace_or_non_object_body_is_refused_not_taken_for_no_arguments(tenant: Tenant, body: bytes) -> None:
    async with tenant.client() as c:
        r = await c.post("/v1/auth.whoami", content=body, headers={"Content-Type": "application/json"})
    err = error_of(r, 422, "VALIDATION_FAILED")
    assert err["detail"]["field"] == "(body)"  # type: ignore[index]


async def test_no_body_at_all_means_no_arguments(tenant: Tenant) -> None:
    async with tenant.client() as c:
        r = await c.post("/v1/auth.whoami")
    assert r.status_code == 200 and r.json()["org"] == tenant.org


async def test_unknown_op_is_404_unknown_op(tenant: Tenant) -> None:
    async with tenant.client() as c:
        error_of(await call(c, "nope.nothing"), 404, "UNKNOWN_OP")


@pytest.mark.parametrize(
    ("op", "args", "field"),
    [
        ("token.mint", {"ttl_seconds": 0}, "ttl_seconds"),
        ("task.create", {"inbox": "box", "kind": "chore", "priority": 0}, "priority"),
        ("task.pull", {"inbox": "box", "max_tasks": 0}, "max_tasks"),
        ("task.list", {"limit": 0}, "limit"),
        ("namespace.create", {"name": "   "}, "name"),
        ("task.wont_do", {"task_id": "abcdefgh1234", "reason": "   \t "}, "reason"),
        ("grants.set", {"subject": "user:x", "role": " "}, "role"),
    ],
)
async def test_an_explicit_zero_or_blank_is_refused_never_defaulted(tenant: Tenant, op: str, args: dict[str, object], field: str) -> None:
    async with tenant.client() as c:
        err = error_of(await call(c, op, **args), 422, "VALIDATION_FAILED")
    assert err["detail"]["field"] == field  # type: ignore[index]


@pytest.mark.parametrize(
    ("op", "args", "field"),
    [("task.get", {"task_id": "NOT/AN/ID"}, "task_id"), ("grants.set", {"subject": "bob", "role": "viewer"}, "subject")],
)
async def test_a_malformed_id_says_malformed(tenant: Tenant, op: str, args: dict[str, object], field: str) -> None:
    async with tenant.client() as c:
        err = error_of(await call(c, op, **args), 422, "VALIDATION_FAILED")
    assert "malformed" in str(err["message"])
    assert err["detail"] == {"field": field, "reason": "malformed", "pattern": err["detail"]["pattern"]}  # type: ignore[index]


async def test_every_timestamp_on_the_rest_door_is_rfc3339_utc_z(tenant: Tenant) -> None:
    async with tenant.client() as c:
        ns = (await call(c, "namespace.create", name="stamped")).json()
        grants = (await call(c, "grants.list")).json()
        minted = (await call(c, "token.mint", ttl_seconds=60)).json()
        await call(c, "inbox.register", inbox="stamps")
        inboxes = (await call(c, "inbox.list")).json()
        created = (await call(c, "task.create", inbox="stamps", kind="chore", title="t")).json()
    stamps = [ns["namespace"]["created_time"], minted["expires_time"], *(g["updated_time"] for g in grants["grants"])]
    stamps += [inboxes["inboxes"][0]["created_time"], created["task"]["created_time"], created["task"]["updated_time"]]
    for stamp in stamps:
        assert RFC3339_Z.match(stamp), stamp

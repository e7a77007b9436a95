"""Bad input never gets a 5xx or a traceback: deep JSON, oversize headers, wrong methods,
unknown paths, explicit zeros and blanks, malformed ids; and every timestamp a door prints is
RFC 3339 UTC with a Z."""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import AsyncIterator

import httpx
import pytest
from loom_core.json_limits import MAX_JSON_DEPTH
from loom_gateway.limits import MAX_BODY_BYTES
from loom_runner.embedded import Instance

from tests.conftest import Tenant, call, ledger_rows

DEEP = 100_000
RFC3339_Z = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$")


def error_of(r: httpx.Response, status: int, code: str) -> dict[str, object]:
    assert r.status_code == status, r.text[:500]
    body = r.json()
    if "jsonrpc" in body:  # /mcp: a JSON-RPC error object, Loom's error in `data`
        assert set(body) == {"jsonrpc", "id", "error"} and body["error"]["message"] == body["error"]["data"]["message"]
        body = {"error": body["error"]["data"]}
    assert set(body) == {"error"}
    err = body["error"]
    assert err["code"] == code and err["message"], err
    return dict(err)


@pytest.mark.parametrize("with_token", [True, False])
async def test_json_nested_100000_levels_is_a_400_too_deep_without_a_traceback(
    tenant: Tenant, with_token: bool, caplog: pytest.LogCaptureFixture
) -> None:
    body = ("[" * DEEP + "]" * DEEP).encode()
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {tenant.token}"} if with_token else {})}
    with caplog.at_level(logging.DEBUG):
        async with httpx.AsyncClient(base_url=tenant.base_url, timeout=30) as c:
            r = await c.post("/v1/auth.whoami", content=body, headers=headers)
            nested_object = await c.post("/v1/namespace.create", content=('{"a":' * DEEP + "1" + "}" * DEEP).encode(), headers=headers)
    for response in (r, nested_object):
        err = error_of(response, 400, "REQUEST_TOO_DEEP")
        assert err["retryable"] is False and err["detail"]["max_depth"] == MAX_JSON_DEPTH  # type: ignore[index]
    assert not [rec for rec in caplog.records if rec.exc_info or "Traceback" in rec.getMessage()]


def brief_nested(levels: int) -> bytes:
    return ('{"inbox":"deep-box","kind":"chore","title":"t","brief":' + '{"a":' * levels + "1" + "}" * levels + "}").encode()


async def test_a_brief_nested_past_the_limit_is_refused_and_nothing_is_written(tenant: Tenant, stack: Instance) -> None:
    """Before the limit, a brief nested ~40 deep answered a retryable 500 yet stored the task,
    and every later task.list of its inbox answered 500."""
    async with tenant.client() as c:
        await call(c, "inbox.register", inbox="deep-box")
        accepted = await c.post("/v1/task.create", content=brief_nested(MAX_JSON_DEPTH - 1))
        assert accepted.status_code == 200, accepted.text[:300]
        for levels in (MAX_JSON_DEPTH, 40, 55):
            run = f"run-{uuid.uuid4().hex}"
            r = await c.post("/v1/task.create", content=brief_nested(levels), headers={"X-Loom-Run-Id": run})
            err = error_of(r, 400, "REQUEST_TOO_DEEP")
            assert err["retryable"] is False
            rows = await ledger_rows(stack, run)
            assert [(row["op"], row["ok"], row["error_code"], row["org"]) for row in rows] == [
                ("task.create", False, "REQUEST_TOO_DEEP", tenant.org)
            ]
        listed = await call(c, "task.list", inbox="deep-box")
    assert listed.status_code == 200, listed.text[:300]
    assert [t["task_id"] for t in listed.json()["tasks"]] == [accepted.json()["task"]["task_id"]]


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e400", "-1e400"])
@pytest.mark.parametrize("where", ["top", "brief", "list"])
async def test_a_number_json_cannot_carry_is_a_422_not_retryable_with_a_ledger_row(
    tenant: Tenant, stack: Instance, number: str, where: str
) -> None:
    bodies = {
        "top": f'{{"inbox":"n-box","kind":"chore","title":"t","priority":{number}}}',
        "brief": f'{{"inbox":"n-box","kind":"chore","title":"t","brief":{{"x":{{"y":{number}}}}}}}',
        "list": f'{{"inbox":"n-box","kind":"chore","title":"t","brief":{{"xs":[1,2,{number}]}}}}',
    }
    run = f"run-{uuid.uuid4().hex}"
    async with tenant.client(**{"X-Loom-Run-Id": run}) as c:
        await call(c, "inbox.register", inbox="n-box")
        r = await c.post("/v1/task.create", content=bodies[where].encode(), headers={"Content-Type": "application/json"})
        err = error_of(r, 422, "VALIDATION_FAILED")
        assert err["retryable"] is False and number in str(err["message"])
        assert (await call(c, "task.list", inbox="n-box")).json()["tasks"] == []
    rows = await ledger_rows(stack, run, expect=3)
    assert [(row["op"], row["ok"], row["error_code"]) for row in rows if row["op"] == "task.create"] == [
        ("task.create", False, "VALIDATION_FAILED")
    ]


@pytest.mark.parametrize(("escape", "what"), [("\\u0000", "NUL"), ("\\ud800", "surrogate"), ("\\udc00x", "surrogate")])
@pytest.mark.parametrize("where", ["title", "brief"])
async def test_a_nul_or_a_lone_surrogate_in_a_string_is_a_422_naming_the_field(tenant: Tenant, escape: str, what: str, where: str) -> None:
    value = f'"a{escape}b"'
    body = (
        f'{{"inbox":"s-box","kind":"chore","title":{value}}}'
        if where == "title"
        else f'{{"inbox":"s-box","kind":"chore","title":"t","brief":{{"k":[{value}]}}}}'
    )
    async with tenant.client() as c:
        await call(c, "inbox.register", inbox="s-box")
        r = await c.post("/v1/task.create", content=body.encode(), headers={"Content-Type": "application/json"})
        err = error_of(r, 422, "VALIDATION_FAILED")
        assert what in str(err["message"])
        assert err["detail"]["field"] == ("title" if where == "title" else "brief.k[0]")  # type: ignore[index]
        assert (await call(c, "task.list", inbox="s-box")).json()["tasks"] == []


async def test_a_body_over_the_limit_is_a_413_naming_the_limit(tenant: Tenant) -> None:
    huge = b'{"name":"big","description":"' + b"x" * (MAX_BODY_BYTES + 10) + b'"}'
    async with tenant.client() as c:
        declared = await c.post("/v1/namespace.create", content=huge, headers={"Content-Type": "application/json"})

        async def chunks() -> AsyncIterator[bytes]:  # no content-length: refused while it streams
            for i in range(0, len(huge), 1 << 20):
                yield huge[i : i + (1 << 20)]

        streamed = await c.post("/v1/namespace.create", content=chunks(), headers={"Content-Type": "application/json"})
    for r in (declared, streamed):
        err = error_of(r, 413, "REQUEST_TOO_LARGE")
        assert str(MAX_BODY_BYTES) in str(err["message"]) and err["detail"]["max_bytes"] == MAX_BODY_BYTES  # type: ignore[index]
        assert err["retryable"] is False


@pytest.mark.parametrize("path", ["/v1/auth.whoami", "/mcp", "/v1/assistant/chat/completions"])
@pytest.mark.parametrize("content_type", ["application/x-www-form-urlencoded", "text/plain", "multipart/form-data; boundary=x"])
async def test_a_body_that_is_not_json_by_its_content_type_is_a_415_on_every_route(tenant: Tenant, path: str, content_type: str) -> None:
    async with tenant.client() as c:
        r = await c.post(path, content=b"{}", headers={"Content-Type": content_type})
    err = error_of(r, 415, "UNSUPPORTED_MEDIA_TYPE")
    assert err["retryable"] is False


@pytest.mark.parametrize("content_type", ["application/json", "application/json; charset=utf-8", "application/merge-patch+json"])
async def test_json_content_types_are_accepted(tenant: Tenant, content_type: str) -> None:
    async with tenant.client() as c:
        r = await c.post("/v1/auth.whoami", content=b"{}", headers={"Content-Type": content_type})
    assert r.status_code == 200, r.text[:300]


@pytest.mark.parametrize("path", ["/mcp", "/v1/assistant/chat/completions"])
async def test_the_other_json_routes_meet_the_same_limits(tenant: Tenant, path: str) -> None:
    async with tenant.client() as c:
        deep = await c.post(path, content=("[" * 100 + "]" * 100).encode(), headers={"Content-Type": "application/json"})
        nan = await c.post(
            path, content=b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":NaN}}', headers={"Content-Type": "application/json"}
        )
    error_of(deep, 400, "REQUEST_TOO_DEEP")
    error_of(nan, 422, "VALIDATION_FAILED")


async def test_an_invalid_value_is_quoted_back_at_most_200_characters(tenant: Tenant) -> None:
    async with tenant.client() as c:
        long_title = await call(c, "task.create", inbox="q-box", kind="chore", title="x" * 5_000_000)
        long_key = await call(c, "task.create", inbox="q-box", kind="chore", title="t", **{"y" * 100_000: 1})
    for r in (long_title, long_key):
        err = error_of(r, 422, "VALIDATION_FAILED")
        assert len(r.content) < 1000, r.text[:300]
        assert "more characters" in str(err["message"])


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


def _condition_tree(depth: int, wrong: dict[str, object]) -> dict[str, object]:
    """any(valid subtree, not(all(valid leaf, ...))) nested `depth` times, `wrong` at the bottom."""
    leaf = {"op": "formerly", "within": "1h", "operation": "memory.get"}
    node: dict[str, object] = wrong
    for _ in range(depth):
        node = {"op": "any", "of": [leaf, {"op": "not", "of": {"op": "all", "of": [leaf, node]}}]}
    return node


@pytest.mark.parametrize(
    ("wrong", "field", "reason"),
    [
        ({"op": "count_within", "within": "1h", "cmp": "gt", "value": -1}, "value", "-1 is less than the minimum of 0"),
        ({"op": "formerly", "within": "1 hour"}, "within", "malformed"),
        ({"op": "formerly", "within": "1h", "zzz": 1}, "zzz", "unknown field"),
        ({"op": "sometimes", "within": "1h"}, "op", "unknown kind"),
        ({"within": "1h"}, "op", "required"),
    ],
)
async def test_a_wrong_node_deep_in_a_condition_is_a_422_naming_its_field(
    tenant: Tenant, wrong: dict[str, object], field: str, reason: str
) -> None:
    """The union over node kinds is judged on the node's kind (tests/core/test_fast_validation.py
    checks the refusal equals plain jsonschema's); the caller gets the node's own field."""
    depth = 3
    async with tenant.client() as c:
        r = await call(c, "policy.set", name="deep-wrong", effect="forbid", actions=["memory.put"], condition=_condition_tree(depth, wrong))
    detail = error_of(r, 422, "VALIDATION_FAILED")["detail"]
    assert isinstance(detail, dict), detail
    assert (detail["field"], detail["reason"]) == ("condition" + ".of[1].of.of[1]" * depth + f".{field}", reason), detail

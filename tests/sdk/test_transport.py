"""What the SDK sends and how it reads answers the live stack cannot be made to give (a proxy's
page, a 429, a task conflict), through httpx's MockTransport seam."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import httpx
import pytest
from loom import (
    Agent,
    ConflictError,
    FenceStaleError,
    ForbiddenError,
    LoomError,
    PolicyClient,
    PolicyForbiddenError,
    RateLimitedError,
    TasksClient,
    TaskTerminalError,
    UnavailableError,
)

Handler = Callable[[httpx.Request], httpx.Response]


def _agent(handler: Handler, **kwargs: Any) -> Agent:
    base: dict[str, Any] = {"org": "acme", "namespace": "private", "agent": "bot", "api_key": "secret-key", "base_url": "http://loom.test"}
    base.update(kwargs)
    return Agent(**base, transport=httpx.MockTransport(handler))


def _refusal(status: int, code: str, detail: dict[str, Any] | None = None, headers: dict[str, str] | None = None) -> Handler:
    body: dict[str, Any] = {"code": code, "message": f"refused: {code}", "retryable": status in (429, 503)}
    if detail:
        body["detail"] = detail
    return lambda _req: httpx.Response(status, json={"error": body}, headers=headers)


async def test_call_posts_the_given_arguments_with_the_agents_headers() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"ok": True})

    async with _agent(handler, user="ada", session="s-1", run_id="run-9") as a:
        assert await a.ops.token.mint(roles={"private": "viewer"}, ttl_seconds=60) == {"ok": True}
    (req,) = seen
    assert req.method == "POST"
    assert str(req.url) == "http://loom.test/v1/token.mint"
    # Only the arguments given: the op's other parameters (None) are left out.
    assert json.loads(req.content) == {"roles": {"private": "viewer"}, "ttl_seconds": 60}
    h = req.headers
    assert h["authorization"] == "Bearer secret-key"
    assert (h["x-loom-org"], h["x-loom-namespace"], h["x-loom-agent"]) == ("acme", "private", "bot")
    assert (h["x-loom-user"], h["x-loom-session"], h["x-loom-run-id"]) == ("ada", "s-1", "run-9")
    assert h["x-loom-client"] == "sdk"
    assert h["content-type"] == "application/json"


async def test_unset_labels_send_no_header() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={})

    async with _agent(handler) as a:
        await a.ops.auth.whoami()
    assert json.loads(seen[0].content) == {}
    assert not {"x-loom-user", "x-loom-session", "x-loom-run-id"} & set(seen[0].headers)


@pytest.mark.parametrize(
    ("code", "cls", "family"),
    [
        ("TASK_FENCE_STALE", FenceStaleError, ConflictError),
        ("TASK_TERMINAL", TaskTerminalError, ConflictError),
        ("PRECONDITION_FAILED", ConflictError, ConflictError),
    ],
)
async def test_conflict_codes_raise_their_own_class(code: str, cls: type[LoomError], family: type[LoomError]) -> None:
    async with _agent(_refusal(409, code, {"task_id": "t-1"})) as a:
        with pytest.raises(family) as info:
            await a.call("task.complete", task_id="t-1", fence=3)
    assert type(info.value) is cls
    assert info.value.code == code
    assert info.value.detail == {"task_id": "t-1"}
    assert info.value.op == "task.complete"


async def test_policy_forbidden_keeps_the_deciding_rules_in_detail() -> None:
    detail = {"rules": [{"name": "read-before-delete"}]}
    async with _agent(_refusal(403, "POLICY_FORBIDDEN", detail)) as a:
        with pytest.raises(ForbiddenError) as info:
            await a.call("memory.delete", memory_key="notes/old")
    assert isinstance(info.value, PolicyForbiddenError)
    assert info.value.detail == detail


async def test_unknown_code_falls_back_to_its_status_family() -> None:
    async with _agent(_refusal(403, "SOMETHING_NEW")) as a:
        with pytest.raises(ForbiddenError) as info:
            await a.call("x.y")
    assert type(info.value) is ForbiddenError
    assert info.value.code == "SOMETHING_NEW"


async def test_rate_limited_reads_retry_after_from_the_header() -> None:
    async with _agent(_refusal(429, "RATE_LIMITED", headers={"Retry-After": "3"})) as a:
        with pytest.raises(RateLimitedError) as info:
            await a.ops.auth.whoami()
    assert info.value.retry_after == 3.0
    assert info.value.retryable is True


async def test_a_proxy_page_becomes_unavailable_without_its_text() -> None:
    page = "<html>upstream secret stack trace</html>"
    async with _agent(lambda _r: httpx.Response(502, text=page)) as a:
        with pytest.raises(UnavailableError) as info:
            await a.ops.auth.whoami()
    assert info.value.code == "BACKEND_UNAVAILABLE"
    assert info.value.status == 502
    assert "secret" not in str(info.value)


async def test_a_non_object_answer_is_a_loom_error() -> None:
    async with _agent(lambda _r: httpx.Response(200, json=[1, 2])) as a:
        with pytest.raises(LoomError) as info:
            await a.ops.auth.whoami()
    assert info.value.code == "INTERNAL"


async def test_timeout_becomes_retryable_unavailable() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    async with _agent(handler) as a:
        with pytest.raises(UnavailableError) as info:
            await a.ops.auth.whoami()
    assert info.value.detail["reason"] == "timeout"
    assert info.value.retryable is True


async def test_repr_and_errors_never_show_the_api_key() -> None:
    async with _agent(_refusal(401, "AUTH_INVALID")) as a:
        assert "secret-key" not in repr(a)
        with pytest.raises(LoomError) as info:
            await a.ops.auth.whoami()
    assert "secret-key" not in repr(info.value) + str(info.value)


async def test_plane_helpers_are_built_on_the_agent() -> None:
    seen: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        return httpx.Response(200, json={"rules": []})

    async with _agent(answer) as a:
        assert isinstance(a.tasks, TasksClient)
        assert isinstance(a.policy, PolicyClient)
        await a.tasks.get("t-1")
        await a.policy.list()
    assert seen == ["/v1/task.get", "/v1/policy.list"]  # through the agent's one transport


async def test_the_spec_helpers_send_their_positional_arguments_and_datetimes_as_rfc3339() -> None:
    bodies: list[tuple[str, dict[str, Any]]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        bodies.append((request.url.path, json.loads(request.content)))
        return httpx.Response(200, json={"precedents": [{"memory_key": "k"}], "results": []})

    naive = datetime(2026, 1, 2, 3, 4, 5)  # taken as UTC
    aware = datetime(2026, 1, 2, 5, 4, 5, tzinfo=timezone(timedelta(hours=2)))
    async with _agent(answer) as a:
        await a.tasks.create("private-bot", kind="chore", deadline=naive)
        await a.tasks.create_many([{"inbox": "private-bot", "kind": "chore", "not_before": aware}])
        await a.decision.outcome("decision/k", "it held", success=True)
        assert await a.decision.precedents("where?") == [{"memory_key": "k"}]  # the answer's one list
    assert bodies == [
        ("/v1/task.create", {"inbox": "private-bot", "kind": "chore", "deadline": "2026-01-02T03:04:05Z"}),
        ("/v1/task.create_many", {"tasks": [{"inbox": "private-bot", "kind": "chore", "not_before": "2026-01-02T03:04:05Z"}]}),
        ("/v1/decision.outcome", {"memory_key": "decision/k", "realized_outcome": "it held", "success": True}),
        ("/v1/decision.precedents", {"query": "where?"}),
    ]


async def test_exiting_the_context_closes_the_connections() -> None:
    a = _agent(lambda _r: httpx.Response(200, json={}))
    async with a:
        pass
    assert a._transport.closed

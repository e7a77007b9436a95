"""Retry flags are honest: a refusal the same call cannot get past later says `retryable: false`
on every door, though its code (PRECONDITION_FAILED) is retryable when it means contention."""

from __future__ import annotations

from typing import Any

import pytest
from loom_core.errors import LoomError
from loom_runner.embedded import Instance

from tests.conftest import Tenant, call
from tests.gateway.test_transports import relays


async def refusals(tenant: Tenant) -> dict[str, dict[str, Any]]:
    async with tenant.client() as c:
        await call(c, "inbox.register", inbox="retry-box")
        task = (await call(c, "task.create", inbox="retry-box", kind="chore", title="t")).json()["task"]
        stale = await call(c, "task.update", task_id=task["task_id"], if_match_version=task["version"] + 5, title="u")
        reopen_todo = await call(c, "task.reopen", task_id=task["task_id"], reason="r")
        assert (await call(c, "task.claim", task_id=task["task_id"])).status_code == 200
        claim_again = await call(c, "task.claim", task_id=task["task_id"])
    return {"stale version": stale.json(), "reopen a todo task": reopen_todo.json(), "claim a claimed task": claim_again.json()}


async def test_a_refusal_no_retry_can_fix_is_not_retryable_on_rest(tenant: Tenant) -> None:
    for what, body in (await refusals(tenant)).items():
        assert body["error"]["code"] == "PRECONDITION_FAILED", (what, body)
        assert body["error"]["retryable"] is False, (what, body)


@pytest.mark.parametrize("relay_transport", ["inproc", "grpc"])
async def test_the_flag_crosses_both_relay_transports(stack: Instance, tenant: Tenant, relay_transport: str) -> None:
    headers = {"authorization": f"Bearer {tenant.token}", "x-loom-namespace": tenant.namespace}
    relay = relays(stack)[relay_transport]
    try:
        await relay.call("inbox.register", {"inbox": "retry-box2"}, headers, "rest")
        created = await relay.call("task.create", {"inbox": "retry-box2", "kind": "chore", "title": "t"}, headers, "rest")
        with pytest.raises(LoomError) as caught:
            await relay.call("task.reopen", {"task_id": created["task"]["task_id"], "reason": "r"}, headers, "rest")
    finally:
        await relay.close()
    assert caught.value.code == "PRECONDITION_FAILED" and caught.value.retryable is False
    assert caught.value.to_payload()["retryable"] is False


def test_a_payload_round_trip_keeps_the_flag() -> None:
    err = LoomError.from_payload({"code": "PRECONDITION_FAILED", "message": "m", "retryable": False})
    assert err.retryable is False and LoomError.from_payload({"code": "PRECONDITION_FAILED", "message": "m"}).retryable is True

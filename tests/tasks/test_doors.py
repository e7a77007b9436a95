"""The claim path through the other doors: gRPC straight to the tasks plane, and MCP (the
official `mcp` client against /mcp), with the same rules and refusals as REST."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import grpc
import httpx2
import mcp_types as types
from loom_api.tasks.v1 import tasks_pb2 as pb
from loom_api.tasks.v1 import tasks_pb2_grpc
from loom_core.grpc_errors import from_rpc_error
from loom_gateway.mcp import tool_name
from loom_runner.embedded import Instance
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.tasks.conftest import Org, register

TASKS_TOOLSET = {
    "task.pull", "task.create", "task.complete", "task.fail", "task.wont_do", "task.defer", "task.heartbeat",
    "task.updates", "task.list", "task.get", "inbox.list", "task.create_many", "task.complete_many",
}  # fmt: skip


def metadata(token: str, namespace: str, agent: str) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {token}"), ("x-loom-namespace", namespace), ("x-loom-agent", agent)]


async def test_claim_path_over_grpc_straight_to_the_plane(org: Org, tasks_a: Instance) -> None:
    admin = await org.admin()
    await register(admin)
    await org.owner()  # grants sa:private-bot writer on the owner namespace
    md = metadata(org.token("sa:private-bot", {org.private: "writer"}, org.private), org.private, "private-bot")
    async with grpc.aio.insecure_channel(tasks_a.grpc_address("tasks")) as channel:
        stub = tasks_pb2_grpc.TaskServiceStub(channel)
        brief = pb.CreateTaskRequest(inbox="private-bot", kind="chore", title="over grpc")
        brief.brief.update({"n": 1})
        created = await stub.CreateTask(brief, metadata=md)
        assert created.created and created.task.status == "todo"
        pulled = await stub.PullTasks(pb.PullTasksRequest(inbox="private-bot", wait_seconds=5), metadata=md)
        (task,) = pulled.tasks
        assert task.task_id == created.task.task_id and task.fence > 0 and task.status == "in_progress"
        hb = await stub.HeartbeatTask(pb.HeartbeatTaskRequest(task_id=task.task_id, fence=task.fence, lease_seconds=120), metadata=md)
        assert hb.fence == task.fence
        try:
            await stub.CompleteTask(pb.CompleteTaskRequest(task_id=task.task_id, fence=task.fence + 1), metadata=md)
            raise AssertionError("a stale fence was accepted")
        except grpc.aio.AioRpcError as exc:
            assert exc.code() == grpc.StatusCode.FAILED_PRECONDITION
            assert from_rpc_error(exc).code == "TASK_FENCE_STALE"
        done = pb.CompleteTaskRequest(task_id=task.task_id, fence=task.fence)
        done.outcome.update({"via": "grpc"})
        out = await stub.CompleteTask(done, metadata=md)
        assert out.task.status == "done"
        try:
            await stub.CompleteTask(done, metadata=md)
            raise AssertionError("a finished task was completed twice")
        except grpc.aio.AioRpcError as exc:
            assert from_rpc_error(exc).code == "TASK_TERMINAL"
        # The chain authenticates gRPC like any door.
        try:
            await stub.PullTasks(pb.PullTasksRequest(inbox="private-bot"))
            raise AssertionError("an anonymous pull was served")
        except grpc.aio.AioRpcError as exc:
            assert from_rpc_error(exc).code == "AUTH_REQUIRED"


@asynccontextmanager
async def mcp_session(url: str, **headers: str) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http), mode="legacy") as client,
    ):
        yield client


def body(result: types.CallToolResult) -> dict[str, Any]:
    assert isinstance(result.structured_content, dict)
    return dict(result.structured_content)


async def test_tasks_toolset_lists_exactly_the_working_ops(org: Org, tasks_a: Instance) -> None:
    token = org.token("sa:private-bot", {org.private: "writer"}, org.private)  # MCP answers 401 without one
    async with mcp_session(tasks_a.base_url + "/mcp?toolset=tasks", Authorization=f"Bearer {token}") as client:
        names = {t.name for t in (await client.list_tools()).tools}
    assert names == {tool_name(op) for op in TASKS_TOOLSET}  # MCP names tools loom_<group>_<op>


async def test_claim_path_over_mcp(org: Org, tasks_a: Instance) -> None:
    admin = await org.admin()
    await register(admin)
    await org.owner()
    token = org.token("sa:private-bot", {org.private: "writer"}, org.private)
    headers = {"Authorization": f"Bearer {token}", "X-Loom-Namespace": org.private, "X-Loom-Agent": "private-bot"}
    async with mcp_session(tasks_a.base_url + "/mcp?toolset=tasks", **headers) as client:
        created = body(await client.call_tool("task.create", {"inbox": "private-bot", "kind": "chore", "title": "over mcp"}))
        pulled = body(await client.call_tool("task.pull", {"inbox": "private-bot", "wait_seconds": 5}))
        (task,) = pulled["tasks"]
        assert task["task_id"] == created["task"]["task_id"] and task["fence"] > 0
        assert not (await client.call_tool("task.heartbeat", {"task_id": task["task_id"], "fence": task["fence"]})).is_error
        stale = await client.call_tool("task.complete", {"task_id": task["task_id"], "fence": task["fence"] + 7})
        assert stale.is_error
        assert body(stale)["error"]["code"] == "TASK_FENCE_STALE"
        done = body(
            await client.call_tool("task.complete", {"task_id": task["task_id"], "fence": task["fence"], "outcome": {"via": "mcp"}})
        )
        assert done["task"]["status"] == "done" and done["task"]["outcome"] == {"via": "mcp"}
        again = await client.call_tool("task.complete", {"task_id": task["task_id"], "fence": task["fence"]})
        assert again.is_error and body(again)["error"]["code"] == "TASK_TERMINAL"
        text = [json.loads(c.text) for c in again.content if isinstance(c, types.TextContent)]
        assert text == [body(again)]

"""task.watch and GET /v1/task/watch: one task's or one inbox's events, as an op (long poll) and
as server-sent events over real HTTP on loopback (httpx streaming): resume by Last-Event-ID,
heartbeats, refusals (role, org, a revoked token) and a client that goes away."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import grpc
import httpx
from loom import Agent
from loom_api.tasks.v1 import tasks_pb2 as pb
from loom_api.tasks.v1 import tasks_pb2_grpc
from loom_core.grpc_errors import from_rpc_error
from loom_gateway.mcp import tool_name
from loom_runner.embedded import Instance

from tests.tasks.conftest import Api, Org, eventually, register, tasks_plane
from tests.tasks.test_doors import body, mcp_session


@dataclass
class Frame:
    id: str = ""
    event: str = ""
    data: str = ""
    comments: list[str] = field(default_factory=list)

    def body(self) -> dict[str, Any]:
        return dict(json.loads(self.data))


async def frames(r: httpx.Response) -> AsyncIterator[Frame]:
    """The server-sent events of a streaming response, one frame per blank line."""
    f = Frame()
    async for line in r.aiter_lines():
        if line == "":
            if f.data or f.comments or f.event:
                yield f
            f = Frame()
        elif line.startswith(":"):
            f.comments.append(line[1:].strip())
        else:
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "data":
                f.data = f"{f.data}\n{value}" if f.data else value
            elif name in ("id", "event"):
                setattr(f, name, value)


async def next_events(it: AsyncIterator[Frame], n: int) -> list[Frame]:
    out: list[Frame] = []
    while len(out) < n:
        f = await asyncio.wait_for(it.__anext__(), 30)
        if f.data and not f.event:
            out.append(f)
    return out


def watch_client(org: Org, token: str, namespace: str, **headers: str) -> httpx.AsyncClient:
    client = httpx.AsyncClient(
        base_url=org.inst.base_url,
        headers={"Authorization": f"Bearer {token}", "X-Loom-Namespace": namespace, **headers},
        timeout=httpx.Timeout(60, read=60),
    )
    org.clients.append(client)
    return client


async def setup(org: Org) -> tuple[Api, Api, Api]:
    admin = await org.admin()
    await register(admin, posters=["sa:public-bot"])
    await admin("inbox.policy_set", inbox="private-bot", poster="sa:public-bot", kind="*", mode="auto")
    return admin, await org.owner(), await org.outsider()


async def test_watch_op_reads_one_tasks_events_after_a_cursor(org: Org) -> None:
    _, owner, public = await setup(org)
    t = (await public("task.create", inbox="private-bot", kind="chore", title="mine"))["task"]
    other = (await owner("task.create", inbox="private-bot", kind="chore", title="not mine"))["task"]
    held = (await owner("task.claim", task_id=t["task_id"]))["task"]
    await owner("task.claim", task_id=other["task_id"])
    out = await public("task.watch", task_id=t["task_id"])
    assert [(e["task_id"], e["kind"]) for e in out["events"]] == [(t["task_id"], "created"), (t["task_id"], "claimed")]
    # After the cursor: only what came since, and a long poll wakes for it.
    waiting = asyncio.create_task(public("task.watch", task_id=t["task_id"], since_seq=out["next_seq"], wait_seconds=20))
    await owner("task.complete", task_id=t["task_id"], fence=held["fence"], reason="shipped")
    later = await waiting
    assert [(e["kind"], e["reason"]) for e in later["events"]] == [("done", "shipped")]
    assert later["events"][0]["seq"] > out["next_seq"]
    # The inbox: a reader sees every task's events; a listed poster who cannot read it, its own.
    everything = await owner("task.watch", inbox="private-bot")
    assert {e["task_id"] for e in everything["events"]} == {t["task_id"], other["task_id"]}
    own = await public("task.watch", inbox="private-bot")
    assert {e["task_id"] for e in own["events"]} == {t["task_id"]}


async def test_watch_op_refusals_for_each_role_and_org(org: Org) -> None:
    _, owner, public = await setup(org)
    t = (await owner("task.create", inbox="private-bot", kind="chore", title="t"))["task"]
    # A viewer of the owner namespace reads the inbox and its tasks.
    viewer = await org.member("user:viewer", {org.private: "viewer"})
    assert [e["kind"] for e in (await viewer("task.watch", task_id=t["task_id"]))["events"]] == ["created"]
    assert [e["kind"] for e in (await viewer("task.watch", inbox="private-bot"))["events"]] == ["created"]
    # A poster reads its own tasks only: another's task is as if it did not exist.
    await public.refused(404, "RESOURCE_NOT_FOUND", "task.watch", task_id=t["task_id"])
    # Someone who may neither read nor post: 404 for the inbox and the task.
    stranger = await org.member("sa:stranger", {org.public: "writer"})
    await stranger.refused(404, "RESOURCE_NOT_FOUND", "task.watch", inbox="private-bot")
    await stranger.refused(404, "RESOURCE_NOT_FOUND", "task.watch", task_id=t["task_id"])
    # No role at all in the call's namespace: the chain refuses (viewer is the op's floor).
    nobody = org.api(org.token("user:nobody", {}, org.private), "user:nobody", namespace=org.private)
    await nobody.refused(403, "AUTH_INSUFFICIENT", "task.watch", inbox="private-bot")
    # Another org's token: its own org has no such task or inbox; naming this org is refused.
    other_org = org.api(org.token("user:admin", {"*": "admin"}, org.private), "user:admin", namespace=org.private)
    other_org.client.headers["X-Loom-Org"] = "another-org"
    await other_org.refused(403, "AUTH_WRONG_ORG", "task.watch", inbox="private-bot")
    # Bad input: neither or both of task_id and inbox, a negative cursor, an over-long wait.
    await owner.refused(422, "VALIDATION_FAILED", "task.watch")
    await owner.refused(422, "VALIDATION_FAILED", "task.watch", task_id=t["task_id"], inbox="private-bot")
    await owner.refused(422, "VALIDATION_FAILED", "task.watch", inbox="private-bot", since_seq=-1)
    await owner.refused(422, "VALIDATION_FAILED", "task.watch", inbox="private-bot", wait_seconds=31)
    await owner.refused(404, "RESOURCE_NOT_FOUND", "task.watch", inbox="no-such-inbox")


async def test_sse_streams_an_inbox_and_resumes_from_last_event_id(org: Org) -> None:
    _, owner, _ = await setup(org)
    token = org.token("sa:private-bot", {org.private: "writer"}, org.private)
    client = watch_client(org, token, org.private)
    first = (await owner("task.create", inbox="private-bot", kind="chore", title="before the stream"))["task"]
    async with client.stream("GET", "/v1/task/watch", params={"inbox": "private-bot", "heartbeat_seconds": 1}) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        assert r.headers["cache-control"] == "no-cache"
        it = frames(r)
        (backlog,) = await next_events(it, 1)
        assert backlog.body()["task_id"] == first["task_id"] and backlog.body()["kind"] == "created"
        assert int(backlog.id) == backlog.body()["seq"]
        second = (await owner("task.create", inbox="private-bot", kind="chore", title="during"))["task"]
        held = (await owner("task.claim", task_id=second["task_id"]))["task"]
        live = await next_events(it, 2)
        assert [(f.body()["task_id"], f.body()["kind"]) for f in live] == [(second["task_id"], "created"), (second["task_id"], "claimed")]
        resume_from = live[0].id
        # Nothing new for a while: heartbeat comments keep the connection open.
        while True:
            f = await asyncio.wait_for(it.__anext__(), 30)
            if "heartbeat" in f.comments:
                break
    await owner("task.complete", task_id=second["task_id"], fence=held["fence"])
    # A reconnect names the last event it handled: it reads exactly what came after.
    async with client.stream(
        "GET", "/v1/task/watch", params={"inbox": "private-bot", "heartbeat_seconds": 1}, headers={"Last-Event-ID": resume_from}
    ) as r:
        assert r.status_code == 200
        after = await next_events(frames(r), 2)
        assert [f.body()["kind"] for f in after] == ["claimed", "done"]
        assert all(int(f.id) > int(resume_from) for f in after)


async def test_sse_refusals_answer_before_the_stream_starts(org: Org) -> None:
    _, owner, _ = await setup(org)
    t = (await owner("task.create", inbox="private-bot", kind="chore", title="t"))["task"]

    async def status_of(client: httpx.AsyncClient, params: dict[str, Any], **headers: str) -> tuple[int, str]:
        r = await client.get("/v1/task/watch", params=params, headers=headers)
        return r.status_code, r.json()["error"]["code"]

    stranger = watch_client(org, org.token("sa:stranger", {org.public: "writer"}, org.public), org.public)
    await org.grant("sa:stranger", org.public, "writer")
    assert await status_of(stranger, {"task_id": t["task_id"]}) == (404, "RESOURCE_NOT_FOUND")
    assert await status_of(stranger, {"inbox": "private-bot"}) == (404, "RESOURCE_NOT_FOUND")
    nobody = watch_client(org, org.token("user:nobody", {}, org.private), org.private)
    assert await status_of(nobody, {"inbox": "private-bot"}) == (403, "AUTH_INSUFFICIENT")
    admin = watch_client(org, org.admin_token, org.private)
    assert await status_of(admin, {"inbox": "private-bot"}, **{"X-Loom-Org": "another-org"}) == (403, "AUTH_WRONG_ORG")
    anonymous = httpx.AsyncClient(base_url=org.inst.base_url)
    org.clients.append(anonymous)
    assert await status_of(anonymous, {"inbox": "private-bot"}) == (401, "AUTH_REQUIRED")
    assert await status_of(admin, {}) == (422, "VALIDATION_FAILED")
    assert await status_of(admin, {"inbox": "private-bot"}, **{"Last-Event-ID": "not-a-number"}) == (422, "VALIDATION_FAILED")
    assert await status_of(admin, {"inbox": "private-bot", "heartbeat_seconds": "31"}) == (422, "VALIDATION_FAILED")


async def test_sse_ends_with_an_error_event_once_the_token_is_revoked(org: Org) -> None:
    admin, owner, _ = await setup(org)
    await org.grant("sa:watcher", org.private, "viewer")
    watcher = watch_client(org, org.token("sa:watcher", {org.private: "viewer"}, org.private), org.private)
    async with watcher.stream("GET", "/v1/task/watch", params={"inbox": "private-bot", "heartbeat_seconds": 1}) as r:
        assert r.status_code == 200
        it = frames(r)
        await owner("task.create", inbox="private-bot", kind="chore", title="seen")
        await next_events(it, 1)
        await admin("token.revoke", subject="sa:watcher")
        await owner("task.create", inbox="private-bot", kind="chore", title="not seen")
        tail: list[Frame] = [f async for f in it]  # the stream ends by itself
    errors = [f for f in tail if f.event == "error"]
    assert len(errors) == 1 and tail[-1] is errors[0]
    assert errors[0].body()["error"]["code"] == "AUTH_REVOKED"
    assert not any(f.data and not f.event and f.body()["title"] == "not seen" for f in tail)


async def test_sse_stops_reading_when_the_client_goes(org: Org, tasks_a: Instance) -> None:
    _, owner, _ = await setup(org)
    tail = tasks_plane(tasks_a).deps.tail
    token = org.token("sa:private-bot", {org.private: "writer"}, org.private)
    client = watch_client(org, token, org.private)
    async with client.stream("GET", "/v1/task/watch", params={"inbox": "private-bot", "heartbeat_seconds": 30}) as r:
        assert r.status_code == 200
        it = frames(r)
        await owner("task.create", inbox="private-bot", kind="chore", title="t")
        await next_events(it, 1)

        def mine() -> list[list[str]]:
            # This org's inbox only (loom.tasks.<org>.<namespace>.<inbox>.*): other tests' orgs have
            # inboxes of the same name, and their looks share the replica's tail.
            return [w.pattern for w in tail.waiters if w.pattern[2] == org.name and w.pattern[-2] == "private-bot"]

        async def waiting() -> bool:
            return bool(mine())

        await eventually(waiting, within=10)  # a 30 s look is in flight
    # The client went mid-look: the look is cancelled and its waiter gone, long before 30 s.

    async def gone() -> bool:
        return not mine()

    await eventually(gone, within=10)


async def test_sdk_follows_an_inbox_and_completes_with_a_reason(org: Org) -> None:
    await setup(org)
    token = org.token("sa:private-bot", {org.private: "writer"}, org.private)
    async with Agent(org=org.name, namespace=org.private, agent="private-bot", api_key=token, base_url=org.inst.base_url) as a:
        t = (await a.tasks.create("private-bot", kind="chore", title="via the sdk"))["task"]
        held = (await a.tasks.claim(t["task_id"]))["task"]
        done = (await a.tasks.complete(t["task_id"], fence=held["fence"], outcome={"ok": True}, reason="all green"))["task"]
        assert done["reason"] == "all green"
        seen: list[tuple[str, str]] = []
        async for event in a.tasks.follow(inbox="private-bot", wait_seconds=5):
            seen.append((event["kind"], event["reason"]))
            if event["kind"] == "done":
                break
        assert seen == [("created", ""), ("claimed", ""), ("done", "all green")]
        assert (await a.tasks.watch(task_id=t["task_id"], since_seq=event["seq"]))["events"] == []


async def test_watch_over_grpc_and_mcp_answers_and_refuses_as_over_rest(org: Org, tasks_a: Instance) -> None:
    _, owner, _ = await setup(org)
    t = (await owner("task.create", inbox="private-bot", kind="chore", title="t"))["task"]
    md = [
        ("authorization", f"Bearer {org.token('sa:private-bot', {org.private: 'writer'}, org.private)}"),
        ("x-loom-namespace", org.private),
    ]
    stranger_md = [("authorization", f"Bearer {org.token('sa:stranger', {org.public: 'writer'}, org.public)}")]
    await org.grant("sa:stranger", org.public, "writer")
    async with grpc.aio.insecure_channel(tasks_a.grpc_address("tasks")) as channel:
        stub = tasks_pb2_grpc.TaskServiceStub(channel)
        out = await stub.WatchTask(pb.WatchTaskRequest(task_id=t["task_id"]), metadata=md)
        assert [(e.task_id, e.kind) for e in out.events] == [(t["task_id"], "created")] and out.next_seq >= out.events[0].seq
        try:
            await stub.WatchTask(pb.WatchTaskRequest(inbox="private-bot"), metadata=stranger_md)
            raise AssertionError("a stranger read the inbox's events")
        except grpc.aio.AioRpcError as exc:
            assert from_rpc_error(exc).code == "RESOURCE_NOT_FOUND"
    headers = {"Authorization": md[0][1], "X-Loom-Namespace": org.private}
    async with mcp_session(tasks_a.base_url + "/mcp", **headers) as client:
        assert tool_name("task.watch") in {tool.name for tool in (await client.list_tools()).tools}
        got = body(await client.call_tool("task.watch", {"inbox": "private-bot"}))
        assert [e["task_id"] for e in got["events"]] == [t["task_id"]]
        bad = await client.call_tool("task.watch", {})
        assert bad.is_error and body(bad)["error"]["code"] == "VALIDATION_FAILED"

"""Cluster mode on real processes, the way Compose runs Loom: a 3-node NATS cluster with
JetStream replicas 3, the planes in a process of their own, the gateway in another, real gRPC
between them, every call through the gateway's REST door.

How the processes share storage here: there is no ClickHouse server on this machine, and chDB
(embedded ClickHouse) opens one data dir in one process. So exactly one `loom serve --planes
identity,tasks,policy` owns the store and serves every plane on this branch, and the gateway
process (`loom serve --gateway`) holds no store and no bus: it relays each op over gRPC to the
planes process, whose op chain authenticates, gates and ledgers it. With a ClickHouse server
(Compose, Helm) each plane runs in its own process; the processes here are otherwise the same
commands. This run covers tasks, policy and identity (served through the gateway), and the
assistant bridge in its own process (`loom serve --planes assistant`, as Compose's
assistant-bridge service) against the LibreChat emulator of tests/assistant, which runs in this
test process: the gateway relays the chat route to the bridge over HTTP
(LOOM_ASSISTANT_BRIDGE_URL) and assistant.ask over gRPC, and the emulator's tool calls come back
through the gateway's /mcp to the planes process. chDB opens a data dir in one process only, so
the bridge keeps its own (its service row, its spend and run reads) and `loom admin bootstrap`
seeds the same org and admin grant there; with a ClickHouse server every process shares one.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import nats
import pytest
from loom_runner.http import HttpServer

from tests.assistant.emulator import Emulator

from .processes import LoomProcess, NatsCluster, NatsNode, account_seed, bootstrap, free_port, loom_env

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

INTERNAL_USER = "loom-internal"
INTERNAL_PASSWORD = uuid.uuid4().hex
ONE_PER_HOUR = {"op": "count_within", "within": "1h", "operation": "grants.list", "cmp": "gte", "value": 1}


@dataclass
class Cluster:
    nats: NatsCluster
    planes: LoomProcess
    gateway: LoomProcess
    base_url: str
    org: str
    namespace: str
    token: str
    bridge: LoomProcess | None = None
    emulator: Emulator | None = None

    def client(self, token: str | None = None, **headers: str) -> httpx.AsyncClient:
        h = {"Authorization": f"Bearer {token or self.token}", "X-Loom-Namespace": self.namespace, **headers}
        return httpx.AsyncClient(base_url=self.base_url, headers=h, timeout=30)


@pytest.fixture(scope="module")
async def cluster(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Cluster]:
    base = tmp_path_factory.mktemp("cluster")
    seed, issuer = account_seed()
    nats_env = {
        "LOOM_NATS_INTERNAL_USER": INTERNAL_USER,
        "LOOM_NATS_INTERNAL_PASSWORD": INTERNAL_PASSWORD,
        "NATS_SYS_USER": f"{INTERNAL_USER}-sys",
        "NATS_AUTH_CALLOUT_ISSUER": issuer,
    }
    nc = NatsCluster(base / "nats", 3, nats_env)
    nc.start()
    planes = gateway = bridge = None
    emu_server: HttpServer | None = None
    try:
        await nc.wait_ready(INTERNAL_USER, INTERNAL_PASSWORD)
        store_dir = base / "planes"
        common = {
            "nats_url": nc.urls,
            "nats_replicas": "3",
            "nats_internal_user": INTERNAL_USER,
            "nats_internal_password": INTERNAL_PASSWORD,
            "nats_auth_callout_issuer_seed": seed,
        }
        org, ns = f"org-{uuid.uuid4().hex[:8]}", "private"
        bridge_dir = base / "bridge"
        # The bridge's data dir gets the same org and admin grant, at the same time (chDB: its own).
        boot, _ = await asyncio.gather(
            asyncio.to_thread(bootstrap, loom_env(store_dir), org, ns), asyncio.to_thread(bootstrap, loom_env(bridge_dir), org, ns)
        )
        planes = LoomProcess(
            ["serve", "--planes", "identity,tasks,policy"],
            loom_env(
                store_dir,
                **common,
                policy_mode="enforce",
                task_sweep_interval_seconds="0.2",
                rate_write_per_minute="1000000",
                rate_read_per_minute="1000000",
                rate_admin_per_minute="100000",
            ),
            base / "planes.log",
        )
        planes.start()
        http_port = free_port()
        url = f"http://127.0.0.1:{http_port}"
        # The assistant bridge in its own process, against the LibreChat emulator served here.
        emu = Emulator(loom_url=url)
        emu_server = HttpServer(emu.app())
        await emu_server.start()
        bridge_port = free_port()
        bridge = LoomProcess(
            ["serve", "--planes", "assistant"],
            loom_env(
                bridge_dir,
                **common,
                assistant_librechat_url=f"http://127.0.0.1:{emu_server.port}",
                assistant_bridge_listen=f"127.0.0.1:{bridge_port}",
                assistant_loom_url=url,
                assistant_setup_retry_s="0.2",
            ),
            base / "bridge.log",
        )
        bridge.start()
        addresses = {}
        for plane in ("identity", "tasks", "policy"):
            m = await planes.wait_line(rf"^loom: plane {plane} grpc (\S+)$")
            addresses[plane] = m.group(1)
        addresses["assistant"] = (await bridge.wait_line(r"^loom: plane assistant grpc (\S+)$")).group(1)
        gateway = LoomProcess(
            ["serve", "--gateway"],
            loom_env(
                base / "gateway",
                plane_addresses=",".join(f"{k}={v}" for k, v in addresses.items()),
                http_port=str(http_port),
                assistant_bridge_url=f"http://127.0.0.1:{bridge_port}",
            ),
            base / "gateway.log",
        )
        gateway.start()
        await gateway.wait_line(r"^loom: gateway http ")
        async with httpx.AsyncClient(base_url=url, timeout=5) as c:
            r = await c.get("/v1/health/ready")
        assert r.status_code == 200 and r.json()["checks"]["planes"]["ok"] is True, r.text
        yield Cluster(nc, planes, gateway, url, org, ns, boot["token"], bridge, emu)
    finally:
        for p in (gateway, bridge, planes):
            if p is not None:
                p.stop()
        if emu_server is not None:
            await emu_server.stop()
        nc.stop()


async def ok(c: httpx.AsyncClient, op: str, **args: Any) -> dict[str, Any]:
    r = await c.post(f"/v1/{op}", json=args)
    assert r.status_code == 200, f"{op} -> {r.status_code} {r.text}"
    return dict(r.json())


async def refused(c: httpx.AsyncClient, op: str, status: int, code: str, **args: Any) -> dict[str, Any]:
    r = await c.post(f"/v1/{op}", json=args)
    assert (r.status_code, r.json()["error"]["code"]) == (status, code), r.text
    return dict(r.json()["error"])


async def test_the_gateway_process_holds_no_store_and_relays_to_the_planes_process(cluster: Cluster) -> None:
    async with cluster.client() as c:
        me = await ok(c, "auth.whoami")
        ops = (await c.get("/v1/ops")).json()["ops"]
    assert me["org"] == cluster.org
    planes = {op["name"].split(".")[0] for op in ops}
    assert {"task", "inbox", "policy", "auth", "grants", "token"} <= planes
    assert "store" not in (await httpx.AsyncClient().get(f"{cluster.base_url}/v1/health/ready")).json()["checks"]


async def test_task_lifecycle_through_the_gateway(cluster: Cluster) -> None:
    async with cluster.client(**{"X-Loom-Agent": "bot"}) as c:
        await ok(c, "inbox.register", inbox="life", owner_agent="bot")
        created = await ok(c, "task.create", inbox="life", kind="chore", title="tidy", brief={"n": 1})
        pulled = await ok(c, "task.pull", inbox="life")
        [task] = pulled["tasks"]
        assert task["task_id"] == created["task"]["task_id"] and task["status"] == "in_progress"
        done = await ok(c, "task.complete", task_id=task["task_id"], fence=task["fence"], outcome={"ok": True})
        assert done["task"]["status"] == "done"
        await refused(c, "task.complete", 409, "TASK_TERMINAL", task_id=task["task_id"], fence=task["fence"], outcome={"again": True})
        history = await ok(c, "task.history", task_id=task["task_id"])
    assert [e["kind"] for e in history["events"]] == ["created", "claimed", "done"]


async def test_a_policy_refusal_through_the_gateway(cluster: Cluster) -> None:
    async with cluster.client(**{"X-Loom-Agent": "policy-bot"}) as c:
        await ok(c, "policy.set", name="one-list-per-hour", effect="forbid", actions=["grants.list"], condition=ONE_PER_HOUR)
        await ok(c, "grants.list")
        err = await refused(c, "grants.list", 403, "POLICY_FORBIDDEN")
        await ok(c, "policy.delete", name="one-list-per-hour")
    assert err["detail"]["determining_rules"] == ["one-list-per-hour"]


async def test_a_revoked_token_is_refused_through_the_gateway(cluster: Cluster) -> None:
    async with cluster.client() as admin:
        child = await ok(admin, "token.mint", roles={cluster.namespace: "writer"}, ttl_seconds=600)
        async with cluster.client(child["token"]) as c:
            await ok(c, "auth.whoami")
            await ok(admin, "token.revoke", token_id=child["token_id"])
            err = await refused(c, "auth.whoami", 401, "AUTH_REVOKED")
    assert err["detail"]["reason"] == "token"


async def test_an_answer_through_the_gateway_runs_in_the_bridge_process_and_its_tool_calls_in_the_planes_process(
    cluster: Cluster,
) -> None:
    """gateway -> bridge process (HTTP, the chat route; gRPC, assistant.ask) -> LibreChat
    emulator -> the gateway's /mcp with the answer's own token -> the planes process."""
    from tests.assistant.emulator import Turn

    emu = cluster.emulator
    assert emu is not None

    async def script(turn: Turn) -> None:
        # task.counts: a read of the assistant toolset that the planes process serves.
        counts = await turn.call("task.counts", {})
        await turn.say("You read as loom-assistant." if counts.ok else f"Refused: {counts.body}")

    emu.script = script
    async with cluster.client() as admin:
        viewer = await ok(admin, "token.mint", roles={cluster.namespace: "viewer"}, ttl_seconds=3600)
    body = {"model": "x", "messages": [{"role": "user", "content": "Who am I?"}], "stream": True}
    async with cluster.client(viewer["token"]) as c:
        for _ in range(300):  # the bridge process sets the service user up at boot
            r = await c.post("/v1/assistant/chat/completions", json=body)
            if r.status_code != 503 or r.json()["error"]["detail"].get("reason") != "starting":
                break
            await asyncio.sleep(0.1)
        asked = await ok(c, "assistant.ask", question="Who am I?")
    assert r.status_code == 200, r.text
    events = [line[6:] for line in r.text.split("\n") if line.startswith("data: ")]
    objects = [json.loads(e).get("loom_event", "chunk") for e in events[:-1]]
    assert events[-1] == "[DONE]" and objects.index("loom.text_done") < objects.index("loom.citations")
    text = "".join((ch.get("delta") or {}).get("content") or "" for e in events[:-1] for ch in json.loads(e).get("choices") or [])
    assert text == asked["text"] == "You read as loom-assistant."
    # LibreChat got the answer's token, never the caller's; the planes process accepted it.
    sent = [b["parent_message_id"] for b in emu.chat_bodies[-2:]]
    assert viewer["token"] not in sent and all(sent)
    assert all(t.ok for t in emu.tool_results[-2:])
    assert {h["Authorization"] for h in emu.mcp_headers[-2:]} <= {f"Bearer {t}" for t in sent}


def test_every_stream_and_kv_bucket_loom_declared_keeps_three_replicas(cluster: Cluster) -> None:
    node = cluster.nats.nodes[0]
    r = httpx.get(f"http://127.0.0.1:{node.monitor_port}/jsz?accounts=true&streams=true&config=true", timeout=5)
    streams = [s for acc in r.json()["account_details"] if acc["name"] == "LOOM" for s in acc.get("stream_detail") or []]
    names = {s["name"] for s in streams}
    assert len(names) >= 3, names  # the ledger, task events, and the KV buckets below
    assert any(n.startswith("KV_") for n in names), names  # leases and task state are KV buckets
    assert {s["name"]: s["config"]["num_replicas"] for s in streams} == dict.fromkeys(names, 3)


RETRYABLE = {502, 503, 504}


async def call_retrying(c: httpx.AsyncClient, op: str, retries: Counter[str], **args: Any) -> httpx.Response:
    """The op, sent again after a transport error or a retryable answer (a NATS node going away
    shows as BACKEND_UNAVAILABLE while the planes reconnect). Anything else is returned."""
    for _ in range(300):
        try:
            r = await c.post(f"/v1/{op}", json=args)
        except httpx.TransportError:
            retries[op] += 1
            await asyncio.sleep(0.1)
            continue
        if r.status_code not in RETRYABLE:
            return r
        retries[op] += 1
        await asyncio.sleep(0.1)
    raise AssertionError(f"{op} never answered")


# The node killed here leads the projector's durable consumer: until JetStream elects another
# leader (Raft election timeout, 4-9 s) the projection is behind, and task.list must answer a
# retryable 503 (projection_behind), never a list lacking acknowledged tasks. Before that answer
# existed this test failed under load (task.list lacked the ~40 tasks written after the kill).
@pytest.mark.timeout(300)  # the cluster's start may fall to this test when it runs alone, on a loaded machine
async def test_a_nats_node_killed_during_creates_and_completes_loses_no_task_and_does_none_twice(cluster: Cluster) -> None:
    total, kill_at = 60, 20
    retries: Counter[str] = Counter()
    created: dict[str, str] = {}
    completed: Counter[str] = Counter()
    killed = asyncio.Event()
    async with cluster.client(**{"X-Loom-Agent": "worker"}) as c:
        await ok(c, "inbox.register", inbox="storm", owner_agent="worker")

        async def creator() -> None:
            for i in range(total):
                if i == kill_at:
                    # The node leading the projector's consumer goes away mid-stream (the hardest
                    # case for the projection: its consumer, and often its streams, elect anew).
                    node = await projector_leader(cluster)
                    node.kill()
                    killed.set()
                r = await call_retrying(c, "task.create", retries, inbox="storm", kind="chore", title=f"t{i}", idempotency_key=f"key-{i}")
                assert r.status_code == 200, r.text
                task_id = r.json()["task"]["task_id"]
                assert created.setdefault(f"key-{i}", task_id) == task_id

        async def worker() -> None:
            while len(completed) < total:
                r = await call_retrying(c, "task.pull", retries, inbox="storm", max_tasks=10, wait_seconds=1, lease_seconds=3)
                assert r.status_code == 200, r.text
                for task in r.json()["tasks"]:
                    done = await call_retrying(
                        c, "task.complete", retries, task_id=task["task_id"], fence=task["fence"], outcome={"by": "worker"}
                    )
                    if done.status_code == 200:
                        completed[task["task_id"]] += 1
                    else:  # an answer lost in the failover: the retry finds the task already done by that call
                        assert done.json()["error"]["code"] in ("TASK_TERMINAL", "TASK_FENCE_STALE"), done.text
                        got = await call_retrying(c, "task.get", retries, task_id=task["task_id"])
                        if got.json()["task"]["status"] == "done":
                            completed[task["task_id"]] += 1

        await asyncio.wait_for(asyncio.gather(creator(), worker()), 200)
        assert killed.is_set()
        # While the projector's consumer has no leader (the killed node led it; JetStream elects
        # another after its Raft election timeout, 4-9 s) the projection is behind: task.list
        # answers a retryable 503 past its read-your-writes bound, never a short list.
        r = await call_retrying(c, "task.list", retries, inbox="storm", limit=500)
        assert r.status_code == 200, r.text
        listed = r.json()
        # task.history is written by the projector (batches, behind the write): wait until each
        # task's history has caught up with its done state (or the deadline), then count.
        histories = [await history_through_done(c, t, retries) for t in created.values()]
    # No task lost: one task per key, every one listed and done; none done twice.
    assert len(created) == total and len(set(created.values())) == total
    assert sorted(t["task_id"] for t in listed["tasks"]) == sorted(created.values())
    assert all(t["status"] == "done" for t in listed["tasks"])
    assert set(completed) == set(created.values()) and set(completed.values()) == {1}
    for events in histories:
        kinds = Counter(e["kind"] for e in events)
        assert kinds["created"] == 1 and kinds["done"] == 1, [e["kind"] for e in events]
    # The flow went on after the node died: the two left keep JetStream's quorum.
    alive = [n for n in cluster.nats.nodes if n.proc is not None and n.proc.poll() is None]
    assert len(alive) == 2
    rss = {p.args[-1]: _rss_mb(p) for p in (cluster.planes, cluster.gateway)}
    print(f"retries during the failover: {dict(retries)}; resident memory MB: {rss}")


async def history_through_done(c: httpx.AsyncClient, task_id: str, retries: Counter[str], within: float = 30.0) -> list[dict[str, Any]]:
    deadline = asyncio.get_running_loop().time() + within
    while True:
        events = list((await call_retrying(c, "task.history", retries, task_id=task_id)).json()["events"])
        if any(e["kind"] == "done" for e in events) or asyncio.get_running_loop().time() > deadline:
            return events
        await asyncio.sleep(0.2)


async def projector_leader(cluster: Cluster) -> NatsNode:
    """The node leading the task projector's durable consumer (LOOM_TASK_STATE)."""
    conn = await nats.connect(cluster.nats.urls.split(","), user=INTERNAL_USER, password=INTERNAL_PASSWORD)
    try:
        info = await conn.jetstream().consumer_info("LOOM_TASK_STATE", "loom-task-projector-ack-all")
    finally:
        await conn.close()
    assert info.cluster is not None and info.cluster.leader, info
    return next(n for n in cluster.nats.nodes if n.name == info.cluster.leader)


def _rss_mb(p: LoomProcess) -> int:
    assert p.proc is not None
    status = Path(f"/proc/{p.proc.pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:"))) // 1024


def test_the_processes_log_their_plane_addresses(cluster: Cluster) -> None:
    text = Path(cluster.planes.log).read_text()
    assert "loom: plane tasks grpc" in text and "loom: plane policy grpc" in text

"""Two `loom serve` processes write the same key at once: each write gets its own version,
across the processes, with nothing lost: a decision key's record versions, and one writer
identity's memory-row versions under a key.

Each process serves the identity and decisions planes with the gateway beside them, on one real
nats-server (JetStream, Loom's accounts and auth callout). chDB opens a data dir in one process
only, so each keeps its own store, bootstrapped with the same org; each reads the key's newest
version from its own store, which knows nothing of the other's writes. What keeps the versions
apart is the key's counter on NATS KV (compare-and-set), which both share: the seam under test.
Before it, each process counted `max(version) + 1` under a per-process lock, and both wrote
versions 1, 2, 3…; with a ClickHouse server both share one store, and the same race wrote the
same version twice whenever the two reads came before either insert. Memory rows (memory.set)
counted their versions the same way until they took a counter of their own per key and writer.

The two races (a decision key's records, a memory row) write different keys, so they share one
pair of processes (the module's `clients`): two `loom serve` starts and a nats-server fewer than one pair each.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from .processes import LoomProcess, NatsCluster, account_seed, bootstrap, free_port, loom_env

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

INTERNAL_USER = "loom-internal"
INTERNAL_PASSWORD = uuid.uuid4().hex
WRITES_PER_PROCESS = 8


async def ready(url: str, proc: LoomProcess, within: float = 120) -> None:
    await proc.wait_line(r"^loom: plane decisions grpc ", within=within)
    async with httpx.AsyncClient(base_url=url, timeout=5) as c:
        for _ in range(int(within / 0.2)):
            try:
                if (await c.get("/v1/health/ready")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.2)
    raise AssertionError(f"{url} never answered ready")


@pytest.fixture(scope="module")
async def clients(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[list[httpx.AsyncClient]]:
    async with two_processes(tmp_path_factory.mktemp("writers")) as both:
        yield both


@asynccontextmanager
async def two_processes(tmp_path: Path) -> AsyncIterator[list[httpx.AsyncClient]]:
    """Two `loom serve` processes on one nats-server, each with its own store and the same org;
    a client of each, calling as the same agent (one writer identity on both)."""
    seed, issuer = account_seed()
    nats = NatsCluster(
        tmp_path / "nats",
        1,
        {
            "LOOM_NATS_INTERNAL_USER": INTERNAL_USER,
            "LOOM_NATS_INTERNAL_PASSWORD": INTERNAL_PASSWORD,
            "NATS_SYS_USER": f"{INTERNAL_USER}-sys",
            "NATS_AUTH_CALLOUT_ISSUER": issuer,
        },
    )
    nats.start()
    procs: list[LoomProcess] = []
    clients: list[httpx.AsyncClient] = []
    try:
        await nats.wait_ready(INTERNAL_USER, INTERNAL_PASSWORD)
        org, ns = f"org-{uuid.uuid4().hex[:8]}", "private"
        dirs = [tmp_path / "a", tmp_path / "b"]
        boots = await asyncio.gather(*(asyncio.to_thread(bootstrap, loom_env(d), org, ns) for d in dirs))
        urls = []
        for d in dirs:
            port = free_port()
            urls.append(f"http://127.0.0.1:{port}")
            env = loom_env(
                d,
                nats_url=nats.urls,
                nats_replicas="1",
                nats_internal_user=INTERNAL_USER,
                nats_internal_password=INTERNAL_PASSWORD,
                nats_auth_callout_issuer_seed=seed,
                http_port=str(port),
                rate_write_per_minute="1000000",
            )
            procs.append(LoomProcess(["serve", "--planes", "identity,decisions", "--gateway"], env, tmp_path / f"{d.name}.log"))
            procs[-1].start()
        for url, p in zip(urls, procs, strict=True):
            await ready(url, p)
        clients = [
            httpx.AsyncClient(
                base_url=url,
                headers={"Authorization": f"Bearer {b['token']}", "X-Loom-Namespace": ns, "X-Loom-Agent": "writer"},
                timeout=120,
            )
            for url, b in zip(urls, boots, strict=True)
        ]
        yield clients
    finally:
        for c in clients:
            await c.aclose()
        for p in procs:
            p.stop()
        nats.stop()


async def test_two_processes_racing_on_one_key_write_distinct_versions(clients: list[httpx.AsyncClient]) -> None:
    async def write(c: httpx.AsyncClient, n: int) -> dict[str, Any]:
        r = await c.post(
            "/v1/memory.record.write",
            json={
                "schema": "decision",
                "category": "platform",
                "scenario": "where customer chat logs are archived",
                "outcome": f"bucket {n}",
            },
        )
        assert r.status_code == 200, r.text
        return dict(r.json())

    answers = await asyncio.gather(*(write(c, i * 100 + n) for i, c in enumerate(clients) for n in range(WRITES_PER_PROCESS)))
    versions = sorted(int(a["version"]) for a in answers)
    assert len({a["memory_key"] for a in answers}) == 1
    assert versions == list(range(1, 2 * WRITES_PER_PROCESS + 1))  # each once: none written twice, none skipped

    # Each process's store holds its own writes under those versions, and the newest is the
    # last version handed out on whichever process wrote it.
    key = answers[0]["memory_key"]
    held: list[int] = []
    for c in clients:
        r = await c.post("/v1/memory.record.history", json={"memory_key": key})
        assert r.status_code == 200, r.text
        held += [int(rec["version"]) for rec in r.json()["records"]]
    assert sorted(held) == versions


async def test_two_processes_racing_on_one_memory_row_write_distinct_versions(clients: list[httpx.AsyncClient]) -> None:
    async def write(c: httpx.AsyncClient, n: int) -> dict[str, Any]:
        r = await c.post("/v1/memory.set", json={"memory_key": "runbook/archive", "value": f"chat logs go to bucket {n}"})
        assert r.status_code == 200, r.text
        return dict(r.json())

    answers = await asyncio.gather(*(write(c, i * 100 + n) for i, c in enumerate(clients) for n in range(WRITES_PER_PROCESS)))
    versions = sorted(int(a["version"]) for a in answers)
    assert versions == list(range(1, 2 * WRITES_PER_PROCESS + 1))  # each once: none written twice, none skipped

    # Each process's store holds its own versions of the one writer's row, the two together
    # every version handed out; and a delete after the race is numbered past them all.
    held: list[int] = []
    for c in clients:
        r = await c.post("/v1/memory.history", json={"memory_key": "runbook/archive"})
        assert r.status_code == 200, r.text
        rows = r.json()["versions"]
        assert {(v["agent_id"], v["key"]) for v in rows} == {("writer", "runbook/archive")}
        held += [int(v["version"]) for v in rows]
    assert sorted(held) == versions
    r = await clients[0].post("/v1/memory.delete", json={"memory_key": "runbook/archive"})
    assert r.status_code == 200, r.text
    assert int(r.json()["version"]) == 2 * WRITES_PER_PROCESS + 1

"""A Loom replica with the assistant configured against the LibreChat emulator (sharing the
session's chDB engine and nats-server), and callers with namespace-scoped tokens."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from loom_core.bus import NatsServer
from loom_core.store.embedded import EmbeddedStore
from loom_gateway.identity import bootstrap_org
from loom_runner.embedded import Instance, start_instance
from loom_runner.http import HttpServer

from tests.conftest import call, make_settings, unique

from .emulator import Emulator


@dataclass
class Bench:
    inst: Instance
    emu: Emulator
    emu_url: str

    @property
    def plane(self):  # type: ignore[no-untyped-def]
        return next(p for p in self.inst.planes if p.name == "assistant")


@pytest.fixture(scope="session")
async def bench(data_dir: Path, store: EmbeddedStore, nats_server: NatsServer) -> AsyncIterator[Bench]:
    emu = Emulator(loom_url="")
    server = HttpServer(emu.app())
    await server.start()
    url = f"http://127.0.0.1:{server.port}"
    settings = make_settings(data_dir, assistant_librechat_url=url, assistant_setup_retry_s=0.05, assistant_answer_ttl_s=600)
    inst = await start_instance(settings, store=store, nats_url=nats_server.url, name="loom-test-assistant")
    emu.loom_url = inst.base_url
    b = Bench(inst, emu, url)
    async with asyncio.timeout(30):
        await b.plane.setup.wait_ready()
    yield b
    await inst.stop()
    await server.stop()


@pytest.fixture(autouse=True)
def _fresh_emulator(request: pytest.FixtureRequest) -> None:
    if "bench" in request.fixturenames:
        emu: Emulator = request.getfixturevalue("bench").emu
        from .emulator import greeting

        emu.script, emu.version, emu.chunk_delay_s, emu.gate, emu.listing_auth = greeting, "0.8.8", 0.0, None, True
        emu.chat_bodies.clear()
        emu.mcp_headers.clear()
        emu.tool_results.clear()
        emu.aborted = asyncio.Event()
        emu.calls_done = asyncio.Event()
        emu.chat_seen = asyncio.Semaphore(0)
        bridge = request.getfixturevalue("bench").plane.bridge
        bridge.token_path.reset()
        bridge.token_path_observed = asyncio.Event()


@dataclass
class Asker:
    org: str
    namespace: str
    admin: str  # the org's bootstrap admin token (org-wide)
    token: str  # viewer on the namespace alone
    token_id: str
    base_url: str

    def client(self, token: str | None = None, **headers: str) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.base_url, headers={"Authorization": f"Bearer {token or self.token}", **headers}, timeout=60)

    async def mint(self, **args: object) -> dict[str, object]:
        async with self.client(self.admin) as c:
            r = await call(c, "token.mint", **args)
            assert r.status_code == 200, r.text
            return dict(r.json())


@pytest.fixture
async def asker(bench: Bench) -> Asker:
    org, ns = unique("org"), unique("ns")
    admin, _ = await bootstrap_org(bench.inst.runtime.identity, bench.inst.runtime.codec, org, ns, 3600)
    a = Asker(org, ns, admin, "", "", bench.inst.base_url)
    minted = await a.mint(roles={ns: "viewer"}, ttl_seconds=3600)
    a.token, a.token_id = str(minted["token"]), str(minted["token_id"])
    return a


def chat_body(question: str = "What is in this namespace?", **extra: object) -> dict[str, object]:
    return {"model": "anything", "messages": [{"role": "user", "content": question}], **extra}


def sse_events(text: str) -> list[object]:
    import json

    out: list[object] = []
    for block in text.split("\n\n"):
        for line in block.splitlines():
            if line.startswith("data: "):
                payload = line[6:]
                out.append(payload if payload == "[DONE]" else json.loads(payload))
    return out


def run_row(asker: Asker, *, op: str = "assistant.ask", namespace: str | None = None, **fields: object) -> dict[str, object]:
    """A ledger row (agent_events) of `asker`'s org, as the chain writes one; `fields` override
    any column (run_id, subject, transport, consumer, out_hits, upstream_cost_usd, ...)."""
    from loom_core.chain.ledger import ledger_row

    row = ledger_row(
        org=asker.org,
        namespace=namespace or asker.namespace,
        subject="user:admin",
        agent="",
        user="",
        session="",
        op=op,
        transport="rest",
        run_id="r",
        consumer="",
        ok=True,
        error_code="",
        latency_ms=1.0,
        args={},
        out_hits=1,
        token_id="t",
        request_id="q",
        write_shaped=False,
    )
    return {**row, **fields}

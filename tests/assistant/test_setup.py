"""The service user and agent set up at boot (spec 000 "The bridge", "Deployment") against the
emulator: the four steps, repairs of a lost key or agent, the definition's seeding rule, the
sealed row and its reseal, failures and their backoff, and LibreChat's quirks."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest
from loom_assistant.domain.definition import Definition
from loom_assistant.plane import load_definition
from loom_assistant.service.librechat import LibreChatClient, LibreChatError
from loom_assistant.service.setup import ServiceSetup, Status
from loom_assistant.store.service_row import ServiceRowStore, sealer
from loom_core.bus import LeaseStore
from loom_core.bus.leases import LeaseHeld
from loom_runner.embedded import Instance
from loom_runner.http import HttpServer

from tests.conftest import TEST_SECRET

from .conftest import Bench
from .emulator import Emulator, agent_yaml_tools

EMAIL = "loom-assistant@loom.local"


@dataclass
class Rig:
    emu: Emulator
    url: str
    client: LibreChatClient
    rows: ServiceRowStore
    leases: LeaseStore
    lease_key: str
    table: str
    inst: Instance

    def setup(self, definition: Definition | None = None, retry_s: float = 0.02) -> ServiceSetup:
        return ServiceSetup(
            rows=self.rows,
            client=self.client,
            leases=self.leases,
            definition=definition or load_definition(),
            email=EMAIL,
            retry_s=retry_s,
            holder=f"test-{uuid.uuid4().hex[:6]}",
            lease_key=self.lease_key,
        )


@pytest.fixture
async def rig(bench: Bench) -> AsyncIterator[Rig]:
    emu = Emulator(loom_url=bench.inst.base_url)
    server = HttpServer(emu.app())
    await server.start()
    url = f"http://127.0.0.1:{server.port}"
    table = f"assistant_service_{uuid.uuid4().hex[:8]}"
    store = bench.inst.runtime.store
    await store.execute(f"CREATE TABLE {{db}}.{table} AS {{db}}.assistant_service")
    client = LibreChatClient(url)
    rows = ServiceRowStore(store, sealer(TEST_SECRET, ""), table)
    yield Rig(emu, url, client, rows, bench.inst.runtime.leases, f"assistant-service-test-{uuid.uuid4().hex[:8]}", table, bench.inst)
    await client.close()
    await server.stop()
    await store.execute(f"DROP TABLE IF EXISTS {{db}}.{table}")


async def test_first_boot_registers_signs_in_makes_a_key_and_the_agent(rig: Rig) -> None:
    s = rig.setup()
    row = await s.run_once()
    user = rig.emu.users[EMAIL]
    assert user["name"] == "loom-assistant" and user["role"] == "ADMIN"
    assert s.state.sign_ins == 2  # "Email does not exist." then the sign-in after registering
    (key,) = rig.emu.keys.values()
    assert key["name"] == "Loom assistant" and key["user"] == user["id"]
    (agent,) = rig.emu.agents.values()
    d = load_definition()
    assert agent["id"] == row.agent_id and agent["model"] == d.model and agent["instructions"] == d.instructions
    # The agent's tools exactly as librechat/agent.yaml names them (LibreChat's MCP names).
    assert agent["tools"] == list(d.tools) == agent_yaml_tools() and agent["provider"] == "anthropic"
    assert (row.definition_version, row.definition_model) == (d.version, d.model)
    assert s.state.status == Status.READY
    # The key runs the agent.
    assert await rig.client.agent_exists(row.api_key, row.agent_id)


async def test_the_row_seals_password_and_key_together(rig: Rig) -> None:
    row = await rig.setup().run_once()
    raw = await rig.rows.read_raw()
    assert raw is not None
    assert row.password not in str(raw) and row.api_key not in str(raw) and str(raw["sealed"]).startswith("v1.")
    again = await rig.rows.read()
    assert again == row


async def test_a_complete_row_boots_without_signing_in(rig: Rig) -> None:
    await rig.setup().run_once()
    s = rig.setup()
    await s.run_once()
    assert s.state.sign_ins == 0
    assert len(rig.emu.keys) == 1 and len(rig.emu.agents) == 1


async def test_a_lost_key_401_makes_the_key_again(rig: Rig) -> None:
    first = await rig.setup().run_once()
    rig.emu.wipe_keys()
    s = rig.setup()
    row = await s.run_once()
    assert row.api_key != first.api_key and row.agent_id == first.agent_id
    assert s.state.sign_ins == 1 and len(rig.emu.keys) == 1


async def test_a_lost_agent_404_makes_the_agent_again(rig: Rig) -> None:
    first = await rig.setup().run_once()
    rig.emu.wipe_agents()
    row = await rig.setup().run_once()
    assert row.agent_id != first.agent_id and row.agent_id in rig.emu.agents and row.api_key == first.api_key


async def test_leftover_keys_are_deleted_and_the_oldest_agent_kept(rig: Rig) -> None:
    await rig.setup().run_once()
    jwt = await rig.client.login(EMAIL, (await rig.rows.read()).password)  # type: ignore[union-attr]
    leftover = await rig.client.create_key(jwt, "Loom assistant")
    body = load_definition().agent_body()
    oldest = next(iter(rig.emu.agents))
    dup = await rig.client.create_agent(jwt, body)
    row = await rig.rows.read()
    assert row is not None
    await rig.rows.write(row.but(api_key="", agent_id=""))
    row = await rig.setup().run_once()
    assert leftover.id not in rig.emu.keys and len(rig.emu.keys) == 1
    assert row.agent_id == oldest and dup not in rig.emu.agents


async def test_definition_written_when_newer_or_same_version_other_model_never_older(rig: Rig) -> None:
    d = load_definition()
    row = await rig.setup().run_once()
    agent = rig.emu.agents[row.agent_id]
    await rig.setup(d.with_model("claude-sonnet-4-5")).run_once()
    assert agent["model"] == "claude-sonnet-4-5"
    newer = Definition(d.version + 1, d.name, d.provider, d.model, d.model_parameters, d.tools, d.instructions + "\nNew rule.")
    row = await rig.setup(newer).run_once()
    assert agent["instructions"].endswith("New rule.") and row.definition_version == d.version + 1
    await rig.setup(d).run_once()  # an older build (N-1) boots during a rolling upgrade
    assert agent["instructions"].endswith("New rule.") and (await rig.rows.read()).definition_version == d.version + 1  # type: ignore[union-attr]


async def test_signed_in_routes_refuse_a_non_browser_client_and_the_setup_sends_a_browser_agent(rig: Rig) -> None:
    async with httpx.AsyncClient(base_url=rig.url) as plain:
        r = await plain.get("/api/agents", headers={"User-Agent": "python-httpx"})
    assert r.status_code == 200 and "Illegal request" in r.text
    await rig.setup().run_once()  # every signed-in call succeeded


async def test_a_5xx_sign_in_fails_then_the_loop_retries_and_succeeds(rig: Rig) -> None:
    rig.emu.fail_next_login = 2
    s = rig.setup()
    s.start()
    async with asyncio.timeout(10):
        await s.wait_ready()
    assert s.state.status == Status.READY and s.state.failures == 0
    await s.stop()


async def test_a_refused_sign_in_needs_an_operator(rig: Rig) -> None:
    await rig.setup().run_once()
    rig.emu.users[EMAIL]["password"] = "restored-from-elsewhere"
    rig.emu.wipe_keys()
    s = rig.setup()
    s.start()
    async with asyncio.timeout(10):
        await s.wait_failure()
    assert s.state.status == Status.FAILING and s.state.failure_kind == "needs_operator"
    await s.stop()


async def test_the_sign_in_rate_limit_is_named(rig: Rig) -> None:
    rig.emu.sign_ins = [1e18] * 7  # seven sign-ins in the window already
    s = rig.setup()
    s.start()
    async with asyncio.timeout(10):
        await s.wait_failure()
    assert s.state.failure_kind == "sign_in_rate_limited"
    await s.stop()


def test_the_retry_wait_doubles_up_to_sixteen_times() -> None:
    s = ServiceSetup(rows=None, client=None, leases=None, definition=load_definition(), email=EMAIL, retry_s=5.0, holder="h")  # type: ignore[arg-type]
    assert [s.backoff(n) for n in range(1, 8)] == [5.0, 10.0, 20.0, 40.0, 80.0, 80.0, 80.0]


async def test_a_held_lease_runs_no_step(rig: Rig) -> None:
    lease = await rig.leases.acquire(rig.lease_key, "another-boot", 30)
    with pytest.raises(LeaseHeld):
        await rig.setup().run_once()
    assert not rig.emu.users
    await rig.leases.release(lease)


async def test_reseal_rewrites_the_row_under_the_new_secret_and_an_unopenable_row_needs_an_operator(rig: Rig) -> None:
    row = await rig.setup().run_once()
    rotated = ServiceRowStore(rig.inst.runtime.store, sealer("a-new-secret-0123456789abcdef", TEST_SECRET), rig.table)
    assert await rotated.reseal() == 1
    assert await rotated.reseal() == 0
    only_new = ServiceRowStore(rig.inst.runtime.store, sealer("a-new-secret-0123456789abcdef", ""), rig.table)
    assert await only_new.read() == row
    lost = rig.setup()
    lost.rows = ServiceRowStore(rig.inst.runtime.store, sealer("neither-secret-0123456789abcdef", ""), rig.table)
    lost.start()
    async with asyncio.timeout(10):
        await lost.wait_failure()
    assert lost.state.failure_kind == "needs_operator"
    await lost.stop()


async def test_agents_api_errors_have_librechats_shapes(rig: Rig) -> None:
    row = await rig.setup().run_once()
    async with httpx.AsyncClient(base_url=rig.url) as c:
        missing = await c.post("/api/agents/v1/chat/completions", json={})
        bad = await c.post("/api/agents/v1/chat/completions", json={}, headers={"Authorization": "Bearer sk-nope"})
        auth = {"Authorization": f"Bearer {row.api_key}"}
        no_model = await c.post("/api/agents/v1/chat/completions", json={"messages": []}, headers=auth)
        empty = await c.post("/api/agents/v1/chat/completions", json={"model": row.agent_id, "messages": []}, headers=auth)
        role = await c.post("/api/agents/v1/chat/completions", json={"model": row.agent_id, "messages": [{"role": "x"}]}, headers=auth)
        unknown = await c.post(
            "/api/agents/v1/chat/completions", json={"model": "agent_x", "messages": [{"role": "user", "content": "q"}]}, headers=auth
        )
        conv = await c.post(
            "/api/agents/v1/chat/completions",
            json={"model": row.agent_id, "messages": [{"role": "user", "content": "q"}], "conversation_id": "c"},
            headers=auth,
        )
        model = await c.get("/api/agents/v1/models/agent_x", headers=auth)
    assert missing.status_code == 401 and missing.json()["error"]["code"] == "missing_api_key"
    assert bad.status_code == 401 and bad.json()["error"] == {
        "message": "Invalid API key",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_api_key",
    }
    assert no_model.json()["error"]["message"] == "model (agent_id) is required"
    assert empty.json()["error"]["message"] == "messages array cannot be empty"
    assert role.status_code == 400 and role.json()["error"]["message"].startswith("messages[0].role must be one of:")
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "model_not_found"
    assert conv.status_code == 404 and conv.json()["error"]["message"] == "Conversation not found"
    assert model.status_code == 404 and model.json()["error"]["message"] == "Model not found: agent_x"
    with pytest.raises(LibreChatError) as info:
        await rig.client.login(EMAIL, "wrong")
    assert info.value.status == 404 and info.value.message == "Incorrect password."


async def test_reseal_on_a_store_the_assistant_never_set_up_rewrites_nothing(bench: Bench) -> None:
    rows = ServiceRowStore(bench.inst.runtime.store, sealer(TEST_SECRET, ""), f"absent_{uuid.uuid4().hex[:8]}")
    assert await rows.reseal() == 0

"""The TypeScript SDK's own tests (sdk/typescript/test/*.test.js, node's test runner) against a
live `loom up` this test starts on a temp data dir and a free port, with its assistant pointed
at the LibreChat emulator (tests/assistant/emulator.py) served from this process; and the
README's streamed-answer example (examples/typescript/stream.js), which needs that emulator.

The node tests read the stack from the environment: LOOM_URL, LOOM_TOKEN (the org's admin),
LOOM_ORG, LOOM_NAMESPACE, LOOM_DATA_DIR, LOOM_TEST_LOGIN_CODE (a one-time sign-in code for the
browser-session tests), LOOM_TEST_EMULATOR_URL (the emulator, whose /_test/state says
whether a streamed answer was aborted upstream) and LOOM_TEST_NATS_URL (the embedded
nats-server, which agents reach with their Loom token through the auth callout)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from loom_core.bus.natsserver import free_port
from loom_runner.http import HttpServer
from starlette.requests import Request
from starlette.responses import JSONResponse

from tests import loom_up
from tests.assistant.emulator import Emulator, Turn, greeting

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
SDK = ROOT / "sdk" / "typescript"
BIN = Path(sys.executable).parent
ORG, NS = "sdkts", "main"
# A person with a grant on one namespace alone: the assistant refuses an org-wide session.
PERSON, PERSON_NS = "user:ts-reader", "reading"
# Short, so a `[slow]` answer left running ends with the stream's loom.error event.
ANSWER_TTL_S = 15


async def scripted(turn: Turn) -> None:
    """The emulator's model, picked by a tag in the question: `[slow]` streams words until it is
    stopped (or runs past the answer's limit, ANSWER_TTL_S); `[help]` searches Loom's docs and
    cites the first hit; anything else greets."""
    question = str(turn.messages[-1].get("content", "")) if turn.messages else ""
    if "[slow]" in question:
        for i in range(ANSWER_TTL_S * 40):
            await turn.say(f"word{i} ")
            await asyncio.sleep(0.05)
        return
    if "[help]" in question:
        found = await turn.call("help.search", {"query": "support unsupported unchecked"})
        hit = found.body["hits"][0]
        await turn.say("Support is decided ")
        await turn.say(f"by a table {hit['citation']}.")
        return
    await greeting(turn)


@dataclass
class Stack:
    url: str
    token: str
    data: Path
    env: dict[str, str]
    emulator_url: str
    nats_url: str


@contextlib.asynccontextmanager
async def run_stack(data: Path) -> AsyncIterator[Stack]:
    """The emulator, then `loom up` on `data` with its assistant pointed at it, one org bootstrapped."""
    emu = Emulator(loom_url="", script=scripted)
    app = emu.app()

    async def state(_: Request) -> JSONResponse:
        return JSONResponse({"aborted": emu.aborted.is_set()})

    async def reset(_: Request) -> JSONResponse:
        emu.aborted.clear()
        return JSONResponse({})

    app.add_route("/_test/state", state, methods=["GET"])
    app.add_route("/_test/reset", reset, methods=["POST"])
    emulator = HttpServer(app)
    await emulator.start()
    emulator_url = f"http://127.0.0.1:{emulator.port}"
    port, nats_port = free_port(), free_port()
    url = f"http://127.0.0.1:{port}"
    emu.loom_url = url
    env = loom_up.loom_env(
        data,
        port,
        LOOM_NATS_PORT=str(nats_port),
        LOOM_ASSISTANT_LIBRECHAT_URL=emulator_url,
        LOOM_ASSISTANT_SETUP_RETRY_S="0.2",
        LOOM_ASSISTANT_ANSWER_TTL_S=str(ANSWER_TTL_S),
    )
    log = data / "loom-up.log"
    proc = loom_up.start(env, log)
    try:
        # In a thread: this loop keeps serving the emulator the starting Loom calls.
        await asyncio.to_thread(loom_up.wait_healthy, proc, url, log)
        token = await asyncio.to_thread(loom_up.bootstrap, env, ORG, NS)
        async with httpx.AsyncClient(base_url=url) as c:
            for _ in range(600):  # the assistant sets itself up in the emulator
                if (await c.get("/v1/assistant/models", headers={"Authorization": f"Bearer {token}"})).status_code == 200:
                    break
                await asyncio.sleep(0.1)
            else:
                pytest.fail("the assistant did not become ready: " + log.read_text()[-3000:])
        yield Stack(url, token, data, env, emulator_url, f"nats://127.0.0.1:{nats_port}")
    finally:
        await asyncio.to_thread(loom_up.stop, proc)
        await emulator.stop()


@pytest.fixture(scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    async with run_stack(tmp_path_factory.mktemp("sdk-ts-loom")) as s:
        yield s


async def login_code(stack: Stack, subject: str) -> str:
    """A one-time sign-in code for `subject` (who needs a grant in the org)."""
    link = await asyncio.create_subprocess_exec(
        str(BIN / "loom"), "admin", "login-link", "--org", ORG, "--subject", subject, env=stack.env, stdout=subprocess.PIPE
    )
    out, _ = await asyncio.wait_for(link.communicate(), 120)
    found = re.search(r"#code=(\S+)", out.decode())
    assert link.returncode == 0 and found, out.decode()
    return found.group(1)


def _env(stack: Stack, **extra: str) -> dict[str, str]:
    return {
        "PATH": f"{BIN}:/usr/local/bin:/usr/bin:/bin",
        "HOME": os.environ.get("HOME", "/tmp"),
        "LOOM_URL": stack.url,
        "LOOM_TOKEN": stack.token,
        "LOOM_ORG": ORG,
        "LOOM_NAMESPACE": NS,
        "LOOM_DATA_DIR": str(stack.data),
        **extra,
    }


async def test_the_node_suite_passes_against_a_live_loom(stack: Stack) -> None:
    assert shutil.which("node"), "node is needed for the TypeScript SDK's tests (apt-get install nodejs)"
    assert (SDK / "dist" / "index.js").exists(), "sdk/typescript/dist is missing: ./loom builds it (npm run build)"
    async with httpx.AsyncClient(base_url=stack.url, headers={"Authorization": f"Bearer {stack.token}"}) as c:
        for op, args in (
            ("namespace.create", {"name": PERSON_NS}),
            ("grants.set", {"namespace": PERSON_NS, "subject": PERSON, "role": "viewer"}),
        ):
            r = await c.post(f"/v1/{op}", json=args)
            assert r.status_code == 200, r.text
    env = _env(
        stack,
        LOOM_TEST_LOGIN_CODE=await login_code(stack, PERSON),
        LOOM_TEST_SESSION_NAMESPACE=PERSON_NS,
        LOOM_TEST_EMULATOR_URL=stack.emulator_url,
        LOOM_TEST_NATS_URL=stack.nats_url,
    )
    files = sorted(str(p.relative_to(SDK)) for p in (SDK / "test").glob("*.test.js"))
    assert files
    proc = await asyncio.create_subprocess_exec(
        "node", "--test", "--test-concurrency=1", *files, cwd=SDK, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 800)
    text = out.decode()
    print(text[-6000:])
    assert proc.returncode == 0, text[-8000:]
    assert re.search(r"^# fail 0$", text, re.M) and re.search(r"^# pass [1-9]", text, re.M), text[-3000:]


async def test_the_readme_streamed_answer_runs_against_the_emulator(stack: Stack) -> None:
    example = ROOT / "examples" / "typescript" / "stream.js"
    proc = await asyncio.create_subprocess_exec(
        "node", str(example), cwd=ROOT, env=_env(stack), stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 240)
    assert proc.returncode == 0, out.decode()
    assert "Hello! Ask me about this namespace." in out.decode()


def test_the_examples_type_check_against_the_sdk_s_declarations() -> None:
    """examples/typescript/*.js, checked by tsc (checkJs) against sdk/typescript/dist's .d.ts: a
    method, argument or field the SDK does not have fails here."""
    tsc = SDK / "node_modules" / ".bin" / "tsc"
    assert tsc.exists(), "sdk/typescript/node_modules is missing: ./loom installs it (npm ci)"
    done = subprocess.run(
        [str(tsc), "-p", "tsconfig.json"], cwd=ROOT / "examples" / "typescript", capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr

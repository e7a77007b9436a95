"""The README's first steps, run as written on a fresh data dir, then what a user does next
with that server: kill its nats-server child (Loom restarts it; /v1/health says degraded until
it is back) and Ctrl-C it during a long poll (the poll ends at once with a retryable 503 and
the process exits without a traceback)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from loom_core.bus.natsserver import free_port

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SECRET = "first-steps-secret-0123456789abcdef0123456789"


def first_steps_block() -> str:
    """The README's "First steps" block: examples/quickstart/first-steps.sh, which the README
    includes exactly (tests/docs/test_examples_included.py)."""
    return (ROOT / "examples" / "quickstart" / "first-steps.sh").read_text()


@dataclass
class Server:
    data: Path
    port: int
    pid: int
    output: Path
    token: str

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def children(pid: int, name: str) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)
            comm = fields[0].split("(", 1)[1]
            ppid = int(fields[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if ppid == pid and comm == name:
            found.append(int(stat.parent.name))
    return found


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    # A zombie still answers kill(0); its state says it is gone.
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"


@pytest.fixture(scope="module")
async def server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Server]:
    data = tmp_path_factory.mktemp("first-steps")
    port = free_port()
    # Verbatim but for the port: 8080 may be taken on a shared machine.
    block = first_steps_block().replace("localhost:8080", f"localhost:{port}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOM_")}
    env.update(LOOM_DATA_DIR=str(data), LOOM_HTTP_PORT=str(port), LOOM_JWT_SECRET=SECRET, LOOM_LOG_LEVEL="WARNING")
    output = data / "output.txt"
    with output.open("wb") as out:
        # The block leaves `./loom up` running in the background; its output lands here too.
        proc = await asyncio.create_subprocess_exec(
            "bash", "-euo", "pipefail", "-c", block + '\necho; echo "TOKEN=$LOOM_TOKEN"\n', cwd=ROOT, env=env, stdout=out, stderr=out
        )
        code = await asyncio.wait_for(proc.wait(), 300)
    text = output.read_text()
    assert code == 0, text[-3000:]
    pid = int((data / "loom-up.pid").read_text())
    token = re.search(r"^TOKEN=(\S+)$", text, re.M)
    assert token, text[-3000:]
    srv = Server(data, port, pid, output, token.group(1))
    yield srv
    if alive(pid):
        os.kill(pid, signal.SIGKILL)


async def test_readme_first_steps_run_as_written_on_a_fresh_data_dir(server: Server) -> None:
    text = server.output.read_text()
    whoami, _ = json.JSONDecoder().raw_decode(text[text.index('{"subject"') :])
    assert whoami["subject"] == "user:admin" and whoami["org"] == "acme" and whoami["namespace"] == "private"
    assert '{"ops":[' in text  # `curl -s localhost:8080/v1/ops | head`
    assert "Traceback" not in text


async def test_killed_nats_child_is_restarted_without_a_traceback_or_a_zombie(server: Server) -> None:
    # (The degraded health while it is down: tests/gateway/test_nats_child.py, deterministically.)
    (nats_pid,) = children(server.pid, "nats-server")
    os.kill(nats_pid, signal.SIGKILL)
    async with httpx.AsyncClient(base_url=server.base_url, timeout=10) as http:
        for _ in range(600):
            if "nats-server is back" in server.output.read_text():
                break
            await asyncio.sleep(0.05)
        health = (await http.get("/v1/health")).json()
        for _ in range(100):  # the bus connection reconnects on its own
            if health["status"] == "ok":
                break
            await asyncio.sleep(0.1)
            health = (await http.get("/v1/health")).json()
        whoami = await http.post("/v1/auth.whoami", headers={"Authorization": f"Bearer {server.token}"})
    assert health["status"] == "ok" and health["checks"]["nats_server"]["ok"] is True, health
    assert whoami.status_code == 200
    (restarted,) = children(server.pid, "nats-server")
    assert restarted != nats_pid and not alive(nats_pid)  # reaped: no zombie
    text = server.output.read_text()
    assert "Traceback" not in text
    assert text.count("nats-server child exited") == 1


async def test_ctrl_c_during_a_long_poll_answers_it_503_and_exits_cleanly(server: Server) -> None:
    headers = {"Authorization": f"Bearer {server.token}", "X-Loom-Agent": "poller"}
    async with httpx.AsyncClient(base_url=server.base_url, timeout=60, headers=headers) as http:
        registered = await http.post("/v1/inbox.register", json={"inbox": "poller"})
        assert registered.status_code == 200, registered.text
        poll = asyncio.ensure_future(http.post("/v1/task.pull", json={"inbox": "poller", "wait_seconds": 30}))
        await asyncio.sleep(1.0)  # the poll is waiting on the server
        assert not poll.done()
        started = time.monotonic()
        os.kill(server.pid, signal.SIGINT)
        answer = await poll
        answered = time.monotonic() - started
    assert answer.status_code == 503
    assert answer.json()["error"]["retryable"] is True
    for _ in range(200):
        if not alive(server.pid):
            break
        await asyncio.sleep(0.05)
    assert not alive(server.pid)
    # Not a speed check: the poll asked to wait 30 s, so an answer well inside that came from the
    # shutdown, not from the wait running out.
    assert answered < 15.0, answered
    assert "Traceback" not in server.output.read_text()

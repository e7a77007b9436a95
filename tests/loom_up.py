"""`loom up` run as a person runs it, for the suites that test Loom from outside its process (the
dashboard's browser suite, the docs' examples, the TypeScript SDK): a data dir and a free port,
Loom's own settings only (none of the caller's LOOM_*), waited for on /v1/health, an org
bootstrapped, and stopped with its process group (its nats-server child too).

Synchronous, so the dashboard's sync fixtures use it as it is; an async fixture runs the waits in
a thread (`asyncio.to_thread`), which keeps its event loop serving (an emulator the server calls)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent  # the venv the suite runs in, with its `loom`


def loom_env(data: Path, port: int, **settings: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOM_")}
    env.update(LOOM_DATA_DIR=str(data), LOOM_HTTP_PORT=str(port), LOOM_LOG_LEVEL="WARNING", **settings)
    return env


def start(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """`loom up` in a process group of its own (stop() ends its children with it)."""
    with log.open("ab") as out:
        return subprocess.Popen([str(BIN / "loom"), "up"], cwd=ROOT, env=env, stdout=out, stderr=out, start_new_session=True)


def wait_healthy(proc: subprocess.Popen[bytes], url: str, log: Path, within: float = 240.0) -> None:
    """Until /v1/health answers 200; `within` is a bound on failure (a loaded machine starts slowly)."""
    deadline = time.monotonic() + within
    while True:
        assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
        try:
            if httpx.get(f"{url}/v1/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, "loom up did not answer /v1/health: " + log.read_text(errors="replace")[-3000:]
        time.sleep(0.2)


def bootstrap(env: dict[str, str], org: str, namespace: str) -> str:
    """`loom admin bootstrap`: the org's admin token it prints."""
    done = subprocess.run(
        [str(BIN / "loom"), "admin", "bootstrap", "--org", org, "--namespace", namespace],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.strip().splitlines()[-1]


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGINT to the group (a clean stop), SIGKILL if it has not stopped in 30 s."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGINT)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)

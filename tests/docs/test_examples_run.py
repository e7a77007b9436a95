"""The CI runner of the docs' examples: one `loom up` on a temp data dir and a free port, one
org bootstrapped, then every file under examples/ (discovered: files added by anyone are run
too), each in a fresh namespace with LOOM_URL, LOOM_TOKEN, LOOM_ORG and LOOM_NAMESPACE set. A
file that says `# example-needs: <what>` is skipped, saying what it needs."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from loom_core.bus.natsserver import free_port

from tests.docs.examples import ROOT, example_files, needs

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

BIN = Path(sys.executable).parent


@dataclass
class Loom:
    url: str
    token: str
    org: str
    data_dir: Path


@pytest.fixture(scope="module")
async def loom(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Loom]:
    data, port = tmp_path_factory.mktemp("examples-loom"), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOM_")}
    # No LOOM_JWT_SECRET: the data dir keeps its own, so an operator's CLI example finds it there.
    env.update(LOOM_DATA_DIR=str(data), LOOM_HTTP_PORT=str(port), LOOM_LOG_LEVEL="WARNING")
    log = (data / "loom-up.log").open("wb")
    proc = await asyncio.create_subprocess_exec(str(BIN / "loom"), "up", env=env, stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(base_url=url) as c:
            for _ in range(1800):  # a bound on failure: a loaded machine starts slowly
                assert proc.returncode is None, (data / "loom-up.log").read_text()[-3000:]
                try:
                    if (await c.get("/v1/health", timeout=1)).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.1)
        boot = await asyncio.create_subprocess_exec(
            str(BIN / "loom"), "admin", "bootstrap", "--org", "examples", "--namespace", "main", env=env, stdout=subprocess.PIPE
        )
        out, _ = await asyncio.wait_for(boot.communicate(), 120)
        assert boot.returncode == 0
        yield Loom(url, out.decode().strip(), "examples", data)
    finally:
        proc.send_signal(2)
        try:
            await asyncio.wait_for(proc.wait(), 30)
        except TimeoutError:
            proc.kill()
            await proc.wait()
        log.close()


def command(path: Path) -> list[str] | None:
    if path.suffix == ".sh":
        return ["bash", str(path)]
    if path.suffix == ".py":
        return [sys.executable, str(path)]
    if path.suffix == ".js":
        # ESM, importing @loom-coord/sdk through examples/typescript/node_modules (the install step links it).
        return ["node", str(path)]
    return None  # TypeScript source needs a build step: examples are .js


def test_examples_are_discovered() -> None:
    assert [p for p in example_files() if needs(p) is None and command(p) is not None]


@pytest.mark.parametrize("path", example_files(), ids=lambda p: p.relative_to(ROOT / "examples").as_posix())
async def test_example_runs_as_written(path: Path, loom: Loom) -> None:
    what = needs(path)
    if what is not None:
        pytest.skip(f"{path.relative_to(ROOT)} needs {what}")
    argv = command(path)
    if argv is None or shutil.which(argv[0]) is None:
        pytest.skip(f"{path.relative_to(ROOT)}: no runner for {path.suffix} files here")
    namespace = f"ex-{uuid.uuid4().hex[:10]}"
    async with httpx.AsyncClient(base_url=loom.url, headers={"Authorization": f"Bearer {loom.token}"}) as c:
        created = await c.post("/v1/namespace.create", json={"name": namespace})
        assert created.status_code == 200, created.text
    env = {
        "PATH": f"{BIN}:/usr/local/bin:/usr/bin:/bin",
        "HOME": os.environ.get("HOME", "/tmp"),
        "LOOM_URL": loom.url,
        "LOOM_TOKEN": loom.token,
        "LOOM_ORG": loom.org,
        "LOOM_NAMESPACE": namespace,
        # An operator's example runs the CLI beside the server (`loom admin login-link`): the data dir finds it.
        "LOOM_DATA_DIR": str(loom.data_dir),
    }
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(*argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out, _ = await asyncio.wait_for(proc.communicate(), 240)
    print(f"{path.relative_to(ROOT)}: {time.monotonic() - started:.1f} s\n{out.decode()[-2000:]}")
    assert proc.returncode == 0, f"{path.relative_to(ROOT)} failed:\n{out.decode()[-4000:]}"

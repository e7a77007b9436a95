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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from loom_core.bus.natsserver import free_port

from tests import loom_up
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
def loom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Loom]:
    data, port = tmp_path_factory.mktemp("examples-loom"), free_port()
    # No LOOM_JWT_SECRET: the data dir keeps its own, so an operator's CLI example finds it there.
    env = loom_up.loom_env(data, port)
    log = data / "loom-up.log"
    proc = loom_up.start(env, log)
    url = f"http://127.0.0.1:{port}"
    try:
        loom_up.wait_healthy(proc, url, log, within=180)
        yield Loom(url, loom_up.bootstrap(env, "examples", "main"), "examples", data)
    finally:
        loom_up.stop(proc)


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

"""A process that ran the embedded engine ends through `exit_process` past chDB's native teardown
(loom_core/process.py), with its exit code and everything it wrote; one that did not, as usual.
(The teardown's crash needs a whole stack's state to show: docs/benchmarks.md, session 30, has
the runs that measured it.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from loom_core.process import exit_status

ENGINE_RAN = """
import asyncio, logging, sys
from pathlib import Path
from loom_core.process import exit_process
from loom_core.store.embedded import EmbeddedStore

async def work() -> None:
    store = EmbeddedStore.open(Path(sys.argv[1]), "loom_exit")
    await store.execute("CREATE DATABASE IF NOT EXISTS loom_exit")
    await store.execute("CREATE TABLE loom_exit.t (k UInt64, v String) ENGINE = MergeTree ORDER BY k")
    for batch in range(20):  # parts to merge: the engine's background threads have work at the end
        await store.insert("{db}.t", [{"k": batch * 100 + i, "v": "x" * 50} for i in range(100)])
    assert (await store.query("SELECT count() AS n FROM {db}.t"))[0]["n"] == 2000
    await store.close()

asyncio.run(work())
logging.basicConfig(level=logging.INFO, stream=sys.stderr)
logging.getLogger("exit").info("logged before the end")
print("written before the end", end="")  # no newline: left in the buffer for the exit to flush
exit_process(3)
"""

NO_ENGINE = """
from loom_core.process import embedded_engine_started, exit_process
assert not embedded_engine_started()
try:
    exit_process(4)
except SystemExit as ended:  # as sys.exit: Python's own exit runs, handlers and all
    print("raised", ended.code)
    raise
"""


def test_exit_status_is_the_status_python_gives_a_system_exit(capsys: pytest.CaptureFixture[str]) -> None:
    assert [exit_status(SystemExit(c)) for c in (None, 0, 3)] == [0, 0, 3]
    assert exit_status(SystemExit("loom: refused")) == 1
    assert capsys.readouterr().err == "loom: refused\n"


def run(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120)


def test_a_process_that_ran_the_engine_ends_with_its_code_and_its_output(tmp_path: Path) -> None:
    ended = run(ENGINE_RAN, str(tmp_path / "chdb"))
    assert ended.returncode == 3, ended.stderr[-2000:]
    assert ended.stdout == "written before the end"
    assert "logged before the end" in ended.stderr


def test_a_process_without_the_engine_exits_as_python_does() -> None:
    ended = run(NO_ENGINE)
    assert ended.returncode == 4, ended.stderr
    assert ended.stdout.strip() == "raised 4"

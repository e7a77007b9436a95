"""The dashboard's own checks, from the README's test command: TypeScript strict over the app
and the SDK core (`npm run typecheck`: `tsc -b`, incremental, so after the install's build,
which ran the same check, it rechecks only the sources changed since and re-reports any error
it recorded), and its component tests under Vitest (`npm test`: the
grouping by next step, the moves each group allows, the Markdown renderer, and the Ask AI
panel's citation numbering, answer Markdown, labels, reasons, context line, storage expiry and
asking again)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

FRONTEND = Path(__file__).resolve().parents[2] / "frontend"


def _npm(*args: str) -> subprocess.CompletedProcess[str]:
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail("npm is missing: the install step builds the dashboard with it (apt-get install nodejs npm)")
    return subprocess.run([npm, *args], cwd=FRONTEND, capture_output=True, text=True, timeout=600)


@pytest.mark.slow  # tsc over the dashboard and the TypeScript SDK, a node process
def test_typescript_is_strict_and_clean() -> None:
    done = _npm("run", "typecheck")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]


@pytest.mark.slow  # vitest, a node process
def test_component_tests_pass() -> None:
    done = _npm("test", "--", "--reporter=verbose")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert " passed" in done.stdout and " failed" not in done.stdout, done.stdout[-4000:]

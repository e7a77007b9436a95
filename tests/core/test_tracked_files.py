"""Nothing machine-local is tracked: a fresh clone carries no lock, cache, venv, data dir or
local settings file from someone's machine, and `git status` stays clean after `./loom up`."""

from __future__ import annotations

import fnmatch
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# What a run leaves in a working tree (./loom, pytest, mypy, ruff, hypothesis, loom up).
MACHINE_LOCAL = [".venv.lock", ".venv/*", ".venv-uv/*", "*/__pycache__/*", ".loom-data/*", ".hypothesis/*", ".env", "*.pid", ".coverage"]


def tracked() -> list[str]:
    try:
        out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return out.splitlines()


def test_no_machine_local_file_is_tracked() -> None:
    found = [f for f in tracked() if any(fnmatch.fnmatch(f, p) or fnmatch.fnmatch("/" + f, "*/" + p) for p in MACHINE_LOCAL)]
    assert found == []


def test_machine_local_files_are_ignored() -> None:
    for path in (".venv.lock", ".loom-data/loom-up.pid", ".hypothesis/examples/x", ".env"):
        r = subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT)
        assert r.returncode == 0, f"{path} is not ignored"

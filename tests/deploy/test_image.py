"""The Dockerfile as data (no Docker engine here): its stages, its runtime stage's user, entry
point and contents, the lock its runtime venv installs from, and the build context."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

from tests.pyast import parse_file

ROOT = Path(__file__).resolve().parents[2]
COMPILERS = re.compile(r"\b(gcc|g\+\+|clang|cc|make|build-essential|cmake|rustc|cargo|grpc_tools|grpcio-tools|protoc)\b")


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out: list[tuple[str, str]] = []
    buf = ""
    for line in text.splitlines():
        if not buf and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            buf += line.rstrip()[:-1] + " "
            continue
        buf += line
        word, _, rest = buf.strip().partition(" ")
        out.append((word.upper(), rest.strip()))
        buf = ""
    return out


def stages() -> dict[str, list[tuple[str, str]]]:
    result: dict[str, list[tuple[str, str]]] = {}
    current = ""
    for ins, args in instructions((ROOT / "Dockerfile").read_text()):
        if ins == "FROM":
            m = re.match(r"(\S+)\s+AS\s+(\S+)", args, re.I)
            assert m, f"every stage is named: FROM {args}"
            current = m.group(2)
            result[current] = [(ins, args)]
        elif current:
            result[current].append((ins, args))
    return result


def runtime_lock() -> list[str]:
    """The lock the runtime venv installs: the build stage's own grep, run on this checkout."""
    [run] = [a for i, a in stages()["build"] if i == "RUN" and "runtime.lock" in a and "grep -v" in a]
    grep = run.split(" > runtime.lock", 1)[0].strip()
    out = subprocess.run(["bash", "-c", grep], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    names = (re.match(r"[A-Za-z0-9_.-]+", line) for line in out.splitlines() if line.strip() and not line.startswith("#"))
    return [m.group(0).lower() for m in names if m]


def test_the_image_has_a_build_stage_and_a_runtime_stage_last() -> None:
    s = stages()
    assert list(s) == ["build", "runtime"]
    assert all(args.startswith("python:${PYTHON_VERSION}-slim") for ins, args in (s["build"][0], s["runtime"][0]))


def test_the_runtime_stage_runs_loom_serve_as_a_non_root_user() -> None:
    rt = dict(stages()["runtime"])
    user = rt["USER"]
    uid = user.split(":")[0]
    assert uid.isdigit() and int(uid) >= 1000, "a numeric non-root uid, so runAsNonRoot can check it"
    assert json.loads(rt["ENTRYPOINT"]) == ["loom", "serve"]
    assert json.loads(rt["CMD"]) == ["--gateway", "--planes", "identity"]
    assert "LOOM_DATA_DIR=/var/lib/loom" in rt["ENV"] and json.loads(rt["VOLUME"]) == ["/var/lib/loom"]
    assert "HOME=/tmp" in rt["ENV"] and "PYTHONDONTWRITEBYTECODE=1" in rt["ENV"], "nothing written beside the code: root fs read-only"


def test_the_runtime_stage_has_no_compiler_and_copies_the_venv_generated_code_and_docs() -> None:
    rt = stages()["runtime"]
    for ins, args in rt:
        if ins == "RUN":
            assert "apt-get install" not in args and "pip install" not in args, args
            assert not COMPILERS.search(args), args
        if ins == "COPY":
            assert "/opt/protoc" not in args, "the protobuf compiler's venv stays in the build stage"
    copied = {args.split()[-1] for ins, args in rt if ins == "COPY" and args.startswith("--from=build")}
    assert {"/opt/loom", "/app/proto", "/app/core", "/app/models", "/app/services", "/app/docs"} <= copied
    # The assistant plane reads its agent definition from the tree (loom_assistant.plane.AGENT_YAML).
    assert "/app/librechat" in copied
    build = " ".join(a for i, a in stages()["build"] if i == "RUN")
    assert "scripts/gen_proto.py" in build and "compileall" in build


@pytest.mark.slow  # parses every module of Loom's packages and walks the lock's dependency closure
def test_the_runtime_venv_leaves_out_test_lint_and_compiler_packages_but_has_every_import_of_loom() -> None:
    lock = set(runtime_lock())
    assert not lock & {
        "pytest",
        "pytest-asyncio",
        "pytest-timeout",
        "pytest-xdist",
        "execnet",
        "ruff",
        "mypy",
        "uv",
        "grpcio-tools",
        "helm-python-sdk",
    }
    # Every third-party module imported by Loom's packages (not tests, not bench) comes from a
    # distribution in the runtime lock (or from one of those distributions' own dependencies).
    dists = packages_distributions()
    needed: set[str] = set()
    for base in ("core", "models", "services", "sdk/python", "proto"):
        for path in (ROOT / base).rglob("*.py"):
            if "_pb2" in path.name or "/tests/" in str(path):
                continue
            for node in ast.walk(parse_file(path)):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                for name in names:
                    top = name.split(".")[0]
                    # _typeshed is typeshed's stub-only module, imported under TYPE_CHECKING alone.
                    if top in sys.stdlib_module_names or top == "_typeshed" or top.startswith(("loom", "__future__")):
                        continue
                    needed.update(d.lower() for d in dists.get(top, [top]))
    installed = _closure(lock)
    missing = sorted(n for n in needed if n.replace("_", "-") not in installed)
    assert not missing, f"imported by Loom but not installed by the runtime lock: {missing}"
    assert "grpcio-tools" not in installed


def _closure(roots: set[str]) -> set[str]:
    """The lock's distributions and everything they require, as installed in this venv."""
    from importlib.metadata import PackageNotFoundError, requires

    seen: set[str] = set()
    todo = [r.replace("_", "-") for r in roots]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            reqs = requires(name) or []
        except PackageNotFoundError:
            continue
        for req in reqs:
            if "extra ==" in req:
                continue
            m = re.match(r"[A-Za-z0-9_.-]+", req)
            if m:
                todo.append(m.group(0).lower().replace("_", "-").replace(".", "-"))
    return seen


def test_the_build_context_leaves_out_secrets_tests_and_screenshots_and_keeps_what_the_build_copies() -> None:
    ignored = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines() if line.strip() and not line.startswith("#")]
    for pattern in (".git", ".venv", ".env", "tests", "bench", "docs/**/*.png", "**/__pycache__"):
        assert pattern in ignored, pattern
    copied = [args.split()[0] for ins, args in stages()["build"] if ins == "COPY"]
    for src in copied:
        assert (ROOT / src).exists(), src
        assert src.rstrip("/") not in ignored, f"{src} is copied but ignored"
    assert not any(p in ignored for p in ("docs", "docs/", "proto", "core", "models", "services"))

"""A doc (README.md, docs/, examples/) names only ops, MCP tools, settings and error codes that
exist. The sets come from the op catalog, the settings classes and the error table, and, for
names of the same shape that are something else (a Prometheus metric, a package, a NATS stream,
a variable a test suite reads), from the code that defines them: never a hand list."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import grpc
import pytest
from loom_core.catalog import load_catalog
from loom_core.errors import ErrorCode
from loom_core.settings import setting_names
from loom_gateway.mcp import tool_name

from tests.docs.examples import EXAMPLE_ENV, ROOT, doc_pages, example_files

CATALOG = load_catalog()
GROUPS = {op.group for op in CATALOG.ops.values()}
TOOLS = {tool_name(name) for name in CATALOG.ops}

OP = re.compile(r"(?<![\w./-])([a-z][a-z_]*\.[a-z][a-z_]*)(?![\w(/-]|\.[a-z])")
TOOL = re.compile(r"\bloom_[a-z][a-z0-9_]*\b")
SETTING = re.compile(r"\bLOOM_[A-Z0-9_]+\b")
CODE = re.compile(r"`([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)`")


def source_files() -> list[Path]:
    """The tree's code and configuration (what the docs describe), not the docs, examples or this check."""
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.splitlines()
    skip = ("docs/", "examples/", "tests/docs/", "README.md")
    return [ROOT / f for f in listed if not f.startswith(skip) and not f.endswith(".md") and (ROOT / f).is_file()]


def source_tokens() -> tuple[set[str], set[str], set[str]]:
    """Names the code itself uses: loom_* identifiers (packages, metrics, tables), LOOM_*
    variables read outside the settings classes (the SDK, the `loom` script, test suites that
    need a real server), upper-case identifiers (stream names, secret keys), and the dotted
    keys of the deployment files (Helm values such as `assistant.enabled`) and the names of
    `loom doctor`'s checks (`policy.mode`, in the doctor modules that define them) and of audit
    row kinds (`"kind": "policy.widened"` in a dict, `kind="policy.widened"` in a typed row)."""
    idents: set[str] = set()
    env: set[str] = set()
    deploy_keys: set[str] = set()
    for path in source_files():
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        idents.update(TOOL.findall(text))
        env.update(SETTING.findall(text))
        idents.update(re.findall(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b", text))
        if path.is_relative_to(ROOT / "deploy"):
            deploy_keys.update(re.findall(r"\b[a-z][a-zA-Z_]*\.[a-z][a-zA-Z_]*\b", text))
        deploy_keys.update(re.findall(r"(?:\"kind\": |\bkind=)\"([a-z][a-z_]*\.[a-z][a-z_]*)\"", text))
        if path.name == "doctor.py":
            deploy_keys.update(re.findall(r"\"([a-z][a-z_]*\.[a-z][a-z_]*)\"", text))
    return idents, env, deploy_keys


IDENTS, ENV_IN_CODE, DEPLOY_KEYS = source_tokens()
# A module path (`assistant.service`: loom_assistant/service/) is not an op either.
MODULES = {f"{pkg.name.removeprefix('loom_')}.{mod.stem}" for pkg in ROOT.glob("services/*/loom_*") for mod in pkg.iterdir()}
# A file name (`help.md`, `memory.py`) is not an op: every suffix a tracked file has.
SUFFIXES = {
    Path(f).suffix.lstrip(".") for f in subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split()
}
SETTINGS = set(setting_names()) | ENV_IN_CODE | set(EXAMPLE_ENV)
CODES = {c.value for c in ErrorCode} | {s.name for s in grpc.StatusCode}


def texts() -> list[Path]:
    return [*doc_pages(), *example_files()]


def unknown_names(text: str) -> list[str]:
    found = []
    for name in OP.findall(text):
        group, leaf = name.split(".", 1)
        if group in GROUPS and name not in CATALOG.ops and leaf not in SUFFIXES and name not in DEPLOY_KEYS | MODULES:
            found.append(f"op {name}")
    for name in TOOL.findall(text):
        metric = re.sub(r"_(bucket|count|sum|created)$", "", name)  # a Prometheus histogram's series
        if name not in TOOLS and name not in IDENTS and metric not in IDENTS:
            found.append(f"MCP tool {name}")
    for name in SETTING.findall(text):
        if name not in SETTINGS and not (name.endswith("_") and any(s.startswith(name) for s in SETTINGS)):
            found.append(f"setting {name}")
    for name in CODE.findall(text):
        if not name.startswith("LOOM_") and name not in CODES and name not in IDENTS:
            found.append(f"error code {name}")
    return sorted(set(found))


@pytest.mark.parametrize("path", texts(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_a_doc_names_only_what_exists(path: Path) -> None:
    assert unknown_names(path.read_text()) == []


def test_the_check_catches_each_kind() -> None:
    text = "call task.nope_nope as loom_task_nope with LOOM_NO_SUCH_SETTING and get `NO_SUCH_CODE`"
    assert unknown_names(text) == [
        "MCP tool loom_task_nope",
        "error code NO_SUCH_CODE",
        "op task.nope_nope",
        "setting LOOM_NO_SUCH_SETTING",
    ]
    assert unknown_names("task.create as loom_task_create, LOOM_HTTP_PORT, `VALIDATION_FAILED`, loom_core") == []

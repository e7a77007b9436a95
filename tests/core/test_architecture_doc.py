"""docs/architecture.md's op paths name files and functions that exist.

The table under "One op of each plane, proto to store" gives, for one op of every plane, its
path proto → handler → service → domain → store. Each backticked path must exist (a `.proto`
under proto/loom_api/<plane>/v1/, `loom_core/...` under core/, anything else under the plane's
package), and a backticked name right after a path (`RuleService.set`, `parse_rule`, the RPC
after the `.proto`) must be defined in that file.
"""

from __future__ import annotations

import ast
import importlib
import re
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from tests.pyast import parse_file

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "architecture.md"
SECTION = "### One op of each plane, proto to store"
# A backticked path, then (only blanks between) a backticked name defined in it.
PAIR = re.compile(r"`([\w./]+\.(?:py|proto))`(?:\s+`([A-Za-z_][\w.]*)`)?")
PATH = re.compile(r"`([\w./]+\.(?:py|proto)|[\w./]+/)`")


def _rows() -> dict[str, str]:
    text = DOC.read_text()
    assert SECTION in text, f"docs/architecture.md lost its section {SECTION!r}"
    rows: dict[str, str] = {}
    for line in text.split(SECTION, 1)[1].split("\n## ", 1)[0].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0] not in ("plane", "") and not set(cells[0]) <= {"-"}:
            rows[cells[0]] = cells[2]
    return rows


def _plane_packages() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for ep in entry_points(group="loom.planes"):
        mod = importlib.import_module(ep.value.split(":")[0].split(".")[0])
        assert mod.__file__ is not None
        out[ep.name] = Path(mod.__file__).parent
    gateway = importlib.import_module("loom_gateway")
    assert gateway.__file__ is not None
    out["identity"] = Path(gateway.__file__).parent  # identity lives in the gateway package
    return out


def _resolve(plane: str, pkg: Path, path: str) -> Path:
    if path.endswith(".proto"):
        return REPO / "proto" / "loom_api" / plane / "v1" / path
    if path.startswith("loom_core/"):
        return REPO / "core" / path
    return pkg / path


def _defines(file: Path, name: str) -> bool:
    if file.suffix == ".proto":
        return re.search(rf"\brpc\s+{re.escape(name)}\s*\(", file.read_text()) is not None
    tree = parse_file(file)
    scope: list[ast.stmt] = tree.body
    for part in name.split("."):
        found = next(
            (n for n in scope if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and n.name == part),
            None,
        )
        if found is None:
            return False
        scope = found.body
    return True


def _snake(rpc: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", rpc).lower()


def test_the_op_path_table_covers_every_plane() -> None:
    assert set(_rows()) == set(_plane_packages())


@pytest.mark.parametrize("plane", sorted(_plane_packages()))
def test_every_path_and_name_in_a_planes_op_path_exists(plane: str) -> None:
    pkg = _plane_packages()[plane]
    path_cell = _rows()[plane]
    missing = [p for p in PATH.findall(path_cell) if not _resolve(plane, pkg, p).exists()]
    assert missing == [], f"{plane}: docs/architecture.md names paths that do not exist: {missing}"
    undefined = [f"{p} {name}" for p, name in PAIR.findall(path_cell) if name and not _defines(_resolve(plane, pkg, p), name)]
    assert undefined == [], f"{plane}: docs/architecture.md names what these files do not define: {undefined}"


@pytest.mark.parametrize("plane", sorted(_plane_packages()))
def test_each_op_path_goes_proto_handler_service_domain_store(plane: str) -> None:
    steps = [s.strip() for s in _rows()[plane].split("→")]
    pairs = [PAIR.findall(s) for s in steps]
    first = pairs[0]
    assert first and first[0][0].endswith(".proto") and first[0][1], f"{plane}: the path starts at the proto's RPC"
    rpc = first[0][1]
    handler = pairs[1][0]
    assert handler[0].endswith("handlers.py"), f"{plane}: the second step is handlers.py"
    assert handler[1].rsplit(".", 1)[-1] == _snake(rpc), f"{plane}: the handler is named after the RPC {rpc}"
    rest = " ".join(steps[2:])
    for layer in ("service", "domain", "store"):
        assert re.search(rf"\b{layer}[/.]", rest), f"{plane}: the path names no {layer} step"


WALK = "## One op through every door: `task.claim`"
# A repo-relative path (it has a directory and a file ending), backticked.
REPO_PATH = re.compile(r"`((?:core|services|sdk|proto)/[\w./-]+\.(?:py|proto|ts))`")
DOORS = ("**REST.**", "**gRPC.**", "**MCP.**", "**SDK.**", "**NATS.**", "**The plane.**")


def test_the_task_claim_walk_covers_every_door_and_names_files_that_exist() -> None:
    text = DOC.read_text()
    assert WALK in text, f"docs/architecture.md lost its section {WALK!r}"
    walk = text.split(WALK, 1)[1].split("\n## ", 1)[0]
    assert [d for d in DOORS if d not in walk] == []
    named = REPO_PATH.findall(walk)
    assert len(named) >= 20, named
    assert [p for p in named if not (REPO / p).is_file()] == []

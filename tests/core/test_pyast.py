"""tests/pyast.py, the source readers' `ast.parse`, once CPython 3.11's AST bug has struck a
worker: every file of Loom's source (proto/ and models/ too) comes from one child that parses it
all, and a file outside it from a child of its own, never the whole source again."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests import pyast

ROOT = Path(__file__).resolve().parents[2]


def test_after_the_bug_the_source_is_parsed_in_one_child_and_a_file_outside_it_alone(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def struck(*args: Any, **kwargs: Any) -> ast.Module:
        raise SystemError("AST constructor recursion depth mismatch")

    children: list[list[str]] = []
    run = subprocess.run

    def counted(cmd: list[str], **kwargs: Any) -> Any:
        children.append(cmd[3:])  # [python, -c, program, *roots, key]
        return run(cmd, **kwargs)

    monkeypatch.setattr(pyast, "_parsed_elsewhere", {})
    monkeypatch.setattr(pyast, "_roots_parsed_elsewhere", set())
    monkeypatch.setattr(pyast, "_parsed_here", {})
    monkeypatch.setattr(pyast.ast, "parse", struck)
    monkeypatch.setattr(pyast.subprocess, "run", counted)

    sources = [
        *sorted((ROOT / "core").rglob("*.py"))[:3],
        *sorted((ROOT / "proto").rglob("*.py"))[:3],
        *sorted((ROOT / "models").rglob("*.py"))[:1],
    ]
    trees = [pyast.parse_file(p) for p in sources]
    assert len(children) == 1, "Loom's source is parsed in one child"
    assert all(isinstance(t, ast.Module) for t in trees)

    sample = tmp_path / "sample.py"
    sample.write_text("import json\n")
    tree = pyast.parse_file(sample)
    assert len(children) == 2
    assert children[1] == [str(sample.resolve())], "a file outside the source is parsed alone"
    assert isinstance(tree.body[0], ast.Import) and tree.body[0].names[0].name == "json"

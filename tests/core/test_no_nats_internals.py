"""No module of core or a plane touches nats-py's private internals (issue 28): nats-py is pinned,
but its private names change without notice, and Loom speaks to NATS through its public API and
the public NATS / JetStream wire protocols (bus/jspublish.py, bus/batched.py, bus/direct.py).

The scan: every private name nats-py defines (a `_name` function, method, attribute or module
constant) is refused in core/ and services/ as an attribute (`x._name`, or `self._name` in a
subclass of a nats-py class), a `getattr`/`setattr`/`hasattr` string, or an import."""

from __future__ import annotations

import ast
from pathlib import Path

import nats

from tests.pyast import parse_file

ROOT = Path(__file__).resolve().parents[2]
NATS = Path(nats.__file__).parent


def _private_names() -> set[str]:
    names: set[str] = set()
    for path in NATS.rglob("*.py"):
        for node in ast.walk(parse_file(path, package=NATS)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Attribute):
                names.add(node.attr)
            elif isinstance(node, ast.Name):
                names.add(node.id)
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def _nats_names(nodes: list[ast.AST]) -> set[str]:
    """The names a module imports from nats-py (classes it may subclass)."""
    out: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "nats":
            out.update(a.asname or a.name for a in node.names)
    return out


def _own_names(nodes: list[ast.AST]) -> set[str]:
    """The private names a module defines itself (its functions, methods and `self._x` attributes)."""
    out: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            out.add(node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.add(node.value)  # __slots__ entries
    return out


def _touches(path: Path, private: set[str]) -> list[str]:
    nodes = list(ast.walk(parse_file(path)))  # walked once: ast.walk is most of the scan's CPU
    from_nats = _nats_names(nodes)
    found: list[str] = []
    nats_classes: list[ast.ClassDef] = [
        c for c in nodes if isinstance(c, ast.ClassDef) and any(isinstance(b, ast.Name) and b.id in from_nats for b in c.bases)
    ]
    in_nats_class = {id(n) for c in nats_classes for n in ast.walk(c)}
    own = _own_names(nodes)
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "nats":
            found += [f"{node.lineno}: import {a.name}" for a in node.names if a.name.startswith("_")]
        elif isinstance(node, ast.Attribute) and node.attr in private:
            if id(node) in in_nats_class or node.attr not in own:
                found.append(f"{node.lineno}: .{node.attr}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr")
            and len(node.args) > 1
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value in private
        ):
            found.append(f"{node.lineno}: {node.func.id}(..., {node.args[1].value!r})")
    return found


def test_no_module_touches_nats_py_private_internals() -> None:
    private = _private_names()
    assert {"_resp_map", "_flush_pending", "_pending_queue", "_nms", "_nc"} <= private  # the scan sees nats-py
    files = [*ROOT.joinpath("core/loom_core").rglob("*.py"), *ROOT.joinpath("services").glob("*/loom_*/**/*.py")]
    found = {}
    for path in files:
        rel = path.relative_to(ROOT).as_posix()
        if hits := _touches(path, private):
            found[rel] = hits
    assert found == {}


def test_the_scan_sees_what_it_refuses(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from nats.aio.client import Client, _SUBJECT_INVALID_RE\n"
        "from nats.js.client import JetStreamContext\n"
        "class Mine(JetStreamContext):\n"
        "    def f(self):\n"
        "        return self._nc\n"
        "class Other:\n"
        "    def g(self, nc: Client):\n"
        "        self._closed = True  # its own attribute, though nats-py has one of that name\n"
        "        return nc._resp_map, getattr(nc, '_ps', None), self._closed\n"
    )
    assert _touches(sample, _private_names()) == ["1: import _SUBJECT_INVALID_RE", "5: ._nc", "9: ._resp_map", "9: getattr(..., '_ps')"]


#: nats-py's settle calls that FastStream's message API names otherwise (`nack`, `reject`): a call of
#: one of these settles a nats-py message behind FastStream's back.
NATS_ONLY_SETTLES = ("nak", "term")


def _settles_behind_faststream(path: Path) -> list[str]:
    return [
        f"{node.lineno}: .{node.func.attr}()"
        for node in ast.walk(parse_file(path))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in NATS_ONLY_SETTLES
    ]


def test_consumers_settle_messages_through_faststreams_message_api() -> None:
    """Acks, naks and terms go through FastStream's `NatsMessage` / `NatsBatchMessage` (issue 28)."""
    files = [*ROOT.joinpath("core/loom_core").rglob("*.py"), *ROOT.joinpath("services").glob("*/loom_*/**/*.py")]
    found = {path.relative_to(ROOT).as_posix(): hits for path in files if (hits := _settles_behind_faststream(path))}
    assert found == {}


def test_the_settle_scan_sees_a_nats_py_nak(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("async def f(msg, batch):\n    await msg.nak(delay=5)\n    await batch.nack()\n    await msg.term()\n")
    assert _settles_behind_faststream(sample) == ["2: .nak()", "4: .term()"]

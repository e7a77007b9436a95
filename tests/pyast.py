"""`ast.parse` for the tests that read Loom's source, immune to CPython 3.11's AST recursion-depth
bug (gh-106905, fixed in later releases): once an AST conversion elsewhere in the process ended
in an exception, every later `ast.parse` may raise `SystemError: AST constructor recursion depth
mismatch`. Then the source is parsed in a fresh interpreter instead (all of it at once, pickled
back: AST nodes pickle), so a test's verdict never depends on what ran before it.

A tree is parsed once per process (keyed by the file's mtime and size, so a rewritten sample
file is parsed again): several modules scan all of core/ and services/ (~1 CPU-s a pass), and
they only read the trees."""

from __future__ import annotations

import ast
import pickle
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_CHILD = """
import ast, pickle, sys
from pathlib import Path
trees = {}
for arg in sys.argv[1:]:
    for path in ([Path(arg)] if arg.endswith(".py") else [p for p in Path(arg).rglob("*.py") if not {".venv", "node_modules"} & set(p.parts)]):
        trees[str(path.resolve())] = ast.parse(path.read_text(), str(path))
sys.stdout.buffer.write(pickle.dumps(trees))
"""
_LOOM_ROOTS = ("core", "services", "sdk", "proto", "models")
_parsed_elsewhere: dict[str, ast.Module] = {}
_roots_parsed_elsewhere: set[str] = set()
_parsed_here: dict[tuple[str, int, int], ast.Module] = {}


def parse_file(path: Path, package: Path | None = None) -> ast.Module:
    """`path`'s tree; `package` names the folder `path` belongs to when it is not Loom's own source
    (an installed library), so the child parses that whole folder in one go."""
    key = str(path.resolve())
    if key in _parsed_elsewhere:
        return _parsed_elsewhere[key]
    if not _parsed_elsewhere:
        stat = path.stat()
        version = (key, stat.st_mtime_ns, stat.st_size)
        if version in _parsed_here:
            return _parsed_here[version]
        try:
            tree = _parsed_here[version] = ast.parse(path.read_text(), str(path))
            return tree
        except SystemError:
            pass  # the bug: from here on, parse in a child
    # Each folder once: a file outside them (a sample a test wrote) is parsed alone, not with
    # the whole source again (a child per file over all of it took minutes under load).
    roots = [str(ROOT / d) for d in _LOOM_ROOTS if (ROOT / d).is_dir()] if package is None else [str(package)]
    roots = [r for r in roots if r not in _roots_parsed_elsewhere]
    out = subprocess.run([sys.executable, "-c", _CHILD, *roots, key], capture_output=True, check=True)
    _parsed_elsewhere.update(pickle.loads(out.stdout))
    _roots_parsed_elsewhere.update(roots)
    return _parsed_elsewhere[key]

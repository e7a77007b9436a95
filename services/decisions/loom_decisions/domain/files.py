"""The files a memory row names, detected from its text when the writer sets none, and the
match of a row's files against the path memory.for_file is asked about.

Detected: repository paths (`src/Storages/MergeTreeData.cpp`, `docs/policies.md`), bare file
names with a source extension (`rows.py`), and dotted Python module names
(`loom_decisions.service.rows` reads as `loom_decisions/service/rows.py`). URLs are not paths.
A row's file matches an edited path when the two are equal or one is the other's tail at a `/`
(`loom_decisions/service/rows.py` matches `services/decisions/loom_decisions/service/rows.py`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

SOURCE_EXTENSIONS = (
    "py|pyi|proto|go|rs|java|kt|scala|c|cc|cpp|cxx|h|hh|hpp|m|mm|swift|rb|php|js|jsx|mjs|cjs|ts|tsx|vue|svelte|"
    "cs|fs|ex|exs|erl|hs|ml|lua|pl|r|jl|dart|zig|sql|sh|bash|zsh|ps1|yaml|yml|toml|json|ini|cfg|conf|md|rst|txt|"
    "html|css|scss|xml|gradle|cmake|mk|tf|nix|dockerfile"
)
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.IGNORECASE)
_PATH = re.compile(r"(?<![\w/.:@-])(?:\.{0,2}/)?(?:[\w.-]+/)+[\w.-]+\.(?:" + SOURCE_EXTENSIONS + r")\b(?![/\w])", re.IGNORECASE)
_FILE = re.compile(r"(?<![\w/.:@-])[\w-]+\.(?:" + SOURCE_EXTENSIONS + r")\b(?![/\w.])", re.IGNORECASE)
_MODULE = re.compile(r"(?<![\w/.:@-])[a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)+(?![\w/(]|\.\w)")
_EXT = re.compile(r"\.(?:" + SOURCE_EXTENSIONS + r")$", re.IGNORECASE)


def _clean(path: str) -> str:
    p = path.strip().replace("\\", "/")
    while p.startswith("./"):
        p = p[2:]
    return p.lstrip("/")


def _module_path(name: str) -> str | None:
    """A dotted name that reads as a Python module: three parts or more, or two with an
    underscore (so `e.g` and `example.com` are not modules)."""
    parts = name.split(".")
    if len(parts) < 2 or (len(parts) == 2 and "_" not in name):
        return None
    if _EXT.search(name):
        return None
    return "/".join(parts) + ".py"


def detect_files(texts: Iterable[str]) -> list[str]:
    """The paths and module names the texts hold, in order of first appearance, each once."""
    out: list[str] = []
    for text in texts:
        if not text:
            continue
        plain = _URL.sub(" ", text)
        found: list[tuple[int, str]] = []
        taken: list[tuple[int, int]] = []
        for m in _PATH.finditer(plain):
            found.append((m.start(), _clean(m.group(0))))
            taken.append(m.span())
        for m in _FILE.finditer(plain):
            if not any(a <= m.start() < b for a, b in taken):
                found.append((m.start(), m.group(0)))
                taken.append(m.span())
        for m in _MODULE.finditer(plain):
            if any(a <= m.start() < b for a, b in taken):
                continue
            path = _module_path(m.group(0))
            if path is not None:
                found.append((m.start(), path))
        for _, path in sorted(found):
            if path and path not in out:
                out.append(path)
    return out


def file_matches(row_file: str, path: str) -> bool:
    """A row's file names the edited path: equal, or one is the other's tail at a `/`."""
    a, b = _clean(row_file), _clean(path)
    if not a or not b:
        return False
    return a == b or b.endswith("/" + a) or a.endswith("/" + b)

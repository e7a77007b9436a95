"""unknown_names (spec 000 "Citations", Names): backticked dotted names whose first part is an
op group, and LOOM_* names, that the build neither serves nor documents."""

from __future__ import annotations

import re
from collections.abc import Iterable

_BACKTICK = re.compile(r"`([^`\n]+)`")
_DOTTED = re.compile(r"^[a-z][a-z0-9_]*\.[a-z][a-z0-9_.]*$")
_SETTING = re.compile(r"\bLOOM_[A-Z0-9_]+")


def candidates(text: str, groups: Iterable[str]) -> list[str]:
    """Names the answer writes that the check decides, in order, each once."""
    gs = set(groups)
    out: list[str] = []
    for m in _BACKTICK.finditer(text):
        name = m.group(1).strip()
        if _DOTTED.match(name) and name.split(".", 1)[0] in gs:
            out.append(name)
    out.extend(m.group(0) for m in _SETTING.finditer(text))
    return list(dict.fromkeys(out))  # each name once, in order of first mention


def unknown(text: str, *, ops: Iterable[str], settings: Iterable[str], docs_text: str | None) -> list[str]:
    """The names no op, setting or doc knows; none at all with no docs to read. A name ending
    in `_` is a family, known when a known name starts with it."""
    if docs_text is None:
        return []
    op_names = set(ops)
    groups = {o.split(".", 1)[0] for o in op_names}
    known = op_names | set(settings)
    out = []
    for name in candidates(text, groups):
        if name in known or name in docs_text:
            continue
        if name.endswith("_") and any(k.startswith(name) for k in known):
            continue
        out.append(name)
    return out

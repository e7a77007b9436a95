"""Reading the docs folder: every indexed Markdown page, as text, by its path relative to the folder."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path

from ..domain.sections import indexed

log = logging.getLogger(__name__)


def shipped_docs_dir() -> Path:
    """The docs this build ships: `loom_help/docs`, a link to the repository's docs/ in a source
    tree and an editable install, a copy of its Markdown pages in an installed wheel."""
    return Path(str(files("loom_help") / "docs"))


@dataclass(slots=True)
class PageTexts:
    pages: list[tuple[str, str]] = field(default_factory=list)
    # Pages that could not be read, with the reason; each was logged as a warning.
    skipped: list[tuple[str, str]] = field(default_factory=list)


def read_pages(root: Path) -> PageTexts:
    """Every indexed page under `root`, sorted by path. A page that cannot be read (a broken
    link, bytes that are not UTF-8, no permission) is left out with a warning."""
    out = PageTexts()
    if not root.is_dir():
        log.warning("help: no docs folder at %s; help answers available: false until restart", root)
        return out
    for path in sorted(root.rglob("*.md")):
        rel = path.relative_to(root).as_posix()
        if not indexed(rel):
            continue
        try:
            out.pages.append((rel, path.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError) as exc:
            reason = type(exc).__name__
            log.warning("help: left %s out of the index: %s", rel, reason)
            out.skipped.append((rel, reason))
    if not out.pages:
        log.warning("help: no Markdown pages under %s; help answers available: false until restart", root)
    return out

"""Pages split at their Markdown headings.

A section runs from its heading to the next heading of any level (the text before a page's
first heading is a section of its own, under the page title). Its breadcrumb starts with the
page title (the first level-one heading, else the file name) and follows the headings above
it. Its anchor is the slug a GitHub Markdown viewer makes, suffixed `-1`, `-2` where the page
repeats a heading, so one anchor names one section. Headings inside fenced code are text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

USER = "user"
OPERATOR = "operator"
# Pages about running or building Loom: their sections count three quarters.
OPERATOR_PREFIXES = ("operations", "architecture", "benchmarks")
# Contributor pages: not indexed.
SKIPPED_PREFIXES = ("development",)

_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_SLUG_DROP = re.compile(r"[^\w\- ]", re.UNICODE)


@dataclass(frozen=True, slots=True)
class Section:
    page: str
    breadcrumb: tuple[str, ...]
    anchor: str
    # 1-6 for a heading's section, 0 for the text before a page's first heading.
    level: int
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Page:
    path: str
    title: str
    text: str
    audience: str
    sections: tuple[Section, ...]

    def section_text(self, section: Section) -> str:
        return self.text[section.start : section.end]

    def by_anchor(self, anchor: str) -> Section | None:
        for s in self.sections:
            if s.anchor == anchor:
                return s
        return None


def heading_text(raw: str) -> str:
    """A heading as a reader sees it: links to their text, code and emphasis marks dropped."""
    text = _LINK.sub(r"\1", raw)
    text = text.replace("`", "").replace("**", "").replace("__", "")
    return " ".join(text.split())


def slug(text: str) -> str:
    """GitHub's heading anchor: lower-case, punctuation but `-` and `_` dropped, spaces to `-`."""
    return _SLUG_DROP.sub("", text.lower()).replace(" ", "-")


def audience_of(path: str) -> str:
    head = path.split("/", 1)[0]
    stem = head[:-3] if head.endswith(".md") else head
    return OPERATOR if stem.startswith(OPERATOR_PREFIXES) else USER


def indexed(path: str) -> bool:
    """Whether a page (its path relative to the docs folder) is indexed: contributor pages are not."""
    return path.endswith(".md") and path.split("/", 1)[0] not in SKIPPED_PREFIXES


def _headings(text: str) -> list[tuple[int, int, str]]:
    """(offset, level, heading text) of every heading outside fenced code."""
    found: list[tuple[int, int, str]] = []
    fence = ""
    offset = 0
    for line in text.splitlines(keepends=True):
        stripped = line.rstrip("\r\n")
        f = _FENCE.match(stripped)
        if fence:
            if f and f.group(1)[0] == fence[0] and len(f.group(1)) >= len(fence) and not stripped.strip()[len(f.group(1)) :].strip():
                fence = ""
        elif f:
            fence = f.group(1)
        else:
            h = _HEADING.match(stripped)
            if h:
                found.append((offset, len(h.group(1)), heading_text(h.group(2))))
        offset += len(line)
    return found


def split_page(path: str, text: str) -> Page:
    """The page's sections, breadcrumbs and anchors."""
    heads = _headings(text)
    title_at = next((i for i, (_, level, _t) in enumerate(heads) if level == 1), None)
    stem = path.rsplit("/", 1)[-1]
    title = heads[title_at][2] if title_at is not None else (stem[:-3] if stem.endswith(".md") else stem)
    sections: list[Section] = []
    first = heads[0][0] if heads else len(text)
    if text[:first].strip():
        sections.append(Section(path, (title,), "", 0, 0, first))
    used: set[str] = set()
    next_suffix: dict[str, int] = {}
    stack: list[tuple[int, int, str]] = []  # (heading index, level, text)
    for i, (offset, level, name) in enumerate(heads):
        end = heads[i + 1][0] if i + 1 < len(heads) else len(text)
        while stack and stack[-1][1] >= level:
            stack.pop()
        stack.append((i, level, name))
        breadcrumb = (title, *(n for j, _lvl, n in stack if j != title_at))
        base = slug(name)
        anchor = base
        if base in used:
            n = next_suffix.get(base, 1)
            while f"{base}-{n}" in used:
                n += 1
            anchor = f"{base}-{n}"
            next_suffix[base] = n + 1
        used.add(anchor)
        sections.append(Section(path, breadcrumb, anchor, level, offset, end))
    return Page(path, title, text, audience_of(path), tuple(sections))

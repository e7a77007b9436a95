"""Help citations, `[help:<page> § <section>]` (the section optional), checked against the index.

Verified when the page is indexed and the section is one of its own: its breadcrumb (joined by
` > `), the breadcrumb without the page title, or a tail of it no other section of the page
shares. The answer carries the section's anchor.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .sections import Page, Section

_CITATION = re.compile(r"^\[?\s*help:\s*([^\]§]+?)\s*(?:§\s*([^\]]*?))?\s*\]?$")
_SEP = re.compile(r"\s*>\s*")

NOT_A_HELP_CITATION = "not_a_help_citation"
HELP_UNAVAILABLE = "help_unavailable"
PAGE_NOT_INDEXED = "page_not_indexed"
NO_SUCH_SECTION = "no_such_section"
AMBIGUOUS_SECTION = "ambiguous_section"


@dataclass(frozen=True, slots=True)
class Verification:
    ref: str
    verified: bool
    anchor: str = ""
    reason: str = ""


def parse(ref: str) -> tuple[str, str] | None:
    """(page, section) of a citation, the section "" when it names none; None when it is not one."""
    m = _CITATION.match(ref.strip())
    if m is None:
        return None
    return m.group(1).strip(), (m.group(2) or "").strip()


def _norm(text: str) -> str:
    return " > ".join(" ".join(part.split()).casefold() for part in _SEP.split(text.strip()))


def _joined(parts: tuple[str, ...]) -> str:
    return _norm(" > ".join(parts))


def find_section(page: Page, cited: str) -> tuple[Section | None, str]:
    """The section a citation's section names on this page, or None and why not."""
    want = _norm(cited)
    for s in page.sections:
        if _joined(s.breadcrumb) == want:
            return s, ""
    for s in page.sections:
        if len(s.breadcrumb) > 1 and _joined(s.breadcrumb[1:]) == want:
            return s, ""
    holders = [s for s in page.sections if any(_joined(s.breadcrumb[-k:]) == want for k in range(1, len(s.breadcrumb)))]
    if len(holders) == 1:
        return holders[0], ""
    return None, AMBIGUOUS_SECTION if holders else NO_SUCH_SECTION


def verify(pages: dict[str, Page] | None, ref: str) -> Verification:
    """One citation against the indexed pages (None: help has no index in this process)."""
    parsed = parse(ref)
    if parsed is None:
        return Verification(ref, False, reason=NOT_A_HELP_CITATION)
    if pages is None:
        return Verification(ref, False, reason=HELP_UNAVAILABLE)
    path, cited = parsed
    page = pages.get(path)
    if page is None:
        return Verification(ref, False, reason=PAGE_NOT_INDEXED)
    if not cited:
        return Verification(ref, True)
    section, why = find_section(page, cited)
    if section is None:
        return Verification(ref, False, reason=why)
    return Verification(ref, True, anchor=section.anchor)

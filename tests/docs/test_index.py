"""docs/index.md lists every page under docs/, and the README links the index."""

from __future__ import annotations

import re

from tests.docs.examples import ROOT

DOCS = ROOT / "docs"


def test_the_index_lists_every_page() -> None:
    linked = set(re.findall(r"\]\(([^)#]+\.md)", (DOCS / "index.md").read_text()))
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")} - {"index.md"}
    assert sorted(pages - linked) == []


def test_the_readme_links_the_index_on_its_first_screen() -> None:
    first_screen = "\n".join((ROOT / "README.md").read_text().splitlines()[:10])
    assert "(docs/index.md)" in first_screen

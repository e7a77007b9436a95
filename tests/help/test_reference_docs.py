"""docs/reference/ops.md and errors.md are generated from the catalog and the error table;
they fail here when stale (run `python scripts/gen_docs_reference.py`)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from loom_core.catalog import load_catalog
from loom_core.errors import CODES

from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]


def generator() -> ModuleType:
    return load_script("gen_docs_reference")


def test_the_reference_pages_are_current() -> None:
    gen = generator()
    assert (ROOT / "docs" / "reference" / "ops.md").read_text() == gen.render_ops(), "run python scripts/gen_docs_reference.py"
    assert (ROOT / "docs" / "reference" / "errors.md").read_text() == gen.render_errors(), "run python scripts/gen_docs_reference.py"


def test_every_op_and_every_code_has_its_section() -> None:
    ops_page = (ROOT / "docs" / "reference" / "ops.md").read_text()
    errors_page = (ROOT / "docs" / "reference" / "errors.md").read_text()
    for name, op in load_catalog().ops.items():
        assert f"### {name}\n" in ops_page
        assert f"| {op.min_role.label} | {op.rate_class} |" in ops_page
    for code in CODES:
        assert f"## {code}\n" in errors_page


def test_every_code_says_what_it_means_and_what_to_do() -> None:
    gen = generator()
    assert {str(c) for c in CODES} <= set(gen.MEANING)

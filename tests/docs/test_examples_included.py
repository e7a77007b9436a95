"""Every runnable block of README.md and docs/ is an examples/ file, included exactly: the doc
cannot drift from what the runner (test_examples_run.py) runs."""

from __future__ import annotations

from tests.docs.examples import EXAMPLES, ROOT, RUNNABLE, blocks, doc_pages, example_files


def test_every_runnable_block_is_an_example_file_with_the_same_content() -> None:
    problems = []
    for page in doc_pages():
        for b in blocks(page):
            where = f"{b.page.relative_to(ROOT)}:{b.line}"
            if b.example is None:
                if b.lang in RUNNABLE and b.fragment is None:
                    problems.append(f"{where}: a {b.lang} block with no `<!-- example: examples/... -->` line before it")
                continue
            path = ROOT / b.example
            if not path.is_file() or EXAMPLES not in path.resolve().parents:
                problems.append(f"{where}: {b.example} is not a file under examples/")
            elif path.read_text() != b.body:
                problems.append(f"{where}: the block differs from {b.example} (copy the file into the doc)")
    assert problems == []


def test_every_example_file_is_shown_in_a_doc() -> None:
    shown = {b.example for page in doc_pages() for b in blocks(page)}
    orphans = [p.relative_to(ROOT).as_posix() for p in example_files() if p.relative_to(ROOT).as_posix() not in shown]
    assert orphans == []


def test_the_marker_convention_is_found() -> None:
    # The checks above pass vacuously if no doc marks a block: the README's first steps do.
    assert any(b.example for b in blocks(ROOT / "README.md"))

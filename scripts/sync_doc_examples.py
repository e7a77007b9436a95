"""Copy each examples/ file into the doc blocks that include it: every fenced block preceded by
`<!-- example: examples/<path> -->` in README.md, sdk/typescript/README.md and docs/ gets the file's content exactly
(tests/docs/test_examples_included.py fails until it does). Run after editing an example:
`.venv/bin/python scripts/sync_doc_examples.py`."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INCLUDED = re.compile(r"^(<!-- example: (examples/\S+) -->\n```[^\n`]*\n)(.*?)(^```[ \t]*$)", re.M | re.S)


def sync(page: Path) -> bool:
    text = page.read_text()
    synced = INCLUDED.sub(lambda m: m.group(1) + (ROOT / m.group(2)).read_text() + m.group(4), text)
    if synced != text:
        page.write_text(synced)
    return synced != text


def main() -> None:
    for page in [ROOT / "README.md", ROOT / "sdk" / "typescript" / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        if sync(page):
            print(f"updated {page.relative_to(ROOT)}")


if __name__ == "__main__":
    main()

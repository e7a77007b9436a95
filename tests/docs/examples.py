"""The docs-examples convention (shared by every test under tests/docs).

Any code block in README.md or docs/ that a user is meant to run (shell, Python, TypeScript) is
a file under examples/; in the doc the block is preceded by a marker line
`<!-- example: examples/<path> -->` and its content equals the file exactly. Scripts read
LOOM_URL, LOOM_TOKEN (an admin token), LOOM_ORG and LOOM_NAMESPACE from the environment and run
as given against a plain `loom up` (an operator's CLI command finds it through LOOM_DATA_DIR). A file that needs more than that (LibreChat, Docker, a Loom
of its own) says so on a line `# example-needs: <what>` (`// example-needs:` in TypeScript),
and the runner skips it saying so."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
# The languages of a block a user runs; any other block (json, text, sql, xml) is shown, not run.
RUNNABLE = {"sh", "bash", "shell", "console", "python", "py", "ts", "typescript", "js", "javascript"}
SUFFIXES = {".sh", ".py", ".ts", ".js"}
MARKER = re.compile(r"^<!-- example: (\S+) -->$")
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.M | re.S)
NEEDS = re.compile(r"^\s*(?:#|//) example-needs: (.+)$", re.M)
# What the runner gives every example (the convention's environment, and nothing else of Loom's).
EXAMPLE_ENV = ("LOOM_URL", "LOOM_TOKEN", "LOOM_ORG", "LOOM_NAMESPACE", "LOOM_DATA_DIR")


def doc_pages() -> list[Path]:
    # The TypeScript SDK's README is a doc too (the npm registry shows it).
    return [ROOT / "README.md", ROOT / "sdk" / "typescript" / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    body: str
    example: str | None  # the marker's path, when a marker precedes the block
    # A named fragment (`<!-- example: register -->`, no path): a page's verbatim copy of a
    # spec example, run by that plane's own test (tests/tasks/test_spec_examples.py), not a file.
    fragment: str | None = None


def blocks(page: Path) -> list[Block]:
    text = page.read_text()
    out = []
    for m in FENCE.finditer(text):
        info = m.group(1).strip()
        before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1].strip()
        marker = MARKER.match(before)
        named = marker.group(1) if marker else None
        path = named if named and "/" in named else None
        line = text.count("\n", 0, m.start()) + 1
        out.append(Block(page, line, info.split()[0] if info else "", m.group(2), path, named if named and path is None else None))
    return out


def example_files() -> list[Path]:
    # examples/typescript/node_modules links the TypeScript SDK in: installed, not an example.
    return sorted(p for p in EXAMPLES.rglob("*") if p.is_file() and p.suffix in SUFFIXES and "node_modules" not in p.parts)


def needs(path: Path) -> str | None:
    found = NEEDS.search(path.read_text())
    return found.group(1).strip() if found else None

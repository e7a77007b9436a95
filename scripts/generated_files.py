"""What every generator under scripts/ does with what it renders: write it, or with `--check`
say which committed file differs from a fresh render and exit 1 (the tests run `--check`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def write_or_check(description: str, render: Callable[[], Mapping[Path, str]], argv: Sequence[str] | None, script: str) -> int:
    """Parse `--check`; render every output (path -> text); write them, or compare them with
    the committed files, naming the stale ones and `python scripts/<script>` as the fix."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--check", action="store_true", help="exit 1 if a committed file is out of date")
    args = parser.parse_args(argv)
    outputs = render()
    if args.check:
        stale = [path for path, text in outputs.items() if not path.exists() or path.read_text() != text]
        if stale:
            names = ", ".join(path.relative_to(ROOT).as_posix() for path in stale)
            print(f"out of date: {names}: run python scripts/{script}", file=sys.stderr)
            return 1
        return 0
    for path, text in outputs.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path.relative_to(ROOT).as_posix()}")
    return 0

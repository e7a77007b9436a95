"""Count the `duplicates` pairs in this tree outside tests/ and generated code (issue #28's
hygiene figure).

Copies the files git tracks, plus the untracked ones it does not ignore, into a temporary
folder, minus everything under tests/ and the generated files (proto/, `*_pb2*`, a `generated/`
folder, and any file whose first line says `DO NOT EDIT:`, as scripts/gen_*.py write it), and
runs `duplicates` over that copy: a pair in which either side is left out cannot appear, so the
first line's count is exactly the pairs of hand-written, non-test code. Pass `--rows` to print
every row as well.

    .venv/bin/python scripts/count_duplicates.py [--rows]
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXCLUDED = ("tests/", "proto/")


def generated(name: str) -> bool:
    if "_pb2" in name or "/generated/" in name:
        return True
    with open(ROOT / name, "rb") as f:
        return b"DO NOT EDIT:" in f.readline()


def tree_files() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.decode()
    names = sorted(set(listed.split("\0")))
    return [name for name in names if name and not name.startswith(EXCLUDED) and (ROOT / name).is_file() and not generated(name)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", action="store_true", help="print every pair, not only the count")
    parser.add_argument("--seconds", type=int, default=400)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="loom-dups-") as copy:
        for name in tree_files():
            target = Path(copy) / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(ROOT / name, target)
        out = subprocess.run(
            ["duplicates", "--repo", copy, "--most", "200", "--seconds", str(args.seconds)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    out = out.replace(copy + "/", "")
    if args.rows:
        print(out, end="")
    else:
        print(out.splitlines()[0])
        for line in out.splitlines():
            if line.startswith(("incomplete:", "left out:")) or re.match(r"\(\+\d+ more pairs\)", line):
                print(line)
    return 1 if "incomplete:" in out else 0


if __name__ == "__main__":
    sys.exit(main())

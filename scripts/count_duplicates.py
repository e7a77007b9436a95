"""Count the `duplicates` pairs in this tree outside tests/ (issue #28's hygiene figure).

Copies the files git tracks, plus the untracked ones it does not ignore, minus everything
under tests/, into a temporary folder and runs `duplicates` over that copy: a pair in which
either side is under tests/ cannot appear, so the first line's count is exactly the
non-test pairs. Pass `--rows` to print every row as well.

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
EXCLUDED = ("tests/",)


def tree_files() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.decode()
    return [name for name in sorted(set(listed.split("\0"))) if name and not name.startswith(EXCLUDED) and (ROOT / name).is_file()]


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

"""`loom code index`: read a local git checkout and replace a code namespace's file set with the
symbols its tracked files define (the code index `code.symbol` and `loom decisions extract --repo`
read).

    loom code index --org O --repo OWNER/NAME --path CHECKOUT              # the repository's trunk
    loom code index --org O --repo OWNER/NAME --path CHECKOUT --branch B   # a branch's namespace

The files are those `git ls-files` lists, read and parsed here (domain/code_symbols.py); the
symbols go to the `loom up` holding LOOM_DATA_DIR through its admin socket, or, against a cluster,
are written from this process. The first run registers the repository (its remotes are the
checkout's remotes that name OWNER/NAME; --namespace names its trunk code namespace) and makes
the code namespace; grant readers a role there as in any namespace.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

from loom_core.settings import Settings

from .domain.code_symbols import MAX_FILE_BYTES, DefinedSymbol, IndexedFile, indexable, module_of, symbols_of
from .operator_call import NotReached, call_plane

COMMANDS = ("code",)


def add_commands(sub: Any) -> None:
    code = sub.add_parser("code", help="the code index: repositories and the symbols their files define")
    code_sub = code.add_subparsers(dest="code_cmd", required=True)
    ix = code_sub.add_parser("index", help="index a local git checkout into its repository's code namespace")
    ix.add_argument("--org", required=True)
    ix.add_argument("--repo", required=True, help="OWNER/NAME of the repository")
    ix.add_argument("--path", required=True, type=Path, help="a local git checkout of it")
    ix.add_argument("--branch", default="", help="index into the branch's code namespace (default: the trunk's)")
    ix.add_argument(
        "--namespace", default="", help="the trunk code namespace, on the repository's first index (default code-<owner>-<name>)"
    )


def _git(path: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(path), *args], check=True, capture_output=True, text=True).stdout


def read_checkout(path: Path) -> tuple[list[IndexedFile], list[str], str]:
    """The checkout's tracked files with the symbols each defines, its remotes' URLs and HEAD."""
    tracked = [p for p in _git(path, "ls-files", "-z").split("\0") if p]
    remotes = sorted({line.split()[1] for line in _git(path, "remote", "-v").splitlines() if len(line.split()) >= 2})
    try:
        commit = _git(path, "rev-parse", "HEAD").strip()
    except subprocess.CalledProcessError:
        commit = ""
    files: list[IndexedFile] = []
    for rel in tracked:
        f = path / rel
        symbols: list[DefinedSymbol] = []
        # A symlink may point out of the checkout: listed, not read.
        if indexable(rel) and not f.is_symlink() and f.is_file() and f.stat().st_size <= MAX_FILE_BYTES:
            text = f.read_text(encoding="utf-8", errors="replace")
            symbols = [
                DefinedSymbol(name=s.name, qualname=s.qualname, fqname=_fqname(rel, s.qualname, s.kind), kind=s.kind, line=s.line)
                for s in symbols_of(rel, text)
            ]
        files.append(IndexedFile(path=rel, symbols=symbols))
    return files, remotes, commit


def _fqname(path: str, qualname: str, kind: str) -> str:
    return qualname if kind == "page" else f"{module_of(path)}.{qualname}"


def run_command(args: argparse.Namespace, settings: Settings) -> int:
    if not (args.path / ".git").exists():
        print(f"loom code index: {args.path} is not a git checkout", file=sys.stderr)
        return 1
    try:
        files, remotes, commit = read_checkout(args.path)
    except subprocess.CalledProcessError as exc:
        print(f"loom code index: git could not read {args.path}: {exc.stderr.strip()}", file=sys.stderr)
        return 1
    body = {
        "org": args.org,
        "repo": args.repo,
        "branch": args.branch,
        "namespace": args.namespace,
        "remotes": remotes,
        "commit": commit,
        "files": files,
    }
    try:
        out = asyncio.run(call_plane(settings, "/code/index", body, "loom-code-index", lambda plane: plane.index_code(body)))
    except NotReached as exc:
        print(f"loom code index: {exc}", file=sys.stderr)
        return 1
    if "error" in out:
        print(f"loom code index: {out['error']}", file=sys.stderr)
        return 1
    print(
        f"indexed {out['files']} file(s), {out['symbols']} symbol(s) of {out['repo_id']} into {out['namespace']}"
        f" (remotes: {', '.join(out['remotes']) or 'none'})"
    )
    return 0

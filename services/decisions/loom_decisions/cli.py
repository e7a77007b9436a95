"""`loom decisions extract`: the decisions plane's command, reached by the runner through the
`loom.commands` entry point (the runner imports no plane).

    loom decisions extract --org O --namespace NS --source-uri URI            # dry run: prints what it would write
    loom decisions extract --org O --namespace NS --source-uri URI --apply    # writes
    loom decisions extract --org O --namespace NS --source-uri URI --repo OWNER/NAME --into source --apply

It runs as the operator, with no token: against the `loom up` that holds LOOM_DATA_DIR, through
its admin socket (whoever can open the data dir is the operator); against a cluster
(LOOM_CLICKHOUSE_URL and LOOM_NATS_URL set), in this process. The document is a local Markdown
file (a path or a file:// URL), read here, or the key of a memory row of type `document` in the
namespace. The model is the configured OpenAI-compatible endpoint (LOOM_LLM_URL, LOOM_LLM_MODEL,
LOOM_LLM_API_KEY); with none, the command says how to configure one and exits 1 before anything.
Exit codes: 1 when it could not run on the document, 2 when a write or a window failed, else 0.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from loom_core.settings import Settings

from .operator_call import NotReached, call_plane

if TYPE_CHECKING:
    from .plane import DecisionsPlane

COMMANDS = ("decisions",)


def add_commands(sub: Any) -> None:
    dec = sub.add_parser("decisions", help="operator commands of the decisions plane")
    dec_sub = dec.add_subparsers(dest="decisions_cmd", required=True)
    ex = dec_sub.add_parser("extract", help="record the decisions a document states (dry run unless --apply)")
    ex.add_argument("--org", required=True)
    ex.add_argument("--namespace", required=True)
    ex.add_argument(
        "--source-uri", required=True, help="a Markdown file (path or file:// URL), or the key of a memory row of type document"
    )
    ex.add_argument("--apply", action="store_true", help="write; without it the run prints what it would write")
    ex.add_argument("--repo", default="", help="OWNER/NAME (or a remote URL) of the indexed repository whose code the document governs")
    ex.add_argument(
        "--into",
        choices=["source", "repo"],
        default=None,
        help="where the rows go with --repo: the document's namespace (source) or the repository's trunk (repo)",
    )
    ex.add_argument(
        "--window-chars",
        type=int,
        default=0,
        help="most characters one model read takes (default LOOM_MEMORY_DECISION_EXTRACT_WINDOW_CHARS)",
    )
    ex.add_argument("--max-per-section", type=int, default=3, help="most decisions kept per section (default 3)")


def run_command(args: argparse.Namespace, settings: Settings) -> int:
    from .service.llm import ChatModel, model_problem
    from .settings import DecisionsSettings

    ds = settings.plane(DecisionsSettings)
    problem = model_problem(ds)
    if problem:
        return _fail(f"loom decisions extract: {problem}")
    if args.into and not args.repo:
        return _fail("loom decisions extract: --into needs --repo")
    if args.window_chars and args.window_chars < 500:
        return _fail("loom decisions extract: --window-chars must be at least 500")
    if args.max_per_section < 1:
        return _fail("loom decisions extract: --max-per-section must be at least 1")
    document: str | None = None
    path = local_path(args.source_uri)
    if path is not None:
        if not path.is_file():
            return _fail(f"loom decisions extract: no document at {args.source_uri}: nothing written")
        document = path.read_text(encoding="utf-8", errors="replace")
    model = ChatModel.from_settings(ds)
    lines, code = asyncio.run(_run(settings, args, document, model))
    for line in lines:
        print(line)
    return code


def local_path(uri: str) -> Path | None:
    """A file:// URL's path, or a path that names a file here; None for a memory row's key."""
    if uri.startswith("file://"):
        return Path(unquote(urlparse(uri).path))
    p = Path(uri).expanduser()
    return p if p.is_file() else None


def _fail(message: str) -> int:
    print(message, file=sys.stderr)
    return 1


async def _run(settings: Settings, args: argparse.Namespace, document: str | None, model: Any) -> tuple[list[str], int]:
    body = {
        "org": args.org,
        "namespace": args.namespace,
        "source_uri": args.source_uri,
        "document": document,
        "apply": args.apply,
        "window_chars": args.window_chars,
        "max_per_section": args.max_per_section,
        "repo": args.repo,
        "into": args.into,
        "llm": {"url": model.url, "model": model.model, "api_key": model.api_key, "timeout": model.timeout, "caps": model.caps},
    }

    async def in_process(plane: DecisionsPlane) -> dict[str, Any]:
        rep = await plane.extract(
            args.org,
            args.namespace,
            args.source_uri,
            document=document,
            apply=args.apply,
            model=model,
            window_chars=args.window_chars,
            max_per_section=args.max_per_section,
            repo=args.repo,
            into=args.into,
        )
        return {"lines": rep.lines, "exit_code": rep.exit_code}

    try:
        out = await call_plane(settings, "/decisions/extract", body, "loom-decisions-extract", in_process)
    except NotReached as exc:
        return [f"loom decisions extract: {exc}"], 1
    return list(out["lines"]), int(out["exit_code"])

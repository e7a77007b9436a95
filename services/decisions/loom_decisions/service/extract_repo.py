"""Where `loom decisions extract` looks code names up and writes its rows (spec 003, Extract
decisions from a document: Repository, Tags, Rows from an earlier run, Files).

- Without --repo: the document's namespace for both; a document in a code namespace is its
  repository's (a branch's document looks its names up in the branch's own index).
- With --repo OWNER/NAME (or a remote URL, matched by owner/name; a fork's remote names the fork):
  names are looked up in the repository's trunk code namespace, and --into says where the rows go:
  `source` (the default outside a code namespace) the document's namespace, each row tagged
  repo:<id> when the document is outside the trunk and the repository has a remote (a plugin
  finds a repository by its checkout's remote, so one with none has no tag to match); `repo` (the
  default inside a code namespace) the trunk, untagged.
- Before any model call the run refuses when this document's rows are in another namespace a run
  may write them to, or carry another repository's repo:<id> tag (any, without --repo or for a
  repository with no remote): going on would leave its decisions in two places, or linked to the
  wrong repository.

The code names of each decision are looked up with code.symbol's own lookup (CodeIndex.symbol)
in the lookup namespace, as the operator.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from loom_core.errors import LoomError

from ..domain.decision_extract import EXTRACTOR_AGENT, code_names, is_test_path, pull_requests
from ..store.code import RepoRow
from ..store.memory import MemoryRow
from .blocks import REPO_TAG_PREFIX
from .code_index import CodeIndex

_SNAKE = re.compile(r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)+$")


@dataclass(frozen=True, slots=True)
class Placement:
    doc_ns: str  # the namespace that holds the document (its rows' source_resource_id cite it there)
    target_ns: str  # where the rows go
    lookup_ns: str  # where code names are looked up
    repo: RepoRow | None = None
    repo_tag: str = ""  # repo:<id> each row carries, or ''
    # Other namespaces a run on this document may write its rows to.
    other_namespaces: tuple[str, ...] = ()
    indexed: bool = True  # the lookup namespace holds a code index
    # The repo:<id> tag of the repository --repo names, when it has a remote: the one a row of
    # this document may already carry.
    own_tag: str = ""


async def place(code: CodeIndex, org: str, doc_ns: str, repo_arg: str, into: str | None) -> Placement | str:
    """The run's placement, or the refusal (a sentence) when --repo names no registered repository."""
    held = await code.code_namespace(org, doc_ns)
    doc_repo, doc_branch = held if held else (None, "")
    if not repo_arg:
        if into:
            return "--into needs --repo"
        trunk: tuple[str, ...] = (doc_repo["trunk_namespace"],) if doc_repo is not None and doc_branch else ()
        return Placement(doc_ns, doc_ns, doc_ns, doc_repo, "", trunk, held is not None)
    repo = await code.repo(org, repo_arg)
    if repo is None:
        return (
            f"repository {repo_arg} is not registered in org {org} (index it first: loom code index --org {org} "
            f"--repo OWNER/NAME --path CHECKOUT); run without --repo to write to the document's namespace"
        )
    into = into or ("repo" if held is not None else "source")
    target = repo["trunk_namespace"] if into == "repo" else doc_ns
    tag = f"{REPO_TAG_PREFIX}{repo['repo_id']}" if into == "source" and doc_ns != repo["trunk_namespace"] and repo["remotes"] else ""
    candidates = {doc_ns, repo["trunk_namespace"]}
    if doc_repo is not None and doc_branch:
        candidates.add(doc_repo["trunk_namespace"])
    others = tuple(sorted(candidates - {target}))
    indexed = await code.code_namespace(org, repo["trunk_namespace"]) is not None
    own = f"{REPO_TAG_PREFIX}{repo['repo_id']}" if repo["remotes"] else ""
    return Placement(doc_ns, target, repo["trunk_namespace"], repo, tag, others, indexed, own)


def cited_rows(rows: list[MemoryRow], prefix: str) -> list[MemoryRow]:
    """The extractor's rows that cite the document (their source_resource_id starts with `prefix`)."""
    return [r for r in rows if r.agent == EXTRACTOR_AGENT and r.source_resource_id.startswith(prefix)]


async def earlier_run_refusal(code: CodeIndex, org: str, p: Placement, here: list[MemoryRow], elsewhere: dict[str, int]) -> str:
    """Why the run may not go on ('' when it may): this document's rows in another namespace a
    run may write them to (`elsewhere`: namespace -> how many), or rows here tagged for another
    repository."""
    for ns, n in sorted(elsewhere.items()):
        if n:
            return (
                f"{n} row(s) this document's extraction wrote are in {ns}, not {p.target_ns} where this run writes: "
                "run with the --repo and --into that wrote them, or delete them first (nothing written)"
            )
    for r in here:
        for t in r.tags:
            if t.startswith(REPO_TAG_PREFIX) and t != p.own_tag:
                rid = t[len(REPO_TAG_PREFIX) :]
                linked = await code.repo(org, rid)
                who = f"{linked['owner']}/{linked['name']}" if linked is not None else rid
                return (
                    f"{r.key} is linked to repository {who} ({t}): run with --repo {who} "
                    "(going on would link this document's decisions to the wrong repository; nothing written)"
                )
    return ""


# --- the Files step


@dataclass
class Resolved:
    files: list[str] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)  # "name (why)" for a human
    index_failed: bool = False


async def resolve_names(code: CodeIndex, org: str, p: Placement, quotes: list[str]) -> Resolved:
    """Each name looked up with code.symbol in the lookup namespace: exactly one defining code file
    goes into files; several, none, or only tests and pages add nothing and are reported."""
    out = Resolved()
    for pr in pull_requests(quotes):
        out.unresolved.append(f"{pr} (pull request)")
    for name in code_names(quotes):
        bare = name.strip("`").removesuffix("()")
        snake = bool(_SNAKE.match(bare))
        if not p.indexed:
            if snake:
                out.unresolved.append(f"{bare} (setting)")
            else:
                out.unresolved.append(f"{bare} (no code index in {p.lookup_ns})")
            continue
        try:
            ans = await code.symbol(org, p.lookup_ns, name)
        except LoomError as exc:
            if exc.http_status >= 500:
                out.index_failed = True
                out.unresolved.append(f"{bare} (the code index could not be read: {exc.code})")
            continue  # not a name code.symbol reads (prose)
        if len(ans.files) == 1:
            out.files.append(ans.files[0])
        elif len(ans.files) > 1:
            out.unresolved.append(f"{bare} (defined in {len(ans.files)} files: {', '.join(ans.files[:5])})")
        elif ans.only_tests_or_pages:
            paged = any(s["page"] for s in ans.symbols)
            if snake and paged:
                out.unresolved.append(f"{bare} (setting)")
            elif snake:
                continue  # a helper only tests define
            else:
                out.unresolved.append(f"{bare} (only tests or pages)")
        elif snake:
            out.unresolved.append(f"{bare} (setting)")
        else:
            out.unresolved.append(f"{bare} (not in the code index)")
    out.files = [f for f in dict.fromkeys(out.files) if not is_test_path(f)]
    return out

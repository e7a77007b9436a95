"""The code index: repositories, their code namespaces, and the symbols their files define
(spec 003 names `code.symbol`, `code.repos` and a repository's trunk and branch code namespaces;
this is the smallest index its decision extraction reads).

- A repository is registered by the first `loom code index` of it (the operator's): its id, the
  `repo:<id>` tag's, is the lower-cased `owner/name`; its remotes are the checkout's remotes that
  name that owner/name (a fork's remote names its own owner, so it never matches the upstream);
  its trunk code namespace is `code-<owner>-<name>` unless the first run names another.
- A code namespace holds one file set: the trunk's (no --branch) or a branch's
  (`<trunk>--<branch>`). Indexing it again replaces the set.
- `code.repos` lists the repositories whose trunk the caller may read, or those a checkout's
  remote names; `code.symbol` answers a name's defining files in one code namespace, read as the
  caller's role there (viewer).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from loom_core.errors import ErrorCode, NotFound, ValidationFailed
from loom_core.identity.store import IdentityStore
from loom_core.store import Store, ch_time

from ..domain.code_symbols import (
    IndexedFile,
    SymbolRow,
    branch_namespace,
    parse_lookup,
    prefer_classes,
    remote_slug,
    repo_slug,
    trunk_namespace,
)
from ..domain.decision_extract import is_test_path
from ..store.code import CodeStore, NamespaceMeta, RepoRow, SymbolWrite


class FoundSymbol(SymbolRow):
    """A lookup's symbol, marked where it is defined in a test or is a Markdown page."""

    test: bool
    page: bool


@dataclass(frozen=True, slots=True)
class SymbolAnswer:
    symbols: list[FoundSymbol]
    # The defining code files (tests and pages aside) after preferring a class over its constructor.
    files: list[str]
    # Defined only in tests or Markdown pages (and so linking nothing).
    only_tests_or_pages: bool


def _remote_key(remote: str) -> str | None:
    found = remote_slug(remote)
    return f"{found[0]}/{found[1]}" if found else None


class CodeIndex:
    def __init__(self, store: Store, identity: IdentityStore) -> None:
        self.code = CodeStore(store)
        self.identity = identity

    # --- repositories

    async def repos(self, org: str) -> list[RepoRow]:
        return await self.code.repos(org)

    async def repo(self, org: str, owner_name_or_remote: str) -> RepoRow | None:
        """The registered repository `OWNER/NAME` (or a remote URL) names, matched by owner/name."""
        slug = repo_slug(owner_name_or_remote)
        if slug is None:
            return None
        return await self.code.repo(org, slug)

    async def matching_remote(self, org: str, remote: str) -> list[RepoRow]:
        """The repositories a checkout's remote is one of (host, owner and name, in any URL form)."""
        key = _remote_key(remote)
        if key is None:
            raise ValidationFailed("remote: not a git remote URL (https://host/owner/name, git@host:owner/name)", {"field": "remote"})
        return [r for r in await self.repos(org) if key in r["remotes"]]

    async def code_namespace(self, org: str, namespace: str) -> tuple[RepoRow, str] | None:
        """The repository and branch ('' for its trunk) whose code namespace `namespace` is."""
        meta = await self.code.namespace(org, namespace)
        if meta is None:
            return None
        row = await self.code.repo(org, meta["repo_id"])
        return (row, str(meta["branch"])) if row else None

    async def register(self, org: str, owner_name: str, remotes: Sequence[str], trunk: str = "") -> RepoRow:
        slug = repo_slug(owner_name)
        if slug is None or "/" not in owner_name:
            raise ValidationFailed("repo: OWNER/NAME", {"field": "repo"})
        owner, name = owner_name.strip().removesuffix(".git").split("/", 1)
        keys = sorted({k for k in (_remote_key(r) for r in remotes) if k is not None and k.split("/", 1)[1] == slug})
        repo = await self.code.repo(org, slug)
        if repo is not None:
            merged = sorted({*repo["remotes"], *keys})
            if merged == repo["remotes"]:
                return repo
            repo = {**repo, "remotes": merged}
        else:
            repo = RepoRow(repo_id=slug, owner=owner, name=name, remotes=keys, trunk_namespace=trunk or trunk_namespace(slug))
        await self.code.put_repo(org, repo, time.time_ns(), ch_time())
        return repo

    # --- indexing

    async def index(
        self,
        org: str,
        owner_name: str,
        *,
        namespace: str,
        branch: str,
        remotes: Sequence[str],
        commit: str,
        files: Sequence[IndexedFile],
    ) -> tuple[RepoRow, str, int]:
        """Replace a code namespace's file set with `files` (each {path, symbols: [{name,
        qualname, fqname, kind, line}]}); the namespace is made when it is missing. Returns the
        repository, the namespace and the number of symbols."""
        if not await self.identity.list_namespaces(org):
            raise NotFound(ErrorCode.RESOURCE_NOT_FOUND, f"no org {org} (bootstrap it first: loom admin bootstrap)")
        repo = await self.register(org, owner_name, remotes, "" if branch else namespace)
        ns = branch_namespace(repo["trunk_namespace"], branch) if branch else repo["trunk_namespace"]
        held = await self.code.namespace(org, ns)
        if held is not None and held["repo_id"] != repo["repo_id"]:
            raise ValidationFailed(f"namespace {ns} is the code namespace of {held['repo_id']}", {"field": "namespace"})
        await self.identity.create_namespace(org, ns, f"code of {repo['owner']}/{repo['name']}" + (f" on {branch}" if branch else ""))
        symbols = [
            SymbolWrite(path=f["path"], line=1, name=f["path"].rsplit("/", 1)[-1], qualname=f["path"], fqname=f["path"], kind="file")
            for f in files
        ] + [SymbolWrite(path=f["path"], **s) for f in files for s in f["symbols"]]
        meta = NamespaceMeta(repo_id=repo["repo_id"], branch=branch, commit=commit, files=len(files))
        await self.code.replace_files(org, ns, meta, symbols, time.time_ns(), ch_time())
        return repo, ns, len(symbols) - len(files)

    # --- code.symbol

    async def symbol(self, org: str, namespace: str, raw: str) -> SymbolAnswer:
        lookup = parse_lookup(raw)
        if lookup is None:
            raise ValidationFailed("name: a name (Foo), a qualified name (a.b.Foo) or a path (src/a.py)", {"field": "name"})
        if lookup.path:
            rows = await self.code.by_path(org, namespace, lookup.path)
        else:
            rows = prefer_classes(await self.code.by_name(org, namespace, lookup.name, lookup.qualified))
        out = [FoundSymbol(**r, test=is_test_path(r["path"]), page=r["kind"] == "page") for r in rows]
        files = list(dict.fromkeys(r["path"] for r in out if not r["test"] and not r["page"]))
        return SymbolAnswer(out, files, bool(out) and not files)

"""The code index's tables and SQL.

- code_repos: the registered repositories of an org (ReplacingMergeTree on version): the id its
  rows are tagged `repo:<id>` with (the lower-cased `owner/name`), the owner and name as
  registered, its remotes (`host/owner/name`, lower-cased, as remote_slug reads them) and its
  trunk code namespace.
- code_namespaces: each code namespace (a trunk's, branch '', or a branch's) with its repository
  and the generation its current file set was indexed under (ReplacingMergeTree on generation).
- code_symbols: every tracked file (kind `file`, line 1) and the symbols each defines, filed under the generation of the run that
  read them. A run writes its symbols first and its code_namespaces row last, so a reader sees the
  whole old file set or the whole new one; the older generations are deleted after.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict

from loom_core.store import Migration, Store, query_as

from ..domain.code_symbols import SymbolRow

REPOS = "{db}.code_repos"
NAMESPACES = "{db}.code_namespaces"
SYMBOLS = "{db}.code_symbols"
LOOKUP_MAX = 200

CODE_MIGRATIONS = [
    Migration(
        "decisions",
        "code_repos",
        """
        CREATE TABLE IF NOT EXISTS {db}.code_repos (
            org LowCardinality(String),
            repo_id String,
            owner String,
            name String,
            remotes Array(String),
            trunk_namespace String,
            version UInt64,
            ts DateTime64(6, 'UTC')
        ) ENGINE = ReplacingMergeTree(version)
        ORDER BY (org, repo_id)""",
    ),
    Migration(
        "decisions",
        "code_namespaces",
        """
        CREATE TABLE IF NOT EXISTS {db}.code_namespaces (
            org LowCardinality(String),
            namespace String,
            repo_id String,
            branch String,
            commit String,
            files UInt32,
            generation UInt64,
            ts DateTime64(6, 'UTC')
        ) ENGINE = ReplacingMergeTree(generation)
        ORDER BY (org, namespace)""",
    ),
    Migration(
        "decisions",
        "code_symbols",
        """
        CREATE TABLE IF NOT EXISTS {db}.code_symbols (
            org LowCardinality(String),
            namespace String,
            generation UInt64,
            path String,
            line UInt32,
            name String,
            qualname String,
            fqname String,
            kind LowCardinality(String)
        ) ENGINE = MergeTree
        ORDER BY (org, namespace, name, path)""",
    ),
]

_REPO_COLS = "repo_id, owner, name, remotes, trunk_namespace"
# A lookup's answer columns, and its filter to the namespace's current file set (the generation
# its code_namespaces row names: older ones are being deleted, newer ones still being written).
_SYMBOL_COLS = "path, line, name, qualname, kind"
_IN_CURRENT_FILES = (
    "org = {org:String} AND namespace = {ns:String} "
    f"AND generation = (SELECT max(generation) FROM {NAMESPACES} FINAL WHERE org = {{org:String}} AND namespace = {{ns:String}})"
)


class RepoRow(TypedDict):
    """A code_repos row (its columns less org, version and ts)."""

    repo_id: str
    owner: str
    name: str
    remotes: list[str]
    trunk_namespace: str


class NamespaceMeta(TypedDict):
    """What a code_namespaces row says of its file set."""

    repo_id: str
    branch: str
    commit: str
    files: int


class CodeNamespaceRow(NamespaceMeta):
    generation: int


class SymbolWrite(TypedDict):
    """A code_symbols row as an indexing run writes it (its org, namespace and generation aside)."""

    path: str
    line: int
    name: str
    qualname: str
    fqname: str
    kind: str


@dataclass(slots=True)
class CodeStore:
    store: Store

    # --- repositories

    async def repos(self, org: str) -> list[RepoRow]:
        return await query_as(
            self.store,
            RepoRow,
            f"SELECT {_REPO_COLS} FROM {REPOS} FINAL WHERE org = {{org:String}} ORDER BY repo_id",
            {"org": org},
        )

    async def repo(self, org: str, repo_id: str) -> RepoRow | None:
        rows = await query_as(
            self.store,
            RepoRow,
            f"SELECT {_REPO_COLS} FROM {REPOS} FINAL WHERE org = {{org:String}} AND repo_id = {{id:String}}",
            {"org": org, "id": repo_id},
        )
        return rows[0] if rows else None

    async def put_repo(self, org: str, repo: RepoRow, version: int, ts: str) -> None:
        await self.store.insert(REPOS, [{"org": org, **repo, "version": version, "ts": ts}])

    # --- code namespaces

    async def namespace(self, org: str, namespace: str) -> CodeNamespaceRow | None:
        """The code namespace's repository, branch ('' for the trunk) and current generation."""
        rows = await query_as(
            self.store,
            CodeNamespaceRow,
            f"SELECT repo_id, branch, commit, files, generation FROM {NAMESPACES} FINAL "
            "WHERE org = {org:String} AND namespace = {ns:String}",
            {"org": org, "ns": namespace},
        )
        return rows[0] if rows else None

    async def replace_files(
        self, org: str, namespace: str, meta: NamespaceMeta, symbols: Sequence[SymbolWrite], generation: int, ts: str
    ) -> None:
        rows = [{"org": org, "namespace": namespace, "generation": generation, **s} for s in symbols]
        for i in range(0, len(rows), 50_000):
            await self.store.insert(SYMBOLS, rows[i : i + 50_000])
        await self.store.insert(NAMESPACES, [{"org": org, "namespace": namespace, **meta, "generation": generation, "ts": ts}])
        await self.store.execute(
            f"DELETE FROM {SYMBOLS} WHERE org = {{org:String}} AND namespace = {{ns:String}} AND generation < {{g:UInt64}}",
            {"org": org, "ns": namespace, "g": generation},
        )

    # --- lookups in the current file set

    async def by_name(self, org: str, namespace: str, name: str, qualified: str) -> list[SymbolRow]:
        """Symbols named `name`; with `qualified` (`a.b.C`), those whose qualified name, or module
        and qualified name, is it or ends with `.` + it."""
        return await query_as(
            self.store,
            SymbolRow,
            f"SELECT {_SYMBOL_COLS} FROM {SYMBOLS} WHERE {_IN_CURRENT_FILES} "
            "AND name = {name:String} AND kind != 'file' "
            "AND ({q:String} = '' OR qualname = {q:String} OR fqname = {q:String} OR endsWith(fqname, concat('.', {q:String}))) "
            "ORDER BY path, line LIMIT {lim:UInt32}",
            {"org": org, "ns": namespace, "name": name, "q": qualified, "lim": LOOKUP_MAX},
        )

    async def by_path(self, org: str, namespace: str, path: str) -> list[SymbolRow]:
        """Tracked files whose path is `path` or ends with `/` + it."""
        return await query_as(
            self.store,
            SymbolRow,
            f"SELECT {_SYMBOL_COLS} FROM {SYMBOLS} WHERE {_IN_CURRENT_FILES} AND kind = 'file' "
            "AND (path = {p:String} OR endsWith(path, concat('/', {p:String}))) "
            "ORDER BY path LIMIT {lim:UInt32}",
            {"org": org, "ns": namespace, "p": path, "lim": LOOKUP_MAX},
        )

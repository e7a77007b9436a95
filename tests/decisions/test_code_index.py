"""The code index (spec 003 names code.repos, code.symbol and a repository's trunk and branch code
namespaces): `loom code index` over a real git checkout made here, code.symbol and code.repos on
every door with their refusals, and `loom decisions extract --repo/--into` reading it (Repository,
Tags, Rows from an earlier run, Files) against the local model emulator."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from loom import Agent
from loom_core.identity.tokens import Principal, new_token_id
from loom_decisions.code_cli import read_checkout
from loom_decisions.domain.code_symbols import parse_lookup, remote_slug, repo_slug, symbols_of
from loom_decisions.domain.decision_extract import code_names, pull_requests
from loom_decisions.plane import DecisionsPlane
from loom_runner.cli import main
from loom_runner.embedded import admin_app
from loom_runner.http import HttpServer
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import call, unique

from .conftest import STORAGE, Desk
from .llm_emulator import LlmEmulator
from .test_extract import model, plane_of

PY_STORE = '''"""The store."""

MAX_PARTS = 300


class MergeTreeData:
    """Parts on disk."""

    def __init__(self) -> None:
        self.parts = []

    def load_parts(self) -> None:
        pass


def cold_path(name: str) -> str:
    return name
'''
CPP = """namespace DB {
class ColdStorage {
public:
    ColdStorage();
    void spill();
};
ColdStorage::ColdStorage() {}
void ColdStorage::spill() {}
}
"""
TEST_HELPERS = """class FakeStore:
    pass


def make_fixture_rows():
    return []
"""
SETTINGS_PAGE = """# Settings

| name | default |
|---|---|
| `max_spill_rows` | 1000 |

`PageOnlyThing` is described here.
"""
DUP = "class Duplicate:\n    pass\n"
REMOTE = "git@github.com:Acme/Widgets.git"
FORK = "https://github.com/someone/widgets.git"


def git(path: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(path), *args], check=True, capture_output=True)


def make_checkout(root: Path) -> Path:
    repo = root / "widgets"
    files = {
        "src/store/merge_tree.py": PY_STORE,
        "src/cold.cpp": CPP,
        "tests/helpers.py": TEST_HELPERS,
        "docs/settings.md": SETTINGS_PAGE,
        "src/dup_a.py": DUP,
        "src/dup_b.py": DUP,
        "web/app.ts": "export class Dashboard { render(): void {} }\nexport const MAX_TILES = 12;\n",
    }
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    (repo / "untracked.py").parent.mkdir(parents=True, exist_ok=True)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", *files)
    git(repo, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "-m", "init")
    (repo / "untracked.py").write_text("class Untracked:\n    pass\n")
    git(repo, "remote", "add", "origin", REMOTE)
    git(repo, "remote", "add", "fork", FORK)
    return repo


async def index(desk: Desk, path: Path, repo: str = "Acme/Widgets", branch: str = "", namespace: str = "") -> dict[str, Any]:
    files, remotes, commit = await asyncio.to_thread(read_checkout, path)
    body = {"org": desk.tenant.org, "repo": repo, "branch": branch, "namespace": namespace, "remotes": remotes, "commit": commit}
    return await plane_of(desk).index_code({**body, "files": files})


def token_for(desk: Desk, sub: str, roles: dict[str, str], default_namespace: str = "") -> str:
    now = int(time.time())
    p = Principal(
        jti=new_token_id("test-"),
        sub=sub,
        org=desk.tenant.org,
        roles=roles,
        iat=now,
        exp=now + 3600,
        default_namespace=default_namespace,
    )
    return desk.inst.runtime.codec.encode(p)


async def grant(desk: Desk, subject: str, namespace: str, role: str) -> None:
    await desk.inst.runtime.identity.set_grant(desk.tenant.org, namespace, subject, role)
    await desk.inst.runtime.auth.publish_grant_change(desk.tenant.org, subject)


@pytest.fixture
async def indexed(desk: Desk, tmp_path: Path) -> AsyncIterator[tuple[Path, str]]:
    path = make_checkout(tmp_path)
    out = await index(desk, path)
    assert "error" not in out, out
    yield path, str(out["namespace"])


# --- the parsers and name forms (no store)


def test_each_language_records_its_classes_functions_methods_and_constants() -> None:
    py = {(s.qualname, s.kind, s.line) for s in symbols_of("src/store/merge_tree.py", PY_STORE)}
    assert {("MAX_PARTS", "constant", 3), ("MergeTreeData", "class", 6), ("MergeTreeData.load_parts", "method", 12)} <= py
    assert ("cold_path", "function", 16) in py
    cpp = {(s.qualname, s.kind) for s in symbols_of("src/cold.cpp", CPP)}
    assert {("DB.ColdStorage", "class"), ("DB.ColdStorage.ColdStorage", "method"), ("DB.ColdStorage.spill", "method")} == cpp
    go = {
        (s.qualname, s.kind)
        for s in symbols_of("a.go", "package a\nconst Limit = 3\ntype S struct{}\nfunc (s *S) Run() {}\nfunc New() {}\n")
    }
    assert go == {("Limit", "constant"), ("S", "class"), ("S.Run", "method"), ("New", "function")}
    rs = {(s.qualname, s.kind) for s in symbols_of("a.rs", "struct P;\nimpl P { fn go(&self) {} }\nconst MAX: u8 = 1;\nfn f() {}\n")}
    assert rs == {("P", "class"), ("P.go", "method"), ("MAX", "constant"), ("f", "function")}
    java = {(s.qualname, s.kind) for s in symbols_of("A.java", "class A { static final int MAX_N = 1; A() {} void run() {} }")}
    assert java == {("A", "class"), ("A.MAX_N", "constant"), ("A.A", "method"), ("A.run", "method")}
    js = {(s.qualname, s.kind) for s in symbols_of("a.js", "class K { m() {} }\nfunction f() { const INNER = 1; }\nconst TOP = 2;\n")}
    assert js == {("K", "class"), ("K.m", "method"), ("f", "function"), ("TOP", "constant")}
    page = {(s.qualname, s.kind) for s in symbols_of("docs/settings.md", SETTINGS_PAGE + "```\n`in_code`\n```\n")}
    assert page == {("max_spill_rows", "page"), ("PageOnlyThing", "page")}
    assert symbols_of("broken.py", "def (:\n") == [] and symbols_of("image.png", "x") == []


def test_remotes_in_every_form_name_one_owner_and_name() -> None:
    for remote in (
        "git@github.com:Acme/Widgets.git",
        "https://github.com/acme/widgets",
        "https://user@github.com/acme/widgets.git",
        "ssh://git@github.com:22/acme/widgets.git",
    ):
        assert remote_slug(remote) == ("github.com", "acme/widgets"), remote
    assert remote_slug("not a remote") is None and remote_slug("https://github.com/acme") is None
    assert repo_slug("Acme/Widgets") == "acme/widgets" and repo_slug(REMOTE) == "acme/widgets" and repo_slug("widgets") is None


def test_names_a_document_writes_and_how_code_symbol_reads_them() -> None:
    quotes = ["`MergeTreeData` moved to store.merge_tree.MergeTreeData; ColdStorage::spill runs after PR #4521, e.g. at night"]
    assert code_names(quotes) == ["MergeTreeData", "store.merge_tree.MergeTreeData", "ColdStorage::spill"]
    assert code_names(["The ColdStorage owns it. Then Duplicate"]) == ["ColdStorage"]  # a bare class name: two capitals
    assert pull_requests(quotes) == ["#4521"]
    assert parse_lookup("`a.b.C`") is not None and parse_lookup("`a.b.C`").qualified == "a.b.C"  # type: ignore[union-attr]
    assert parse_lookup("DB::Cold()").name == "Cold"  # type: ignore[union-attr]
    assert parse_lookup("src/cold.cpp").path == "src/cold.cpp"  # type: ignore[union-attr]
    assert parse_lookup("merge_tree.py").path == "merge_tree.py"  # type: ignore[union-attr]
    assert parse_lookup("two words") is None and parse_lookup("a..b") is None


# --- the index and code.symbol


async def test_code_index_reads_the_tracked_files_and_code_symbol_answers_their_definitions(desk: Desk, indexed: tuple[Path, str]) -> None:
    _, ns = indexed
    assert ns == "code-acme-widgets"
    await grant(desk, "sa:reader", ns, "viewer")
    token = token_for(desk, "sa:reader", {ns: "viewer"})
    async with desk.tenant.client(token, **{"X-Loom-Namespace": ns}) as c:

        async def symbol(name: str) -> dict[str, Any]:
            r = await call(c, "code.symbol", name=name)
            assert r.status_code == 200, r.text
            return dict(r.json())

        got = await symbol("MergeTreeData")
        assert got["files"] == ["src/store/merge_tree.py"] and got["only_tests_or_pages"] is False
        assert got["symbols"] == [
            {
                "path": "src/store/merge_tree.py",
                "line": 6,
                "kind": "class",
                "name": "MergeTreeData",
                "qualname": "MergeTreeData",
                "test": False,
                "page": False,
            }
        ]
        assert (await symbol("store.merge_tree.MergeTreeData.load_parts"))["files"] == ["src/store/merge_tree.py"]
        assert (await symbol("`src.store.merge_tree.MAX_PARTS`"))["symbols"][0]["kind"] == "constant"
        # A class is preferred over its constructor (C++ ColdStorage::ColdStorage).
        cold = await symbol("ColdStorage")
        assert [(s["kind"], s["line"]) for s in cold["symbols"]] == [("class", 2)] and cold["files"] == ["src/cold.cpp"]
        assert (await symbol("DB::ColdStorage::spill"))["files"] == ["src/cold.cpp"]
        assert (await symbol("Dashboard"))["files"] == ["web/app.ts"]
        assert sorted((await symbol("Duplicate"))["files"]) == ["src/dup_a.py", "src/dup_b.py"]
        only_tests = await symbol("FakeStore")
        assert only_tests["files"] == [] and only_tests["only_tests_or_pages"] is True and only_tests["symbols"][0]["test"] is True
        page = await symbol("max_spill_rows")
        assert page["only_tests_or_pages"] is True and page["symbols"][0]["page"] is True
        assert (await symbol("src/cold.cpp"))["symbols"][0]["kind"] == "file"
        assert (await symbol("merge_tree.py"))["files"] == ["src/store/merge_tree.py"]
        missing = await symbol("Untracked")  # not tracked by git: not read
        assert missing.get("symbols", []) == [] and missing.get("only_tests_or_pages", False) is False


async def test_indexing_again_replaces_the_file_set_and_a_branch_has_its_own_namespace(
    desk: Desk, indexed: tuple[Path, str], tmp_path: Path
) -> None:
    path, ns = indexed
    git(path, "rm", "-q", "src/dup_b.py")
    (path / "src/cold.cpp").write_text(CPP.replace("ColdStorage", "WarmStorage"))
    git(path, "checkout", "-q", "-b", "feature/warm")
    git(path, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qam", "warm")
    branch = await index(desk, path, branch="feature/warm")
    assert branch["namespace"] == "code-acme-widgets--feature-warm"
    code = plane_of(desk).code
    assert (await code.symbol(desk.tenant.org, branch["namespace"], "WarmStorage")).files == ["src/cold.cpp"]
    assert (await code.symbol(desk.tenant.org, ns, "ColdStorage")).files == ["src/cold.cpp"]  # the trunk is untouched
    again = await index(desk, path)
    assert again["namespace"] == ns
    assert (await code.symbol(desk.tenant.org, ns, "ColdStorage")).symbols == []
    assert (await code.symbol(desk.tenant.org, ns, "Duplicate")).files == ["src/dup_a.py"]
    assert await desk.inst.runtime.identity.get_namespace(desk.tenant.org, branch["namespace"]) is not None


async def test_code_symbol_refuses_a_caller_without_a_role_another_org_and_bad_input(desk: Desk, indexed: tuple[Path, str]) -> None:
    _, ns = indexed
    nobody = token_for(desk, "sa:nobody", {desk.tenant.namespace: "admin"})  # a role elsewhere, none in the code namespace
    async with desk.tenant.client(nobody, **{"X-Loom-Namespace": ns}) as c:
        r = await call(c, "code.symbol", name="MergeTreeData")
        assert r.status_code == 403 and r.json()["error"]["code"] == "AUTH_INSUFFICIENT", r.text
    async with desk.tenant.client(**{"X-Loom-Namespace": ns, "X-Loom-Org": unique("org")}) as c:
        r = await call(c, "code.symbol", name="MergeTreeData")
        assert r.status_code == 403 and r.json()["error"]["code"] == "AUTH_WRONG_ORG", r.text
    async with desk.tenant.client(**{"X-Loom-Namespace": ns}) as c:
        for bad in ({}, {"name": ""}, {"name": "x" * 301}, {"name": "two words"}, {"name": 3}):
            r = await call(c, "code.symbol", **bad)
            assert r.status_code == 422 and r.json()["error"]["code"] == "VALIDATION_FAILED", (bad, r.text)


async def mcp_call(url: str, token: str, tool: str, args: dict[str, Any]) -> Any:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http), mode="legacy") as client,
    ):
        return await client.call_tool(tool, args)


async def test_code_symbol_and_code_repos_over_mcp(desk: Desk, indexed: tuple[Path, str]) -> None:
    _, ns = indexed
    url = desk.inst.base_url + "/mcp"
    await grant(desk, "sa:mcp-reader", ns, "viewer")
    reader = token_for(desk, "sa:mcp-reader", {ns: "viewer"}, default_namespace=ns)  # a plugin's token: its namespace by default
    got = await mcp_call(url, reader, "loom_code_symbol", {"name": "ColdStorage", "namespace": ns})
    assert not got.is_error and got.structured_content["files"] == ["src/cold.cpp"], got
    repos = await mcp_call(url, reader, "loom_code_repos", {"remote": REMOTE})
    assert not repos.is_error and [r["repo_id"] for r in repos.structured_content["repositories"]] == ["acme/widgets"]
    nobody = token_for(desk, "sa:nobody", {desk.tenant.namespace: "admin"})
    refused = await mcp_call(url, nobody, "loom_code_symbol", {"name": "ColdStorage", "namespace": ns})
    assert refused.is_error and refused.structured_content["error"]["code"] == "AUTH_INSUFFICIENT"
    bad = await mcp_call(url, reader, "loom_code_symbol", {"name": "", "namespace": ns})
    assert bad.is_error


# --- code.repos


async def test_code_repos_matches_a_checkouts_remote_in_any_form_and_not_a_fork(desk: Desk, indexed: tuple[Path, str]) -> None:
    _, ns = indexed
    repo = {
        "repo_id": "acme/widgets",
        "owner": "Acme",
        "name": "Widgets",
        "remotes": ["github.com/acme/widgets"],
        "trunk_namespace": ns,
    }
    async with desk.tenant.client() as c:
        listed = await call(c, "code.repos")
        assert listed.status_code == 200 and listed.json()["repositories"] == [repo], listed.text
        for remote in ("https://github.com/acme/widgets.git", "ssh://git@github.com/Acme/Widgets", REMOTE):
            r = await call(c, "code.repos", remote=remote)
            assert r.json()["repositories"] == [repo], (remote, r.text)
        fork = await call(c, "code.repos", remote=FORK)  # the checkout's fork remote was not registered
        assert fork.status_code == 200 and fork.json().get("repositories", []) == []
        r = await call(c, "code.repos", remote="not a url")
        assert r.status_code == 422 and r.json()["error"]["code"] == "VALIDATION_FAILED"
    # A caller who may read the trunk sees it; one who holds a role only elsewhere sees none.
    reader = token_for(desk, "sa:trunk-reader", {ns: "viewer"})
    await grant(desk, "sa:trunk-reader", ns, "viewer")
    async with Agent(org=desk.tenant.org, namespace=ns, agent="cli", api_key=reader, base_url=desk.tenant.base_url) as a:
        assert [r["repo_id"] for r in (await a.ops.code.repos())["repositories"]] == ["acme/widgets"]
        assert (await a.ops.code.symbol(name="MergeTreeData"))["files"] == ["src/store/merge_tree.py"]
    other = token_for(desk, "sa:other-team", {desk.tenant.namespace: "viewer"})
    await desk.grant("other-team", "viewer")
    async with desk.tenant.client(other, **{"X-Loom-Namespace": desk.tenant.namespace}) as c:
        r = await call(c, "code.repos")
        assert r.status_code == 200 and r.json().get("repositories", []) == []
    nobody = token_for(desk, "sa:nobody", {})
    async with desk.tenant.client(nobody) as c:
        r = await call(c, "code.repos")
        assert r.status_code == 403 and r.json()["error"]["code"] == "AUTH_INSUFFICIENT", r.text
    async with desk.tenant.client(**{"X-Loom-Org": unique("org")}) as c:
        r = await call(c, "code.repos")
        assert r.status_code == 403 and r.json()["error"]["code"] == "AUTH_WRONG_ORG", r.text


# --- decisions extract --repo / --into

DOC = """# Parts

## Loading

We decided that `MergeTreeData` loads parts lazily, because startup must stay under a second.

## Spill

We decided to spill in ColdStorage::spill at most `max_spill_rows` rows, as PR #4521 measured. The helper `make_fixture_rows` and FakeStore only serve tests. `Duplicate` stays.
"""
LOAD = {
    "category": "storage",
    "scenario": "when parts load",
    "outcome": "load parts lazily",
    "outcome_quotes": ["We decided that `MergeTreeData` loads parts lazily"],
    "reasons": [{"text": "startup must stay under a second", "quotes": ["startup must stay under a second"]}],
    "rejected": [],
    "stage": "decided",
    "constraint": False,
}
SPILL = {
    "category": "storage",
    "scenario": "where rows spill",
    "outcome": "spill in ColdStorage::spill",
    "outcome_quotes": ["We decided to spill in ColdStorage::spill at most `max_spill_rows` rows, as PR #4521 measured"],
    "reasons": [],
    "rejected": [
        {
            "option": "keep in memory",
            "reason": "",
            "quotes": ["The helper `make_fixture_rows` and FakeStore only serve tests. `Duplicate` stays."],
        }
    ],
    "stage": "decided",
    "constraint": False,
}
LOAD_KEY = "decision/storage/when-parts-load"
SPILL_KEY = "decision/storage/where-rows-spill"


@pytest.fixture
async def emu() -> AsyncIterator[LlmEmulator]:
    e = LlmEmulator(decisions=[LOAD, SPILL])
    async with e.running():
        yield e


async def extract(desk: Desk, emu: LlmEmulator, *, apply: bool, ns: str = "", **kw: Any) -> Any:
    plane: DecisionsPlane = plane_of(desk)
    return await plane.extract(
        desk.tenant.org, ns or desk.tenant.namespace, "docs/parts.md", document=DOC, apply=apply, model=model(emu), **kw
    )


async def test_extract_with_repo_into_source_looks_names_up_in_the_trunk_and_tags_the_rows(
    desk: Desk, indexed: tuple[Path, str], emu: LlmEmulator
) -> None:
    dry = await extract(desk, emu, apply=False, repo="acme/widgets")
    text = "\n".join(dry.lines)
    assert dry.exit_code == 0, text
    assert '"files": ["src/store/merge_tree.py"]' in text and '"repo:acme/widgets"' in text
    spill = next(line for line in dry.lines if line.startswith(f"{SPILL_KEY}: unresolved: "))
    assert "#4521 (pull request)" in spill and "max_spill_rows (setting)" in spill
    assert "FakeStore (only tests or pages)" in spill and "make_fixture_rows" not in spill  # a helper only tests define
    assert "Duplicate (defined in 2 files: src/dup_a.py, src/dup_b.py)" in spill
    assert emu.kinds() == ["read", "support"]

    rep = await extract(desk, emu, apply=True, repo="https://github.com/Acme/Widgets.git", into="source")
    assert rep.exit_code == 0, rep.lines
    reader = desk.as_agent("reader")
    load = await reader.ok("memory.get", memory_key=LOAD_KEY)
    assert load["files"] == ["src/store/merge_tree.py"] and "repo:acme/widgets" in load["tags"]
    assert load["source_resource_id"] == f"knowledge:{desk.tenant.namespace}/docs/parts.md#Parts > Loading"
    spill_row = await reader.ok("memory.get", memory_key=SPILL_KEY)
    assert spill_row["files"] == ["src/cold.cpp"]
    # The pre-edit block of a session in the document's namespace, for the repository the plugin names.
    block = await reader.ok("memory.for_file", path="src/store/merge_tree.py", repo="acme/widgets")
    assert [e["memory_key"] for e in block["entries"]] == [LOAD_KEY]
    assert (await reader.ok("memory.for_file", path="src/store/merge_tree.py", repo="other/repo")).get("entries", []) == []

    # A pinned row the run keeps as it is: already tagged, it stays; a second run writes nothing.
    emu.stated = {LOAD_KEY, SPILL_KEY}
    again = await extract(desk, emu, apply=True, repo="acme/widgets")
    assert again.exit_code == 0 and again.written == [] and again.tagged == [], again.lines


async def test_a_first_run_with_repo_links_rows_an_earlier_run_wrote_without_it(
    desk: Desk, indexed: tuple[Path, str], emu: LlmEmulator
) -> None:
    first = await extract(desk, emu, apply=True)  # no --repo: names unresolved, no tag
    assert first.exit_code == 0, first.lines
    assert any("MergeTreeData (no code index in" in line for line in first.lines)
    a = desk.as_agent("loom-decisions", user="-", session="-")
    await a.ok("memory.pin", memory_key=SPILL_KEY)
    emu.stated = {LOAD_KEY, SPILL_KEY}
    rep = await extract(desk, emu, apply=True, repo="acme/widgets")
    assert rep.exit_code == 0, rep.lines
    # Not pinned: re-recorded in its stored words with the files that now resolve and the tag.
    assert f"{LOAD_KEY}: re-recorded in its stored words (row fields changed): recorded v2" in rep.lines
    load = await a.ok("memory.get", memory_key=LOAD_KEY)
    assert load["files"] == ["src/store/merge_tree.py"] and "repo:acme/widgets" in load["tags"]
    # Pinned: kept as it is, the tag added by a tags-only write (its pin and value stay).
    assert SPILL_KEY in rep.tagged
    spill = await a.ok("memory.get", memory_key=SPILL_KEY)
    assert spill["pinned"] is True and "repo:acme/widgets" in spill["tags"] and spill["files"] == []


async def test_extract_into_repo_writes_to_the_trunk_untagged_citing_the_document_where_it_is(
    desk: Desk, indexed: tuple[Path, str], emu: LlmEmulator
) -> None:
    _, trunk = indexed
    rep = await extract(desk, emu, apply=True, repo="acme/widgets", into="repo")
    assert rep.exit_code == 0, rep.lines
    async with desk.tenant.client(**{"X-Loom-Namespace": trunk}) as c:
        r = await call(c, "memory.get", memory_key=LOAD_KEY)
        assert r.status_code == 200, r.text
        row = r.json()
        assert not any(t.startswith("repo:") for t in row["tags"]) and row["files"] == ["src/store/merge_tree.py"]
        assert row["source_resource_id"] == f"knowledge:{desk.tenant.namespace}/docs/parts.md#Parts > Loading"
    r = await desk.as_agent("reader").raw("memory.get", memory_key=LOAD_KEY)
    assert r.status_code == 404

    # Rows from an earlier run: this document's rows are in the trunk, so a run writing to the
    # document's namespace refuses before any model call.
    emu.requests.clear()
    refused = await extract(desk, emu, apply=True, repo="acme/widgets", into="source")
    assert refused.exit_code == 1 and f"2 row(s) this document's extraction wrote are in {trunk}" in refused.lines[-1], refused.lines
    assert emu.requests == []


async def test_extract_refuses_an_unknown_repository_into_without_repo_and_rows_of_another_repository(
    desk: Desk, indexed: tuple[Path, str], emu: LlmEmulator, tmp_path: Path
) -> None:
    unknown = await extract(desk, emu, apply=False, repo="acme/nothing")
    assert unknown.exit_code == 1 and "repository acme/nothing is not registered" in unknown.lines[-1]
    no_repo = await extract(desk, emu, apply=False, into="repo")
    assert no_repo.exit_code == 1 and no_repo.lines[-1] == "--into needs --repo"
    assert (await extract(desk, emu, apply=True, repo="acme/widgets")).exit_code == 0
    # Another repository (a fork registered as its own) is not this document's: refused, named.
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q")
    git(other, "remote", "add", "origin", FORK)
    (other / "a.py").write_text("class A:\n    pass\n")
    git(other, "add", "a.py")
    git(other, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", "a")
    assert "error" not in await index(desk, other, repo="someone/widgets")
    emu.requests.clear()
    wrong = await extract(desk, emu, apply=True, repo="someone/widgets")
    assert wrong.exit_code == 1 and "linked to repository Acme/Widgets (repo:acme/widgets)" in wrong.lines[-1], wrong.lines
    plain = await extract(desk, emu, apply=True)
    assert plain.exit_code == 1 and "run with --repo Acme/Widgets" in plain.lines[-1]
    assert emu.requests == []


async def test_the_commands_index_a_checkout_and_extract_with_repo_through_the_admin_socket(
    desk: Desk, emu: LlmEmulator, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    checkout = make_checkout(tmp_path)
    doc = tmp_path / "parts.md"
    doc.write_text(DOC)
    data = tmp_path / "data"
    data.mkdir()
    admin = HttpServer(admin_app(desk.inst.runtime, desk.inst.planes), uds=str(data / "admin.sock"))
    await admin.start()
    try:
        monkeypatch.setenv("LOOM_DATA_DIR", str(data))
        monkeypatch.setenv("LOOM_LLM_URL", emu.url)
        monkeypatch.setenv("LOOM_LLM_API_KEY", emu.key)
        monkeypatch.setenv("LOOM_LLM_MODEL", "emulated")
        org = desk.tenant.org
        argv = ["code", "index", "--org", org, "--repo", "Acme/Widgets", "--path", str(checkout)]
        assert await asyncio.to_thread(main, argv) == 0
        out = capsys.readouterr().out
        assert "of acme/widgets into code-acme-widgets (remotes: github.com/acme/widgets)" in out
        assert await asyncio.to_thread(main, [*argv[:-1], str(tmp_path / "nowhere")]) == 1
        assert "is not a git checkout" in capsys.readouterr().err
        assert await asyncio.to_thread(main, ["code", "index", "--org", unique("org"), *argv[4:]]) == 1
        assert "RESOURCE_NOT_FOUND: no org" in capsys.readouterr().err
        assert await asyncio.to_thread(main, [*argv[:5], "widgets", *argv[6:]]) == 1
        assert "VALIDATION_FAILED: repo: OWNER/NAME" in capsys.readouterr().err
        base = ["decisions", "extract", "--org", org, "--namespace", desk.tenant.namespace, "--source-uri", f"file://{doc}"]
        assert await asyncio.to_thread(main, [*base, "--repo", "Acme/Widgets", "--apply"]) == 0
        assert f"{LOAD_KEY}: new (decided): recorded v1" in capsys.readouterr().out
        row = await desk.as_agent("reader").ok("memory.get", memory_key=LOAD_KEY)
        assert row["files"] == ["src/store/merge_tree.py"] and "repo:acme/widgets" in row["tags"]
        assert await asyncio.to_thread(main, [*base, "--repo", "acme/absent"]) == 1
        assert "repository acme/absent is not registered" in capsys.readouterr().out
    finally:
        await admin.stop()


async def test_a_decision_in_the_trunk_reaches_loom_search_from_a_checkout_of_the_repository(desk: Desk, indexed: tuple[Path, str]) -> None:
    _, trunk = indexed
    async with desk.tenant.client(**{"X-Loom-Namespace": trunk}) as c:
        r = await call(c, "decision.record", **STORAGE)
        assert r.status_code == 200, r.text
    here = desk.tenant.namespace
    await grant(desk, "sa:dev", trunk, "viewer")
    await grant(desk, "sa:dev", here, "writer")
    dev = token_for(desk, "sa:dev", {here: "writer", trunk: "viewer"}, default_namespace=here)
    async with desk.tenant.client(dev) as c:
        r = await call(c, "search.unified", query="how long do we keep raw transcripts", namespaces=[here], remote=FORK)
        assert r.status_code == 200 and r.json().get("results", []) == [], r.text  # a fork's remote names no registered repository
        r = await call(c, "search.unified", query="how long do we keep raw transcripts", namespaces=[here], remote=REMOTE)
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["namespaces"][0] == trunk and ("decision", trunk) in {(h["kind"], h["namespace"]) for h in body["results"]}
    # A caller who may not read the trunk: code.repos names no repository, the trunk is not read.
    await grant(desk, "sa:outsider", here, "viewer")
    outsider = token_for(desk, "sa:outsider", {here: "viewer"}, default_namespace=here)
    async with desk.tenant.client(outsider) as c:
        r = await call(c, "search.unified", query="how long do we keep raw transcripts", remote=REMOTE)
        assert r.status_code == 200, r.text
        assert trunk not in r.json().get("namespaces", []) and all(h["namespace"] != trunk for h in r.json().get("results", []))


async def test_a_document_in_the_trunk_looks_names_up_there_and_writes_untagged_rows(
    desk: Desk, indexed: tuple[Path, str], emu: LlmEmulator
) -> None:
    _, trunk = indexed
    for kw in ({}, {"repo": "acme/widgets"}):  # --repo naming the trunk's own repository: --into repo by default
        rep = await extract(desk, emu, apply=False, ns=trunk, **kw)
        text = "\n".join(rep.lines)
        assert rep.exit_code == 0, text
        assert '"files": ["src/store/merge_tree.py"]' in text and "repo:" not in text
    rep = await extract(desk, emu, apply=True, ns=trunk)
    assert rep.exit_code == 0, rep.lines
    async with desk.tenant.client(**{"X-Loom-Namespace": trunk}) as c:
        row = (await call(c, "memory.get", memory_key=LOAD_KEY)).json()
    assert row["files"] == ["src/store/merge_tree.py"] and not any(t.startswith("repo:") for t in row["tags"])
    assert row["source_resource_id"] == f"knowledge:{trunk}/docs/parts.md#Parts > Loading"


async def test_when_the_code_index_cannot_be_read_a_recorded_decision_keeps_its_files(
    desk: Desk, indexed: tuple[Path, str], emu: LlmEmulator
) -> None:
    first = await extract(desk, emu, apply=True, repo="acme/widgets")
    assert first.exit_code == 0, first.lines
    store = desk.inst.runtime.store
    emu.stated = {LOAD_KEY}
    # The index's table out of reach (renamed away, and back after): every lookup fails in the store.
    await store.execute("RENAME TABLE {db}.code_symbols TO {db}.code_symbols_away")
    try:
        rep = await extract(desk, emu, apply=True, repo="acme/widgets")
    finally:
        await store.execute("RENAME TABLE {db}.code_symbols_away TO {db}.code_symbols")
    assert rep.exit_code == 2, rep.lines
    assert f"{LOAD_KEY}: the code index could not be read for a name; its row keeps its files" in rep.lines
    assert f"{LOAD_KEY}: unchanged" in rep.lines
    row = await desk.as_agent("reader").ok("memory.get", memory_key=LOAD_KEY)
    assert row["files"] == ["src/store/merge_tree.py"] and row["version"] == 1

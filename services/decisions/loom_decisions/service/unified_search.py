"""search.unified (spec 003, Decisions: unified search; MCP `loom_search`): one search over the
memories, decisions and tasks the token can read.

Each source is read through its own op, as the caller (loom_core.op_caller): `memory.search`
(memories and decisions: the hybrid search, not a copy of it) and `task.list` (the newest tasks),
per namespace. So each source is authorized as that op is (the role it needs in the namespace,
the token's read scope, the history-policy gate under the caller's agent label) and leaves its
own ledger and exposure rows: a source the caller may not read answers nothing and is named in
`skipped` with its refusal's code. The namespaces are the ones named, else every namespace the
token holds a role in (`namespace.list`), and, with a checkout's `remote`, first the trunk code
namespaces of the repositories it names (`code.repos`, as the caller). Tasks are scored on memory.search's scale (half the
cosine of their title and brief to the query, half the share of the query's words they hold)
with this plane's embedder, so the three kinds rank together.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from loom_core.chain import CallContext
from loom_core.errors import ErrorCode, LoomError, Unavailable
from loom_core.op_caller import OpCaller, caller_headers

from ..domain.ranking import UnifiedHit, merge, score_candidates
from ..domain.statement import PROPOSED_TAG, excerpt
from .embedding import Embedder

NAMESPACES_MAX = 20
# The newest tasks of a namespace a search reads (task.list answers newest first).
TASKS_SCANNED = 100
# A task's text as searched: its title and the brief's strings, cut like a memory's excerpt.
TASK_TEXT_CHARS = 1200
# Task texts embedded before (titles rarely change): a repeated search embeds only new ones.
VECTOR_CACHE_MAX = 4096
SOURCES = ("memory", "decision", "task")


@dataclass(slots=True)
class Skip:
    namespace: str
    source: str
    code: str


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def task_text(task: dict[str, Any]) -> str:
    return excerpt(" ".join([str(task.get("title", "")), *_strings(task.get("brief") or {})]))[:TASK_TEXT_CHARS]


def _skippable(err: LoomError) -> bool:
    """A refusal of this caller for this source (its role, scope, a policy, a namespace it cannot
    see): the source answers nothing. A busy or broken backend is the whole call's failure."""
    return err.http_status < 500 and err.code != ErrorCode.RATE_LIMITED


class UnifiedSearch:
    def __init__(self, embedder: Embedder, ops: OpCaller | None = None) -> None:
        self._embedder = embedder
        self._ops = ops
        self._vectors: OrderedDict[str, list[float]] = OrderedDict()

    def attach(self, ops: OpCaller) -> None:
        """How the plane calls the ops it composes (the runner's relay, or a gateway over HTTP)."""
        self._ops = ops

    async def search(
        self, ctx: CallContext, query: str, limit: int, namespaces: Sequence[str], sources: Sequence[str], remote: str = ""
    ) -> tuple[list[UnifiedHit], list[str], list[Skip]]:
        ops = self._ops
        if ops is None:
            raise Unavailable(
                ErrorCode.BACKEND_UNAVAILABLE,
                "search.unified has no route to the ops it reads: set LOOM_SEARCH_LOOM_URL to a gateway's URL",
                {"setting": "LOOM_SEARCH_LOOM_URL"},
            )
        limit = limit or 10
        wanted = set(sources or SOURCES)
        headers = caller_headers(ctx)
        if namespaces:
            names = list(dict.fromkeys(namespaces))[:NAMESPACES_MAX]
        else:
            listed = await ops("namespace.list", {}, headers, ctx.transport)
            names = sorted(str(n["name"]) for n in listed.get("namespaces", []))[:NAMESPACES_MAX]
        repo_skips: list[Skip] = []
        if remote:
            # A checkout's repositories (code.repos, as the caller): their trunks come first.
            try:
                found = await ops("code.repos", {"remote": remote}, headers, ctx.transport)
            except LoomError as err:
                if not _skippable(err):
                    raise
                found = {}
                repo_skips.append(Skip("", "code", str(err.code)))
            trunks = [str(r["trunk_namespace"]) for r in found.get("repositories", [])]
            names = list(dict.fromkeys([*trunks, *names]))[:NAMESPACES_MAX]

        async def read(ns: str, source: str) -> tuple[list[UnifiedHit], Skip | None]:
            try:
                if source == "memory":
                    return await self._memories(ops, headers, ctx.transport, ns, query, limit, wanted), None
                return await self._tasks(ops, headers, ctx.transport, ns, query, limit), None
            except LoomError as err:
                if not _skippable(err):
                    raise
                return [], Skip(ns, source, str(err.code))

        # memory.search answers memories and decisions; task.list answers tasks.
        reads = [src for src, kinds in (("memory", {"memory", "decision"}), ("task", {"task"})) if wanted & kinds]
        jobs = [(ns, src) for ns in names for src in reads]
        answers = await asyncio.gather(*(read(ns, src) for ns, src in jobs))
        hits = [h for found, _ in answers for h in found]
        skipped = [*repo_skips, *(skip for _, skip in answers if skip is not None)]
        answered = {ns for (ns, _), (_, skip) in zip(jobs, answers, strict=True) if skip is None}
        return merge(query, hits, limit), [ns for ns in names if ns in answered], skipped

    async def _memories(
        self, ops: OpCaller, headers: dict[str, str], transport: str, ns: str, query: str, limit: int, wanted: set[str]
    ) -> list[UnifiedHit]:
        args: dict[str, Any] = {"query": query, "limit": limit, "namespace": ns}
        if wanted & {"memory", "decision"} == {"decision"}:
            args["memory_type"] = "decision"
        found = await ops("memory.search", args, headers, transport)
        out = []
        for h in found.get("hits", []):
            kind = "decision" if h.get("memory_type") == "decision" else "memory"
            if kind not in wanted:
                continue
            stage = ("proposed" if PROPOSED_TAG in h.get("tags", []) else "decided") if kind == "decision" else ""
            out.append(UnifiedHit(kind, ns, str(h["key"]), str(h.get("value", "")), float(h.get("score", 0.0)), stage=stage))
        return out

    async def _tasks(self, ops: OpCaller, headers: dict[str, str], transport: str, ns: str, query: str, limit: int) -> list[UnifiedHit]:
        listed = await ops("task.list", {"namespace": ns, "limit": TASKS_SCANNED}, headers, transport)
        tasks = listed.get("tasks", [])
        if not tasks:
            return []
        texts = [task_text(t) for t in tasks]
        vectors = await self._embed([excerpt(query), *texts])
        q = vectors[0]
        cosines = [sum(a * b for a, b in zip(q, v, strict=True)) for v in vectors[1:]]
        scored = [
            UnifiedHit(
                "task",
                ns,
                str(t["task_id"]),
                str(t.get("title", "")),
                score,
                status=str(t.get("status", "")),
                inbox=str(t.get("inbox", "")),
            )
            for t, score in zip(tasks, score_candidates(query, texts, cosines), strict=True)
            if score is not None
        ]
        return sorted(scored, key=lambda h: (-h.score, h.key))[:limit]

    async def _embed(self, texts: list[str]) -> list[list[float]]:
        missing = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        if missing:
            fresh = await self._embedder.embed(missing)
            for text, vec in zip(missing, fresh, strict=True):
                self._vectors[text] = [float(x) for x in vec]
            while len(self._vectors) > VECTOR_CACHE_MAX:
                self._vectors.popitem(last=False)
        out = []
        for t in texts:
            self._vectors.move_to_end(t)
            out.append(self._vectors[t])
        return out

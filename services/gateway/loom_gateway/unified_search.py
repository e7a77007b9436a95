"""MCP `loom_search` (spec 003, Decisions: unified search): one search over the memories,
decisions and tasks the token can read.

It is composed at the door, from ops: `namespace.list` names the namespaces the caller holds a
role in (or the call names some), and in each `memory.search` (memories and decisions, by
meaning: cosine over embeddings) and `task.list` (the newest tasks, matched by the query's words
in their title) run as the caller, each through the planes' chain (authorization, rate, policy
gate, ledger and exposure rows): a namespace the token may not read answers nothing. Memory and
decision hits carry their cosine score; a task's score is the share of the query's words its
title holds. The results are merged by score, then namespace and key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import mcp_types as types
from loom_core.errors import LoomError, invalid_field

from .relay import Relay

TOOL_NAME = "loom_search"
NAMESPACES_MAX = 20
TASKS_SCANNED = 200
_WORD = re.compile(r"\w+", re.UNICODE)

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "minLength": 1, "description": "What to look for."},
        "limit": {"type": "integer", "minimum": 1, "maximum": 50, "description": "Most results (default 10)."},
        "namespaces": {
            "type": "array",
            "items": {"type": "string"},
            "maxItems": NAMESPACES_MAX,
            "description": "Namespaces to search (default: every namespace the token holds a role in).",
        },
    },
    "required": ["query"],
    "additionalProperties": False,
}


def tool() -> types.Tool:
    return types.Tool(
        name=TOOL_NAME,
        description=(
            "One search over the memories, decisions and tasks the token can read, in every namespace it holds a role in "
            "(ops memory.search and task.list per namespace)."
        ),
        input_schema=INPUT_SCHEMA,
        annotations=types.ToolAnnotations(read_only_hint=True),
    )


def _words(text: str) -> set[str]:
    return {w.casefold() for w in _WORD.findall(text) if len(w) > 2}


async def search(relay: Relay, args: Mapping[str, Any], headers: Mapping[str, str], transport: str) -> dict[str, Any]:
    query = args.get("query")
    if not isinstance(query, str) or not query.strip():
        raise invalid_field("query", "required")
    limit = args.get("limit", 10)
    if not isinstance(limit, int) or not 1 <= limit <= 50:
        raise invalid_field("limit", "between 1 and 50")
    named = args.get("namespaces")
    if named is not None and (not isinstance(named, list) or not all(isinstance(n, str) for n in named)):
        raise invalid_field("namespaces", "a list of namespace names")
    if named:
        namespaces = list(dict.fromkeys(named))[:NAMESPACES_MAX]
    else:
        listed = await relay.call("namespace.list", {}, headers, transport)
        namespaces = sorted(str(n["name"]) for n in listed.get("namespaces", []))[:NAMESPACES_MAX]
    terms = _words(query)
    results: list[dict[str, Any]] = []
    searched: list[str] = []
    for ns in namespaces:
        try:
            hits = await relay.call("memory.search", {"query": query, "limit": limit, "namespace": ns}, headers, transport)
        except LoomError:
            continue  # a namespace the token may not read (or whose search failed) answers nothing
        searched.append(ns)
        for h in hits.get("hits", []):
            kind = "decision" if h.get("memory_type") == "decision" else "memory"
            results.append(
                {"kind": kind, "namespace": ns, "key": h["key"], "text": h.get("value", ""), "score": float(h.get("score", 0.0))}
            )
        if not terms:
            continue
        try:
            tasks = await relay.call("task.list", {"limit": TASKS_SCANNED, "namespace": ns}, headers, transport)
        except LoomError:
            continue
        for t in tasks.get("tasks", []):
            title_terms = _words(str(t.get("title", "")))
            share = len(terms & title_terms) / len(terms)
            if share > 0:
                results.append(
                    {
                        "kind": "task",
                        "namespace": ns,
                        "key": t["task_id"],
                        "text": t.get("title", ""),
                        "score": round(share, 6),
                        "status": t.get("status", ""),
                    }
                )
    results.sort(key=lambda r: (-r["score"], r["namespace"], r["key"]))
    return {"results": results[:limit], "namespaces": searched}

"""Reads of the shared ledger (agent_events) and the exposure rows that fill a replica's
history window or a replay. Bounded: newest first up to a row limit, so a caller learns when
the read was cut (and from which instant the history is complete)."""

from __future__ import annotations

from typing import Any

from loom_core.store import Store, Where

_EVENT_COLS = (
    "toUnixTimestamp64Micro(ts) AS t, subject, agent, user, session, op, ok, args, request_id, latency_ms, error_code, write_shaped"
)
_EXPOSURE_COLS = "toUnixTimestamp64Micro(ts) AS t, subject, agent, user, session, op, kind, key, request_id"


def like_patterns(globs: frozenset[str] | None) -> list[str] | None:
    """Op globs as LIKE patterns (None: every op)."""
    if globs is None or "*" in globs:
        return None
    out = []
    for g in sorted(globs):
        escaped = g.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        out.append(escaped.replace("*", "%").replace("?", "_"))
    return out


async def events(
    store: Store,
    org: str,
    namespace: str,
    *,
    since_us: int,
    until_us: int | None = None,
    patterns: list[str] | None = None,
    subject: str = "",
    limit: int,
) -> list[dict[str, Any]]:
    where = _window(org, namespace, since_us, until_us, subject)
    if patterns is not None:
        where.add("arrayExists(p -> like(op, p), {pats:Array(String)})", pats=patterns)
    sql = f"SELECT {_EVENT_COLS} FROM {{db}}.agent_events WHERE {where} ORDER BY ts DESC LIMIT {{limit:UInt64}}"
    return await store.query(sql, where.bind(limit=limit))


async def exposures(
    store: Store,
    org: str,
    namespace: str,
    *,
    since_us: int,
    until_us: int | None = None,
    kinds: frozenset[str],
    subject: str = "",
    limit: int,
) -> list[dict[str, Any]]:
    if not kinds:
        return []
    where = _window(org, namespace, since_us, until_us, subject).add("has({kinds:Array(String)}, kind)", kinds=sorted(kinds))
    sql = f"SELECT {_EXPOSURE_COLS} FROM {{db}}.memory_exposures WHERE {where} ORDER BY ts DESC LIMIT {{limit:UInt64}}"
    return await store.query(sql, where.bind(limit=limit))


def _window(org: str, namespace: str, since_us: int, until_us: int | None, subject: str) -> Where:
    """A namespace's rows from `since_us` (to `until_us`), of one subject when named."""
    where = Where(
        "org = {org:String}",
        "namespace = {ns:String}",
        "ts >= fromUnixTimestamp64Micro({since:Int64})",
        org=org,
        ns=namespace,
        since=since_us,
    )
    if until_us is not None:
        where.add("ts < fromUnixTimestamp64Micro({until:Int64})", until=until_us)
    if subject:
        where.add("subject = {subject:String}", subject=subject)
    return where

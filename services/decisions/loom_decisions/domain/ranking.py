"""memory.search's ranking: the nearest rows by cosine and the rows that name an identifier the
query names, fused (loom_core.ranking).

A row's score is half its cosine to the query and half the share of the query's words its value
contains; a row that names an identifier the query names comes first, so `LOOM_POLICY_MODE`
finds the row that says LOOM_POLICY_MODE above short rows that only paraphrase it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from loom_core import ranking


def fuse(query: str, hits: Sequence[tuple[dict[str, Any], float]], limit: int) -> tuple[list[tuple[dict[str, Any], float]], bool]:
    """(row, fused score) best first, at most `limit`, each row once; and whether the result is
    weak (no row names an identifier the query names and the best cosine is under the floor)."""
    names = [n.lower() for n in ranking.named_identifiers(query)]
    words = ranking.query_words(query)
    by_row: dict[tuple[str, str, str, str], tuple[dict[str, Any], float]] = {}
    for row, cosine in hits:
        ident = (row["key"], row["agent"], row["user"], row["session"])
        if ident not in by_row or by_row[ident][1] < cosine:
            by_row[ident] = (row, cosine)
    rows = list(by_row.values())
    lexical = {i: ranking.word_coverage(words, row["value"]) for i, (row, _) in enumerate(rows)}
    dense = {i: cosine for i, (_, cosine) in enumerate(rows)}
    fused = ranking.convex(lexical, dense)
    named = {i for i, (row, _) in enumerate(rows) if names and any(n in row["value"].lower() for n in names)}
    ranked = ranking.exact_first(fused, named, limit)
    best = max((dense[i] for _, i in ranked), default=None)
    return [(rows[i][0], score) for score, i in ranked], ranking.weak(best, bool(named & {i for _, i in ranked}))

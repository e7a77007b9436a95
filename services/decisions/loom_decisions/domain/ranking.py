"""memory.search's ranking: the nearest rows by cosine and the rows that name an identifier the
query names, fused (loom_core.ranking); and search.unified's, which scores tasks on the same
scale and merges them with memory.search's hits.

A row's score is half its cosine to the query and half the share of the query's words its value
contains; a row that names an identifier the query names comes first, so `LOOM_POLICY_MODE`
finds the row that says LOOM_POLICY_MODE above short rows that only paraphrase it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from loom_core import ranking


class Searched(Protocol):
    """What ranking reads of a row: who it is and what it says."""

    @property
    def key(self) -> str: ...
    @property
    def agent(self) -> str: ...
    @property
    def user(self) -> str: ...
    @property
    def session(self) -> str: ...
    @property
    def value(self) -> str: ...


RowT = TypeVar("RowT", bound=Searched)


def fuse(query: str, hits: Sequence[tuple[RowT, float]], limit: int) -> tuple[list[tuple[RowT, float]], bool]:
    """(row, fused score) best first, at most `limit`, each row once; and whether the result is
    weak (no row names an identifier the query names and the best cosine is under the floor)."""
    names = [n.lower() for n in ranking.named_identifiers(query)]
    words = ranking.query_words(query)
    by_row: dict[tuple[str, str, str, str], tuple[RowT, float]] = {}
    for row, cosine in hits:
        ident = (row.key, row.agent, row.user, row.session)
        if ident not in by_row or by_row[ident][1] < cosine:
            by_row[ident] = (row, cosine)
    rows = list(by_row.values())
    lexical = {i: ranking.word_coverage(words, row.value) for i, (row, _) in enumerate(rows)}
    dense = {i: cosine for i, (_, cosine) in enumerate(rows)}
    fused = ranking.convex(lexical, dense)
    named = {i for i, (row, _) in enumerate(rows) if names and any(n in row.value.lower() for n in names)}
    ranked = ranking.exact_first(fused, named, limit)
    best = max((dense[i] for _, i in ranked), default=None)
    return [(rows[i][0], score) for score, i in ranked], ranking.weak(best, bool(named & {i for _, i in ranked}))


@dataclass(frozen=True, slots=True)
class UnifiedHit:
    """One result of search.unified: a memory, a decision or a task."""

    kind: str
    namespace: str
    key: str
    text: str
    score: float
    stage: str = ""
    status: str = ""
    inbox: str = ""


def score_candidates(query: str, texts: Sequence[str], cosines: Sequence[float]) -> list[float | None]:
    """Each text's score on memory.search's scale (half cosine, half the share of the query's
    words it holds), or None when it is about something else: no query word and a cosine under
    the weak floor (a listing of every task is not a search result)."""
    words = ranking.query_words(query)
    out: list[float | None] = []
    for text, cosine in zip(texts, cosines, strict=True):
        coverage = ranking.word_coverage(words, text)
        if coverage == 0.0 and cosine < ranking.WEAK_COSINE:
            out.append(None)
        else:
            out.append(ranking.convex({0: coverage}, {0: cosine})[0])
    return out


def merge(query: str, hits: Sequence[UnifiedHit], limit: int) -> list[UnifiedHit]:
    """Every source's hits in one list, best first: a hit naming an identifier the query names
    before the rest (as memory.search orders), then by score; ties by namespace, kind and key."""
    names = [n.lower() for n in ranking.named_identifiers(query)]

    def named(h: UnifiedHit) -> bool:
        return bool(names) and any(n in h.text.lower() for n in names)

    return sorted(hits, key=lambda h: (not named(h), -h.score, h.namespace, h.kind, h.key))[:limit]

"""Hybrid ranking: a lexical (BM25) list and a dense (cosine) list fused into one.

`convex` fuses absolute scores: alpha x lexical + (1 - alpha) x dense, where lexical is a
document's BM25 score over the highest score the query allows (every term matched at
saturation: the share of the query's weight the document matches) and dense is its cosine to the
query (negative counts 0). Both are on a scale that means the same for every query, so the fused
score does too, unlike per-query min-max normalization, which sets some document to 1 whatever
the query (one stray word match becomes a perfect lexical score). `rrf` (reciprocal rank fusion,
k = 60) is kept for comparison. bench/search.py prints BM25, dense, convex and rrf on
bench/data/help_eval.json; convex at alpha 0.5 was chosen there over rrf and over min-max
normalization (the closing note in docs/benchmarks.md has the figures).

Documents that contain a named identifier exactly (an op, a setting, an error code) go first
(`exact_first`): the person named the thing, so no paraphrase outranks it. A query made only of
such names leans on the lexical side (`ALPHA_NAMED`).

Whether a result is worth showing reads the best cosine among the hits (`weak`).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping

RRF_K = 60
ALPHA = 0.5
# A query made only of names: lexical evidence decides, the dense list breaks ties.
ALPHA_NAMED = 0.9
# Below this cosine (all-MiniLM-L6-v2) the hits are unrelated text: on the evaluation set the
# off-topic queries' best cosines reach 0.19 and the on-topic ones start at 0.21 (bench/search.py).
WEAK_COSINE = 0.20


def convex(lexical: Mapping[int, float], dense: Mapping[int, float], alpha: float = ALPHA) -> dict[int, float]:
    """alpha x lexical + (1 - alpha) x dense per document of either list; lexical in [0, 1] (a
    share of the query's BM25 ceiling), dense a cosine (floored at 0); a missing score counts 0."""
    return {
        d: alpha * min(1.0, max(0.0, lexical.get(d, 0.0))) + (1.0 - alpha) * max(0.0, dense.get(d, 0.0))
        for d in lexical.keys() | dense.keys()
    }


def rrf(lexical: Mapping[int, float], dense: Mapping[int, float], k: int = RRF_K) -> dict[int, float]:
    """Reciprocal rank fusion of the two lists (each ranked by its own score)."""
    out: dict[int, float] = {}
    for scores in (lexical, dense):
        for rank, d in enumerate(sorted(scores, key=lambda x: -scores[x]), start=1):
            out[d] = out.get(d, 0.0) + 1.0 / (k + rank)
    return out


def exact_first(fused: Mapping[int, float], named: Collection[int], limit: int) -> list[tuple[float, int]]:
    """(score, document) best first: documents in `named` (they contain an identifier the query
    names exactly) before the rest, each group by its fused score."""
    order = sorted(fused.items(), key=lambda item: (item[0] not in named, -item[1], item[0]))
    return [(score, d) for d, score in order[:limit]]


def weak(best_cosine: float | None, named_found: bool, threshold: float = WEAK_COSINE) -> bool:
    """A result set is weak when no hit names an identifier the query named and the best cosine
    among its hits is under the threshold (or there is no hit)."""
    if named_found:
        return False
    return best_cosine is None or best_cosine < threshold


# A name joined by `.`, `_` or `-` (`task.claim`, `LOOM_POLICY_MODE`, `TASK_FENCE_STALE`).
IDENTIFIER = re.compile(r"\b[A-Za-z][A-Za-z0-9]*(?:[._-][A-Za-z0-9]+)+")
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "do",
        "does",
        "for",
        "from",
        "has",
        "have",
        "how",
        "i",
        "in",
        "is",
        "it",
        "its",
        "my",
        "of",
        "on",
        "or",
        "our",
        "should",
        "that",
        "the",
        "this",
        "to",
        "was",
        "we",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "you",
        "your",
    ]
)


def named_identifiers(query: str) -> list[str]:
    """The identifiers a query names, as written."""
    return IDENTIFIER.findall(query)


def query_words(text: str) -> set[str]:
    """A text's lower-cased words, stopwords left out."""
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def word_coverage(query: set[str], text: str) -> float:
    """The share of the query's words the text contains (0 to 1): the lexical side of a fusion
    over a short candidate list, where no corpus statistics are at hand."""
    if not query:
        return 0.0
    return len(query & set(_WORD.findall(text.lower()))) / len(query)

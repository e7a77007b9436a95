"""Hybrid help ranking: the BM25 index beside each section's MiniLM embedding, fused.

The section vectors are computed once per index build (`passage` is what is embedded: the
breadcrumb, then the section's plain text) and kept beside the index; a search embeds only its
query. The BM25 list (scores over the query's ceiling) and the dense list (cosines), each its top
`CANDIDATES` with the audience filter applied, are fused by loom_core.ranking (convex, alpha 0.5,
or 0.9 for a query made only of names the docs contain); sections that contain an identifier the
query names exactly come first.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from loom_core import ranking

from .index import HelpIndex, _plain
from .sections import Section
from .text import identifiers, words

CANDIDATES = 50
PASSAGE_CHARS = 1_500


def passage(index: HelpIndex, section: Section) -> str:
    """What a section's embedding is computed from: its breadcrumb, then its plain text."""
    text = index.pages[section.page].section_text(section)
    body = text.split("\n", 1)[1] if text.startswith("#") and "\n" in text else text
    plain = " ".join(_plain(line) for line in body.splitlines() if line.strip() and not line.lstrip().startswith(("```", "~~~")))
    return (" > ".join(section.breadcrumb) + ". " + plain)[:PASSAGE_CHARS]


@dataclass(frozen=True, slots=True)
class Ranking:
    """Sections best first with their fused scores, the best cosine among them, and whether one
    names an identifier the query names."""

    ranked: list[tuple[float, int]]
    best_cosine: float | None
    named_found: bool

    @property
    def weak(self) -> bool:
        return ranking.weak(self.best_cosine, self.named_found)


def named_sections(index: HelpIndex, query: str) -> set[int]:
    """Sections that contain an identifier the query names exactly."""
    out: set[int] = set()
    for ident in identifiers(query):
        posting = index.postings.get(ident)
        if posting is not None:
            out.update(posting[0])
    return out


def dense_scores(index: HelpIndex, vectors: np.ndarray, query_vector: np.ndarray, audience: str, top: int = CANDIDATES) -> dict[int, float]:
    """The `top` sections by cosine to the query (vectors are unit length), audience applied."""
    sims = vectors @ query_vector
    if audience:
        keep = np.array([index.pages[s.page].audience == audience for s in index.sections], dtype=bool)
        sims = np.where(keep, sims, -np.inf)
    n = min(top, len(sims))
    if n == 0:
        return {}
    best = np.argpartition(-sims, n - 1)[:n]
    return {int(d): float(sims[d]) for d in best if np.isfinite(sims[d])}


def rank(
    index: HelpIndex, vectors: np.ndarray, query_vector: np.ndarray, query: str, limit: int, audience: str = "", fusion: str = "convex"
) -> Ranking:
    ceiling = index.ceiling(query) or 1.0
    lexical = {doc: score / ceiling for score, doc in index.rank(query, CANDIDATES, audience)}
    dense = dense_scores(index, vectors, query_vector, audience)
    named = named_sections(index, query)
    # A query that is only names (`help.get`, `what is LOOM_HELP_DOCS_DIR`) is answered by the
    # section about the name, which BM25 finds (its heading names it); the embedding of a name
    # split into word pieces is a weak signal.
    only_names = bool(named) and not words(ranking.IDENTIFIER.sub(" ", query))
    alpha = ranking.ALPHA_NAMED if only_names else ranking.ALPHA
    fused = ranking.rrf(lexical, dense) if fusion == "rrf" else ranking.convex(lexical, dense, alpha)
    ranked = ranking.exact_first(fused, named, limit)
    best = max((float(vectors[d] @ query_vector) for _, d in ranked), default=None)
    return Ranking(ranked, best, bool(named & {d for _, d in ranked}))

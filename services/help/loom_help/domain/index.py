"""The help index: BM25 over every section's terms, postings only.

Each term's postings hold, per section, its precomputed BM25 weight, so a search sums the
postings of its own terms and reads nothing else. A section's own heading counts its terms
three times and the headings above it once more, since a heading names what its text is about.
An operator section's score counts three quarters.

An identifier in a query that no section names exactly still finds its sections through the
names it is a prefix of (`task.cl` -> `task.claim`), else the names one edit away
(`task.clam` -> `task.claim`), found by probing the postings with every one-edit variant.
"""

from __future__ import annotations

import heapq
import math
from array import array
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from loom_core import ranking

from .sections import OPERATOR, Page, Section
from .text import IDENT_MARK, identifiers, terms, word_terms, words

K1 = 1.2
B = 0.75
OPERATOR_WEIGHT = 0.75
HEADING_BOOST = 3
ANCESTOR_BOOST = 1
# A whole identifier in the query weighs more than a word: it names one thing.
IDENT_QUERY_WEIGHT = 2.0
MAX_EXPANSIONS = 8
SNIPPET_CHARS = 240


@dataclass(frozen=True, slots=True)
class Hit:
    section: Section
    title: str
    audience: str
    score: float
    snippet: str

    @property
    def citation(self) -> str:
        return citation(self.section)


def citation(section: Section) -> str:
    return f"[help:{section.page} § {' > '.join(section.breadcrumb)}]"


class HelpIndex:
    """Sections of the indexed pages and their postings. Built once; read-only afterwards."""

    def __init__(self, pages: Sequence[Page]) -> None:
        self.pages: dict[str, Page] = {p.path: p for p in pages}
        self.sections: list[Section] = [s for p in pages for s in p.sections]
        self.weights: list[float] = [OPERATOR_WEIGHT if self.pages[s.page].audience == OPERATOR else 1.0 for s in self.sections]
        counts: list[Counter[str]] = [self._section_terms(s) for s in self.sections]
        n = len(counts)
        lengths = [sum(c.values()) for c in counts]
        avg = (sum(lengths) / n) if n else 1.0
        df: Counter[str] = Counter()
        for c in counts:
            df.update(c.keys())
        idf = {t: math.log(1.0 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items()}
        self.idf: dict[str, float] = idf
        lists: dict[str, tuple[list[int], list[float]]] = {}
        k1p1 = K1 + 1.0
        for doc, c in enumerate(counts):
            norm = K1 * (1.0 - B + B * lengths[doc] / avg)
            for term, tf in c.items():
                p = lists.get(term)
                if p is None:
                    p = lists[term] = ([], [])
                p[0].append(doc)
                p[1].append(idf[term] * tf * k1p1 / (tf + norm))
        self.postings: dict[str, tuple[array[int], array[float]]] = {t: (array("I", d), array("f", w)) for t, (d, w) in lists.items()}
        self.identifiers: list[str] = sorted(t for t in self.postings if t.startswith(IDENT_MARK))

    @property
    def available(self) -> bool:
        return bool(self.sections)

    def _section_terms(self, s: Section) -> Counter[str]:
        page = self.pages[s.page]
        # The heading line is in the section's text once already.
        boosted = terms(s.breadcrumb[-1]) * (HEADING_BOOST - 1) + terms(" ".join(s.breadcrumb[:-1])) * ANCESTOR_BOOST
        return Counter(terms(page.section_text(s)) + boosted)

    def query_terms(self, query: str) -> list[tuple[str, float]]:
        """The query's terms with their weights: its words, its identifiers (expanded when no
        section names one exactly)."""
        weighted: dict[str, float] = {}
        for w in word_terms(query):
            if w in self.postings:
                weighted[w] = weighted.get(w, 0.0) + 1.0
        for ident in identifiers(query):
            found = self.expand(ident)
            for term in found:
                weighted[term] = weighted.get(term, 0.0) + IDENT_QUERY_WEIGHT / len(found)
        return list(weighted.items())

    def ceiling(self, query: str) -> float:
        """The highest BM25 score a section could reach for the query: every term matched, each
        at its saturation (idf x (k1 + 1)). A score over it says what share of the query's weight
        a section matches, whatever the query."""
        return sum(weight * self.idf[term] * (K1 + 1.0) for term, weight in self.query_terms(query))

    def expand(self, ident: str) -> list[str]:
        """An identifier term as the index knows it: itself, the names it begins, or the names one edit away."""
        if ident in self.postings:
            return [ident]
        lo = bisect_left(self.identifiers, ident)
        prefixed: list[str] = []
        for t in self.identifiers[lo:]:
            if not t.startswith(ident) or len(prefixed) == MAX_EXPANSIONS:
                break
            prefixed.append(t)
        if prefixed:
            return prefixed
        postings = self.postings
        return sorted({t for t in _one_edit_variants(ident) if t in postings})[:MAX_EXPANSIONS]

    def search(self, query: str, limit: int, audience: str = "") -> list[Hit]:
        """The best `limit` sections for the query by BM25 alone, each with its snippet."""
        return self.hits(query, self.rank(query, limit, audience))

    def hits(self, query: str, ranked: Sequence[tuple[float, int]]) -> list[Hit]:
        """The ranked (score, section number) pairs as hits, each with its snippet."""
        hits: list[Hit] = []
        wanted = snippet_terms(query)
        for score, doc in ranked:
            s = self.sections[doc]
            page = self.pages[s.page]
            hits.append(Hit(s, page.title, page.audience, round(score, 4), snippet(page.section_text(s), wanted)))
        return hits

    def rank(self, query: str, limit: int, audience: str = "") -> list[tuple[float, int]]:
        """(score, section number) of the best `limit` sections, best first: the ranking alone."""
        scores: dict[int, float] = {}
        q = self.query_terms(query)
        for term, weight in q:
            docs, imps = self.postings[term]
            for doc, imp in zip(docs, imps, strict=True):
                scores[doc] = scores.get(doc, 0.0) + weight * imp
        pages = self.pages
        ranked = heapq.nlargest(
            limit,
            (
                (score * self.weights[doc], -doc)
                for doc, score in scores.items()
                if not audience or pages[self.sections[doc].page].audience == audience
            ),
        )
        return [(score, -neg) for score, neg in ranked]


_IDENT_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789._-"


def _one_edit_variants(term: str) -> Iterable[str]:
    """Every string one deletion, swap of neighbours, substitution or insertion away from a
    marked identifier (the mark stays): a few thousand dictionary probes at most, and only for
    a name no section spells, so the index keeps no table for typos."""
    mark, body = term[:1], term[1:]
    n = len(body)
    for i in range(n):
        yield mark + body[:i] + body[i + 1 :]
        if i + 1 < n:
            yield mark + body[:i] + body[i + 1] + body[i] + body[i + 2 :]
        for c in _IDENT_CHARS:
            yield mark + body[:i] + c + body[i + 1 :]
    for i in range(n + 1):
        for c in _IDENT_CHARS:
            yield mark + body[:i] + c + body[i:]


_DROP = str.maketrans("", "", "`*|")


def _plain(line: str) -> str:
    """A Markdown line as plain text: code, emphasis and table marks dropped, a list or quote marker too."""
    text = line.translate(_DROP).strip()
    if text[:2] in ("- ", "+ ", "> "):
        text = text[2:]
    return " ".join(text.split())


def snippet_terms(query: str) -> list[str]:
    """What a snippet looks for: the query's names, lower-cased, and its folded words."""
    return [*(m.lower() for m in ranking.IDENTIFIER.findall(query)), *set(words(query))]


def snippet(text: str, wanted: list[str]) -> str:
    """The line of the section that names most of the query's words and names (`snippet_terms`),
    cut to about 240 characters."""
    # Substring tests of the folded words (a stem is a prefix of its forms) keep this cheap: only
    # the lines where some query term first appears are scored.
    low = text.lower()
    body = text.find("\n") + 1 if text.startswith("#") else 0
    best, best_score = "", 0
    for w in wanted:
        at = low.find(w, body)
        while at != -1:
            start = low.rfind("\n", 0, at) + 1
            end = low.find("\n", at)
            end = len(low) if end == -1 else end
            line = low[start:end]
            if not line.lstrip().startswith(("```", "~~~")):
                score = sum(1 for v in wanted if v in line)
                if score > best_score:
                    best, best_score = text[start:end], score
                break
            at = low.find(w, end)
    if not best:
        best = next((ln for ln in text[body:].splitlines() if ln.strip() and not ln.lstrip().startswith(("```", "~~~"))), "")
    clean = _plain(best)
    if len(clean) <= SNIPPET_CHARS:
        return clean
    cut = clean[:SNIPPET_CHARS].rsplit(" ", 1)[0]
    return cut + " …"

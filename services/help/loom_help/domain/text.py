"""Terms: folded words plus whole identifiers.

A word is a run of letters and digits, lower-cased, its plural and a few simple suffixes folded
(`claims`, `claimed`, `claiming` -> `claim`). An identifier is a name joined by `.`, `_` or `-`
(`task.claim`, `LOOM_POLICY_MODE`, `X-Loom-Namespace`); it is indexed whole, lower-cased and
marked with IDENT_MARK, beside the words it is made of, so an exact name finds the line that
names it.
"""

from __future__ import annotations

import re

from loom_core.ranking import IDENTIFIER  # one definition of an identifier, shared with decisions' ranking

IDENT_MARK = "#"
WORD = re.compile(r"[a-z0-9]+")
# A camelCase or PascalCase name (`AckPolicy`, `maxAckPending`): its parts are words too.
CAMEL = re.compile(r"\b[A-Za-z][a-z0-9]*(?:[A-Z][a-z0-9]+)+\b")
_CAMEL_PART = re.compile(r"[A-Z]?[a-z0-9]+")

STOPWORDS = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "him",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "just",
        "me",
        "more",
        "most",
        "my",
        "no",
        "nor",
        "not",
        "now",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "our",
        "ours",
        "out",
        "over",
        "own",
        "same",
        "she",
        "should",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
    ]
)


def _undouble(stem: str) -> str:
    if len(stem) >= 3 and stem[-1] == stem[-2] and stem[-1] not in "lsz":
        return stem[:-1]
    return stem


def fold(word: str) -> str:
    """Fold a plural and a simple suffix: the same stem for `retries`/`retry`, `claimed`/`claims`."""
    if len(word) < 4 or not word.isalpha():
        return word
    w = word
    if w.endswith("ies") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith(("sses", "xes", "ches", "shes", "zes")):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    if w.endswith("ing") and len(w) >= 6:
        w = _undouble(w[:-3])
    elif w.endswith("ed") and len(w) >= 5:
        w = _undouble(w[:-2])
    elif w.endswith("ly") and len(w) >= 6:
        w = w[:-2]
    if w.endswith("e") and len(w) >= 5:
        w = w[:-1]
    return w


# Folding is pure and a vocabulary small: each distinct token's terms are worked out once per
# process. Queries bring tokens of their own, so the memo stops growing at a bound.
_MEMO_MAX = 200_000
_memo: dict[str, tuple[str, ...]] = {}
_TOKEN = re.compile(r"[A-Za-z0-9]+")


def _token_terms(token: str) -> tuple[str, ...]:
    low = token.lower()
    out = [] if low in STOPWORDS else [fold(low)]
    if CAMEL.fullmatch(token):
        out += [fold(p) for p in (part.lower() for part in _CAMEL_PART.findall(token)) if p not in STOPWORDS]
    return tuple(out)


def words(text: str) -> list[str]:
    """The folded words of a text, stopwords left out."""
    return [fold(w) for w in WORD.findall(text.lower()) if w not in STOPWORDS]


def word_terms(text: str) -> list[str]:
    """The folded words of a text and the folded parts of its camelCase names (`AckPolicy` ->
    `ackpolicy`, `ack`, `policy`), stopwords left out."""
    memo = _memo
    out: list[str] = []
    for token in _TOKEN.findall(text):
        got = memo.get(token)
        if got is None:
            got = _token_terms(token)
            if len(memo) < _MEMO_MAX:
                memo[token] = got
        out.extend(got)
    return out


def identifiers(text: str) -> list[str]:
    """The whole identifiers of a text, lower-cased and marked."""
    return [IDENT_MARK + m.lower() for m in IDENTIFIER.findall(text)]


def terms(text: str) -> list[str]:
    """Every term a text contributes to the index: its words and camelCase parts, then its identifiers."""
    return word_terms(text) + identifiers(text)

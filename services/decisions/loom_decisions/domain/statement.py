"""The decision row's statement and the limits of a record's parts (spec 003, Decisions).

    <scenario>. Decided <outcome> because <reasoning>. Rejected: <alt>; <alt>. Realized: <realized>.

`Decided <outcome>.` when the reasoning restates the outcome (case, whitespace and the closing
punctuation aside); `Proposed` instead of `Decided` for a proposal.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection
from dataclasses import dataclass, field

SCENARIO_MAX = 2000
OUTCOME_MAX = 1000
REASONING_MAX = 4000
REALIZED_MAX = 2000
ALTERNATIVES_MAX = 10
ALTERNATIVE_MAX = 300
EXCERPT_CHARS = 1200
ELLIPSIS = "…"

PROPOSED_TAG = "decision:proposed"
CATEGORY_TAG_PREFIX = "decision:category:"
STAGES = ("decided", "proposed")

# Closing punctuation: ASCII, the ideographic full stop, the full-width forms of ! ? ; : and the ellipsis.
_CLOSING = ".!?;:\u3002\uff01\uff1f\uff1b\uff1a\u2026"
_WS = re.compile(r"\s+")


class LimitExceeded(ValueError):
    """A part is longer than the record keeps (field, limit)."""

    def __init__(self, field_name: str, limit: int) -> None:
        super().__init__(f"{field_name} is longer than {limit} characters")
        self.field = field_name
        self.limit = limit


def is_cjk(ch: str) -> bool:
    """A character of a script written without spaces between words (Han, kana, Hangul)."""
    cp = ord(ch)
    return (
        0x3040 <= cp <= 0x30FF  # hiragana, katakana
        or 0x3400 <= cp <= 0x4DBF  # CJK extension A
        or 0x4E00 <= cp <= 0x9FFF  # CJK unified
        or 0xAC00 <= cp <= 0xD7AF  # Hangul syllables
        or 0xF900 <= cp <= 0xFAFF  # compatibility ideographs
        or 0x20000 <= cp <= 0x2FA1F  # extensions B..
        or 0x31F0 <= cp <= 0x31FF  # katakana extensions
    )


def cut_alternative(text: str, limit: int = ALTERNATIVE_MAX) -> str:
    """`text` whole when it fits; else cut at a space or between two CJK characters, ending
    in `…`, at most `limit` characters in all, so no half name reads as a file."""
    text = text.strip()
    if len(text) <= limit:
        return text
    room = limit - len(ELLIPSIS)
    cut = 0
    for i in range(room, 0, -1):
        if text[i].isspace() or (is_cjk(text[i - 1]) and is_cjk(text[i])):
            cut = i
            break
    if cut == 0:
        cut = room
    return text[:cut].rstrip() + ELLIPSIS


def _norm(text: str) -> str:
    t = _WS.sub(" ", unicodedata.normalize("NFKC", text)).strip().casefold()
    return t.rstrip(_CLOSING + " ")


def restates(reasoning: str, outcome: str) -> bool:
    """The reasoning is the outcome word for word: a ban or invariant stated with no reason."""
    return _norm(reasoning) == _norm(outcome)


def _sentence(text: str) -> str:
    text = text.strip()
    if not text:
        return text
    return text if text[-1] in _CLOSING else text + "."


@dataclass(frozen=True, slots=True)
class DecisionText:
    """The parts of a decision that its statement is built from, within the record's limits."""

    scenario: str
    outcome: str
    reasoning: str
    alternatives: tuple[str, ...] = ()
    realized: str = ""
    stage: str = "decided"
    extra: dict[str, str] = field(default_factory=dict)

    @classmethod
    def checked(
        cls,
        *,
        scenario: str,
        outcome: str,
        reasoning: str,
        alternatives: list[str] | tuple[str, ...] = (),
        realized: str = "",
        stage: str = "decided",
    ) -> DecisionText:
        """Refuses a part past its limit; cuts each alternative to 300 characters."""
        for name, value, limit in (
            ("scenario", scenario, SCENARIO_MAX),
            ("outcome", outcome, OUTCOME_MAX),
            ("reasoning", reasoning, REASONING_MAX),
            ("realized_outcome", realized, REALIZED_MAX),
        ):
            if len(value) > limit:
                raise LimitExceeded(name, limit)
        if len(alternatives) > ALTERNATIVES_MAX:
            raise LimitExceeded("alternatives", ALTERNATIVES_MAX)
        alts = tuple(a for a in (cut_alternative(x) for x in alternatives) if a)
        return cls(scenario.strip(), outcome.strip(), reasoning.strip(), alts, realized.strip(), stage)

    def statement(self) -> str:
        verb = "Proposed" if self.stage == "proposed" else "Decided"
        parts = [_sentence(self.scenario)]
        if not self.reasoning or restates(self.reasoning, self.outcome):
            parts.append(f"{verb} {_sentence(self.outcome)}")
        else:
            parts.append(f"{verb} {self.outcome.rstrip(_CLOSING + ' ')} because {_sentence(self.reasoning)}")
        if self.alternatives:
            parts.append("Rejected: " + _sentence("; ".join(a.rstrip(";") for a in self.alternatives)))
        if self.realized:
            parts.append("Realized: " + _sentence(self.realized))
        return " ".join(parts)


def excerpt(statement: str) -> str:
    """What search embeds: the first 1,200 characters, so it opens with the scenario."""
    return statement[:EXCERPT_CHARS]


def chunks(value: str, size: int = EXCERPT_CHARS) -> list[str]:
    """A value past its excerpt in pieces of at most `size` characters, each cut at a space
    when one is near the end; empty when the excerpt holds the whole value."""
    rest = value[EXCERPT_CHARS:]
    out: list[str] = []
    while rest.strip():
        if len(rest) <= size:
            out.append(rest.strip())
            break
        cut = rest.rfind(" ", size // 2, size)
        cut = cut if cut > 0 else size
        out.append(rest[:cut].strip())
        rest = rest[cut:]
    return [p for p in out if p]


def decision_tags(caller_tags: list[str] | tuple[str, ...], category: str, stage: str) -> list[str]:
    """The row's tags: the caller's (less its own decision: stage and category tags), the
    category tag, and `decision:proposed` for a proposal."""
    keep = [t for t in caller_tags if t != PROPOSED_TAG and not t.startswith(CATEGORY_TAG_PREFIX)]
    out = list(dict.fromkeys(keep))
    out.append(CATEGORY_TAG_PREFIX + category)
    if stage == "proposed":
        out.append(PROPOSED_TAG)
    return out


def stage_of(tags: Collection[str], realized: str = "") -> str:
    """A decision's stage, read from its row's tags; a decision whose outcome is recorded reads as decided."""
    if realized:
        return "decided"
    return "proposed" if PROPOSED_TAG in tags else "decided"

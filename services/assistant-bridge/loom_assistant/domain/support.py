"""An answer's support (spec 000 "Support"): how far it rests on what Loom holds.

Pure: decided from the text, the citations' checks, the unknown names and, for an answer that
cites nothing, what its own tool calls found. The first row that applies wins:

- none: no text; or cites nothing and says the abstention sentence, or made no call to a
  citable op and none of its calls found data or failed.
- unsupported (names): it names an op or setting the build neither serves nor documents.
- supported: a citation verified.
- unsupported: a citation failed for a reason of its own; or it cites nothing although a
  citable op found data, or a citable op ran and found nothing while no other call found data
  or failed.
- unchecked: otherwise.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TypeVar

from .citations import Checked

ABSTENTION = "Nothing stored in Loom answers this."
# One read of the run's ledger takes this many rows; a run with more is cut.
RUN_ROWS_CUT = 200
# The reads of an uncited answer's calls and their waits, together.
CALLS_READ_BOUND_S = 3.0

T = TypeVar("T")

_EMPHASIS = re.compile(r"[*_`~]")
_SPACES = re.compile(r"\s+")


class Support(StrEnum):
    NONE = "none"
    SUPPORTED = "supported"
    UNSUPPORTED = "unsupported"
    UNCHECKED = "unchecked"


class OpKind(StrEnum):
    """What an op of the assistant toolset returns, for the rule."""

    CITABLE = "citable"  # its rows have a citation form (memories, tasks, sql, decisions)
    UNCITABLE = "uncitable"  # counts and findings with no citation form
    NO_NAMESPACE_DATA = "no_namespace_data"  # Loom's guide, docs and catalog


@dataclass(frozen=True, slots=True)
class Call:
    """One of the answer's tool calls as its ledger row shows it."""

    op: str
    ok: bool
    found: bool


@dataclass(frozen=True, slots=True)
class Calls:
    """The answer's calls: None fields mean the read failed or ran past its bound."""

    calls: Sequence[Call] = ()
    cut: bool = False
    readable: bool = True
    kinds: dict[str, OpKind] = field(default_factory=dict)


def cut_run(rows: Sequence[T]) -> tuple[list[T], bool]:
    """One read of a run takes RUN_ROWS_CUT rows (it asks for one more to know): the rows kept,
    and whether the run held more and is cut. Support and steps see only the rows kept."""
    return list(rows[:RUN_ROWS_CUT]), len(rows) > RUN_ROWS_CUT


def says_abstention(text: str) -> bool:
    """The abstention sentence, in any case or emphasis."""
    norm = _SPACES.sub(" ", _EMPHASIS.sub("", text)).strip().lower()
    return ABSTENTION.lower() in norm


def decide(text: str, checked: Sequence[Checked], unknown_names: Sequence[str], calls: Calls | None) -> Support:
    """The answer's support. `calls` is read only for an answer that cites nothing (None when
    it was not read because the answer cites something)."""
    if not text.strip():
        return Support.NONE
    if not checked and says_abstention(text):
        return Support.NONE
    if unknown_names:
        return Support.UNSUPPORTED
    if checked:
        if any(c.verified for c in checked):
            return Support.SUPPORTED
        if any(not c.verified and not c.undecided for c in checked):
            return Support.UNSUPPORTED
        return Support.UNCHECKED
    return _uncited(calls)


def _uncited(calls: Calls | None) -> Support:
    if calls is None or not calls.readable:
        return Support.UNCHECKED

    def kind(op: str) -> OpKind | None:
        return calls.kinds.get(op)

    citable = [c for c in calls.calls if kind(c.op) == OpKind.CITABLE]
    citable_found = any(c.ok and c.found for c in citable)
    if calls.cut:
        return Support.UNSUPPORTED if citable_found else Support.UNCHECKED
    # Docs, the guide and the catalog are not the namespace's data.
    counted = [c for c in calls.calls if kind(c.op) in (OpKind.CITABLE, OpKind.UNCITABLE)]
    any_found = any(c.ok and c.found for c in counted)
    any_failed = any(not c.ok for c in calls.calls)
    if not citable and not any_found and not any_failed:
        return Support.NONE
    if citable_found:
        return Support.UNSUPPORTED
    citable_ran_empty = any(c.ok and not c.found for c in citable)
    if citable_ran_empty and not any_found and not any_failed:
        return Support.UNSUPPORTED
    return Support.UNCHECKED

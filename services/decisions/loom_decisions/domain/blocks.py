"""The two blocks an agent reads: memory.for_file's (before an edit of a file) and
context.pack's (at the start of a task). Pure: the rows come in, text goes out, the same
rows give the same bytes.

memory.for_file, one line per row, constraints first, then decisions, then other memories
(newest first within each, the key breaking ties):

    Before editing <path>, read (<n> rows):
    - <statement> (#<key>) — by <actor>, <age> (pinned) (source changed)
    - #<key>: <n> characters, past this block's ceiling; read it with memory.get — by …

context.pack, one line per decision, in the order given, while the budget holds:

    Decisions (<n> of <m>):
    - <scenario>: <outcome> — because <reasoning> (#<key>)
    - <scenario> → proposed: <outcome> — because <reasoning> (#<key>)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .statement import restates

SOURCE_CHANGED_TAG = "source-changed"
CONSTRAINT_TAG = "constraint"
CHARS_PER_TOKEN = 4


def tokens(text: str) -> int:
    """The token count context.pack budgets with: 4 characters a token, rounded up."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def age(seconds: float) -> str:
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{int(seconds // 60)} min ago"
    if seconds < 86400:
        return f"{int(seconds // 3600)} h ago"
    return f"{int(seconds // 86400)} d ago"


def actor_name(actor: str) -> str:
    """A row's actor as the block names it: a process without its `process:` prefix."""
    return actor.removeprefix("process:")


@dataclass(frozen=True, slots=True)
class FileRow:
    key: str
    memory_type: str
    value: str
    tags: tuple[str, ...]
    pinned: bool
    actor: str
    age_seconds: float
    conflicts: tuple[str, ...] = ()

    @property
    def source_changed(self) -> bool:
        return SOURCE_CHANGED_TAG in self.tags

    @property
    def constraint(self) -> bool:
        return CONSTRAINT_TAG in self.tags


def for_file_rank(r: FileRow) -> tuple[int, float, str]:
    """Constraints first, then decisions, then other memories; newest first, then by key."""
    group = 0 if r.constraint else (1 if r.memory_type == "decision" else 2)
    return (group, r.age_seconds, r.key)


def for_file_block(path: str, rows: list[FileRow], ceiling: int) -> tuple[str, list[str]]:
    """The block and, per row in order, how it was shown (`whole` or `named`)."""
    if not rows:
        return "", []
    head = f"Before editing {path}, read ({len(rows)} row{'s' if len(rows) != 1 else ''}):"
    lines = [head]
    used = len(head)
    shown: list[str] = []
    for r in rows:
        tail = f" — by {actor_name(r.actor)}, {age(r.age_seconds)}"
        if r.pinned:
            tail += " (pinned)"
        if r.source_changed:
            tail += " (source changed)"
        whole = f"- {r.value} (#{r.key}){tail}"
        if used + 1 + len(whole) <= ceiling:
            lines.append(whole)
            shown.append("whole")
            used += 1 + len(whole)
        else:
            named = f"- #{r.key}: {len(r.value)} characters, past this block's ceiling; read it with memory.get{tail}"
            lines.append(named)
            shown.append("named")
            used += 1 + len(named)
    return "\n".join(lines), shown


@dataclass(frozen=True, slots=True)
class PackRow:
    key: str
    scenario: str
    outcome: str
    reasoning: str
    stage: str
    realized: str = ""


def pack_line(d: PackRow) -> str:
    scenario = d.scenario.rstrip(". ")
    outcome = d.outcome.rstrip(". ")
    line = f"- {scenario} → proposed: {outcome}" if d.stage == "proposed" else f"- {scenario}: {outcome}"
    if d.reasoning and not restates(d.reasoning, d.outcome):
        line += f" — because {d.reasoning.rstrip('. ')}"
    if d.realized:
        line += f" — realized: {d.realized.rstrip('. ')}"
    return f"{line} (#{d.key})"


def pack_block(decisions: list[PackRow], budget: int) -> tuple[str, list[tuple[PackRow, str]], int]:
    """The block within `budget` tokens (header included): the decisions in the order given,
    each line whole, skipping one that does not fit and trying the next. Answers the block, the
    packed (decision, line) pairs and how many were left out."""
    lines = [pack_line(d) for d in decisions]
    total = len(decisions)
    packed: list[tuple[PackRow, str]] = []

    def header(n: int) -> str:
        return f"Decisions ({n} of {total}):"

    # The header's width depends on the count; budget for the widest it can be.
    used = tokens(header(total)) if total else 0
    for d, line in zip(decisions, lines, strict=True):
        cost = tokens("\n" + line)
        if used + cost <= budget:
            packed.append((d, line))
            used += cost
    if not packed:
        return "", [], total
    block = "\n".join([header(len(packed))] + [line for _, line in packed])
    return block, packed, total - len(packed)

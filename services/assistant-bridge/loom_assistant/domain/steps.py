"""A streamed answer's steps (spec 000 "Steps"): fixed words per op of the assistant toolset,
from the answer's own ledger rows. Display only: never decides the label."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .ledger import LedgerCall

# op -> (done, failed or refused)
WORDS: dict[str, tuple[str, str]] = {
    "auth.whoami": ("Checked who is asking", "Couldn't check who is asking"),
    "grants.list": ("Read who has access", "Couldn't read who has access"),
    "namespace.list": ("Listed the namespaces", "Couldn't list the namespaces"),
    "inbox.list": ("Listed the inboxes", "Couldn't list the inboxes"),
    "inbox.get": ("Read an inbox", "Couldn't read an inbox"),
    "inbox.stats": ("Read the inbox figures", "Couldn't read the inbox figures"),
    "inbox.policy_list": ("Read an inbox's trust rules", "Couldn't read an inbox's trust rules"),
    "task.get": ("Read a task", "Couldn't read a task"),
    "task.list": ("Listed tasks", "Couldn't list tasks"),
    "task.counts": ("Counted tasks", "Couldn't count tasks"),
    "task.history": ("Read a task's history", "Couldn't read a task's history"),
    "task.updates": ("Read task updates", "Couldn't read task updates"),
    "policy.list": ("Read the history policies", "Couldn't read the history policies"),
    "policy.check": ("Checked a policy", "Couldn't check a policy"),
    "policy.decisions": ("Read the policy decisions", "Couldn't read the policy decisions"),
    "decision.precedents": ("Looked for precedents", "Couldn't look for precedents"),
    "decision.chain": ("Read a decision's chain", "Couldn't read a decision's chain"),
    "decision.calibration": ("Read the decisions' calibration", "Couldn't read the decisions' calibration"),
    "memory.get": ("Read a memory", "Couldn't read a memory"),
    "memory.search": ("Searched memories", "Couldn't search memories"),
    "memory.list": ("Listed memories", "Couldn't list memories"),
    "memory.ask": ("Asked the memories", "Couldn't ask the memories"),
    "memory.inspect": ("Inspected the memories", "Couldn't inspect the memories"),
    "memory.history": ("Read a memory's history", "Couldn't read a memory's history"),
    "help.search": ("Searched Loom's documentation", "Couldn't search Loom's documentation"),
    "help.get": ("Read Loom's documentation", "Couldn't read Loom's documentation"),
    "insights.catalog": ("Read the analysis catalog", "Couldn't read the analysis catalog"),
    "insights.query": ("Ran a query", "Couldn't run a query"),
    "namespace.audit": ("Read the audit", "Couldn't read the audit"),
}


@dataclass(frozen=True, slots=True)
class Step:
    op: str
    text: str
    ok: bool

    def wire(self) -> dict[str, Any]:
        return {"op": self.op, "text": self.text, "ok": self.ok}


def steps_of(calls: Iterable[LedgerCall]) -> list[Step]:
    """Steps from ledger rows, oldest first; a row of an op with no words is no step."""
    out: list[Step] = []
    for c in calls:
        words = WORDS.get(c.op)
        if words is None:
            continue
        out.append(Step(c.op, words[0] if c.ok else words[1], c.ok))
    return out

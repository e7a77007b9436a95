"""The assistant toolset's ops by what their rows are to the support rule (spec 000 "Support"):
every op of the toolset is in exactly one set (a test checks the catalog against them)."""

from __future__ import annotations

from .support import OpKind

# Rows with a citation form: memories, tasks, decisions, policies, a query's sql block.
CITABLE: frozenset[str] = frozenset(
    {
        "memory.get",
        "memory.search",
        "memory.list",
        "memory.ask",
        "memory.inspect",
        "memory.history",
        "decision.precedents",
        "decision.chain",
        "inbox.list",
        "task.get",
        "task.list",
        "task.history",
        "task.updates",
        "policy.list",
        "policy.decisions",
        "insights.query",
    }
)
# Counts and findings: they found something but have no citation form.
UNCITABLE: frozenset[str] = frozenset(
    {
        "auth.whoami",
        "grants.list",
        "namespace.list",
        "task.counts",
        "policy.check",
        "namespace.summary",
        "namespace.inventory",
        "namespace.audit",
        "inbox.principals",
        "inbox.policy_list",
        "decision.calibration",
    }
)
# Loom's own guide, documentation and catalog: not the namespace's data.
NO_NAMESPACE_DATA: frozenset[str] = frozenset({"help.search", "help.get", "insights.catalog", "mentor.guide"})


def kinds() -> dict[str, OpKind]:
    out: dict[str, OpKind] = {}
    for names, kind in ((CITABLE, OpKind.CITABLE), (UNCITABLE, OpKind.UNCITABLE), (NO_NAMESPACE_DATA, OpKind.NO_NAMESPACE_DATA)):
        for n in names:
            out[n] = kind
    return out


def found(out_hits: int) -> bool:
    """How a row shows it found nothing: out_hits 0 (its first repeated field was empty, or its
    found flag was false)."""
    return out_hits > 0

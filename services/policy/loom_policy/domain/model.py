"""The rule language's syntax tree and the results evaluation reports.

A rule is effect + actions + condition; a condition is a tree of `all` / `any` / `not` over the
leaves `formerly`, `count_within`, `not_since` and `breadth_within` (docs/policies.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

EFFECTS = ("forbid", "require")
RULE_MODES = ("inherit", "shadow", "enforce")
DEPLOYMENT_MODES = ("off", "shadow", "enforce")
LEAF_OPS = ("formerly", "count_within", "not_since", "breadth_within")
BOOL_OPS = ("all", "any", "not")
KEYS = ("agent", "session", "user", "actor")
CMPS = ("gt", "gte", "lt", "lte", "eq")
OUTCOMES = ("ok", "failed", "any")


@dataclass(frozen=True, slots=True)
class ArgEq:
    """One `args_equal` entry: the event's `field` equals a literal, or the current call's
    argument `bind` (written `$args.<bind>`)."""

    field: str
    literal: str | None = None
    bind: str | None = None


@dataclass(frozen=True, slots=True)
class Leaf:
    path: str
    op: str
    within_seconds: int
    # What the rule asked for before the cap (LOOM_POLICY_MAX_WINDOW_SECONDS).
    requested_seconds: int
    # An op name or glob; `*` matches every op.
    operation: str
    key: str
    args_equal: tuple[ArgEq, ...] = ()
    outcome: str = "ok"
    cmp: str = ""
    value: float | None = None
    fraction: float | None = None
    # not_since: the anchor op (name or glob) and its own argument match.
    anchor: str = ""
    anchor_args_equal: tuple[ArgEq, ...] = ()
    # breadth_within: which exposure rows (memory keys by default).
    kind: str = ""


@dataclass(frozen=True, slots=True)
class BoolNode:
    path: str
    op: str
    children: tuple[Node, ...]


Node = Leaf | BoolNode


@dataclass(frozen=True, slots=True)
class RuleDef:
    name: str
    effect: str
    actions: tuple[str, ...]
    condition: Node
    description: str
    mode: str
    # The condition as written, kept to store and to show back.
    raw_condition: dict[str, Any] = field(compare=False, hash=False)
    leaf_count: int = 0


# --- results ---------------------------------------------------------------------------------


@dataclass(slots=True)
class LeafOutcome:
    path: str
    op: str
    # True / False, or None when the leaf could not be decided (see `error`).
    holds: bool | None
    observed: float = 0.0
    cmp: str = ""
    threshold: float = 0.0
    within_seconds: int = 0
    operation: str = ""
    key: str = ""
    key_value: str = ""
    last_us: int = 0
    error: str = ""

    def recounted(self, holds: bool | None, observed: float, last_us: int) -> LeafOutcome:
        """The same leaf with a count brought up to date (compiler.CompiledLeaf.extend, Verdict.settle)."""
        return LeafOutcome(
            self.path,
            self.op,
            holds,
            observed,
            self.cmp,
            self.threshold,
            self.within_seconds,
            self.operation,
            self.key,
            self.key_value,
            last_us,
            self.error,
        )


@dataclass(slots=True)
class RuleOutcome:
    name: str
    effect: str
    mode: str
    condition: bool | None
    denies: bool
    leaves: list[LeafOutcome]
    error: str = ""
    # Its form in a decision row (service.render.rules_stored), rendered and escaped as JSON
    # string content once: the gate gives an outcome again, unchanged, while the rule's answer
    # stands, so most rows repeat most rules.
    stored: str = field(default="", compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class EvalError:
    rule: str
    path: str
    message: str


@dataclass(slots=True)
class Verdict:
    decision: str
    would_enforce: bool
    mode: str
    write_shaped: bool
    determining_rules: list[str]
    errors: list[EvalError]
    rules: list[RuleOutcome]
    latency_ms: float = 0.0
    # Rules whose answer stood while their counts grew (domain.standing): (position in `rules`,
    # the outcome before, (leaf position, count, last instant) at this verdict's instant). Their
    # outcomes are built by `settle`, after the answer; `rules` holds the ones before until then.
    grown: tuple[tuple[int, RuleOutcome, tuple[tuple[int, float, int], ...]], ...] = ()

    @property
    def applied(self) -> bool:
        return bool(self.rules)

    def settle(self) -> None:
        """Every rule's outcome at this verdict's instant in `rules` (the grown ones built now)."""
        if not self.grown:
            return
        rules = list(self.rules)
        for i, before, grown in self.grown:
            leaves = list(before.leaves)
            for j, observed, last_us in grown:
                leaves[j] = leaves[j].recounted(leaves[j].holds, observed, last_us)
            rules[i] = RuleOutcome(before.name, before.effect, before.mode, before.condition, before.denies, leaves, before.error)
        self.rules, self.grown = rules, ()

"""Did a rule change widen what agents may do?

A rule denies a call when D(call) holds: D = condition for `forbid`, D = not condition for
`require`. Replacing rule `old` with `new` is not widening when, for every call `old` applied
to, `new` applies too, denies whenever `old` did (D_old implies D_new), and enforces at least
as much (mode). Implication between two condition trees is decided structurally and soundly:
when it cannot be shown, the change counts as widening (the reasons say what could not be
shown), so an owner is never told a widening change was safe.
"""

from __future__ import annotations

import fnmatch
from dataclasses import replace

from .model import ArgEq, BoolNode, Leaf, Node, RuleDef

_MODE_RANK = {"shadow": 0, "inherit": 1, "enforce": 2}


def widened(old: RuleDef | None, new: RuleDef | None) -> tuple[bool, list[str]]:
    """(widened, reasons) for replacing `old` with `new` (None: absent)."""
    if old is None:
        return False, []
    if new is None:
        return True, [f"rule {old.name} removed"]
    reasons: list[str] = []
    uncovered = [a for a in old.actions if not _covered(a, new.actions)]
    if uncovered:
        reasons.append(f"actions no longer cover {', '.join(uncovered)}")
    if _MODE_RANK[new.mode] < _MODE_RANK[old.mode]:
        reasons.append(f"mode {old.mode} -> {new.mode}")
    if old.effect != new.effect:
        reasons.append(f"effect {old.effect} -> {new.effect}")
    elif old.condition != new.condition:
        # forbid: old condition => new condition; require: new condition => old condition.
        a, b = (old.condition, new.condition) if old.effect == "forbid" else (new.condition, old.condition)
        if not implies(_strip(a), _strip(b)):
            reasons.append("the new condition does not deny every call the old one denied")
    return bool(reasons), reasons


def _covered(pattern: str, patterns: tuple[str, ...]) -> bool:
    for q in patterns:
        if q == pattern or q == "*":
            return True
        if "*" not in pattern and fnmatch.fnmatchcase(pattern, q):
            return True
        if q.endswith("*") and "*" not in q[:-1] and pattern.startswith(q[:-1]):
            return True
    return False


def _strip(node: Node) -> Node:
    """Paths differ between versions of a rule; compare nodes without them."""
    if isinstance(node, Leaf):
        return replace(node, path="")
    return BoolNode("", node.op, tuple(_strip(c) for c in node.children))


def implies(a: Node, b: Node) -> bool:
    """Sound (not complete): True only when a => b holds for every history."""
    if a == b:
        return True
    if isinstance(a, BoolNode) and a.op == "any":
        return all(implies(c, b) for c in a.children)
    if isinstance(b, BoolNode) and b.op == "all":
        return all(implies(a, c) for c in b.children)
    if isinstance(a, BoolNode) and a.op == "not" and isinstance(b, BoolNode) and b.op == "not":
        return implies(b.children[0], a.children[0])
    if isinstance(b, BoolNode) and b.op == "any" and any(implies(a, c) for c in b.children):
        return True
    if isinstance(a, BoolNode) and a.op == "all" and any(implies(c, b) for c in a.children):
        return True
    if isinstance(a, Leaf) and isinstance(b, Leaf):
        return _leaf_implies(a, b)
    return False


def _same_selection(a: Leaf, b: Leaf) -> bool:
    return (
        a.op == b.op
        and a.operation == b.operation
        and a.key == b.key
        and a.outcome == b.outcome
        and a.anchor == b.anchor
        and a.kind == b.kind
        and set(a.anchor_args_equal) == set(b.anchor_args_equal)
    )


def _args_weaker(a: tuple[ArgEq, ...], b: tuple[ArgEq, ...]) -> bool:
    """b's argument filter admits every event a's does (b asks a subset of a's equalities)."""
    return set(b) <= set(a)


def _leaf_implies(a: Leaf, b: Leaf) -> bool:
    if not _same_selection(a, b):
        return False
    wa, wb = a.within_seconds, b.within_seconds
    if a.op == "formerly":
        # An event in a's window also sits in a wider window, and passes a looser filter.
        return wb >= wa and _args_weaker(a.args_equal, b.args_equal)
    if a.op == "not_since":
        return False
    if a.fraction != b.fraction or (a.fraction is None) != (b.fraction is None):
        return False
    va, vb = a.value or 0.0, b.value or 0.0
    # A count grows with a looser filter: a differing filter is fine for lower bounds only.
    if (
        a.op == "count_within"
        and set(a.args_equal) != set(b.args_equal)
        and not (_args_weaker(a.args_equal, b.args_equal) and a.cmp in ("gt", "gte"))
    ):
        return False
    up = {"gt": 1, "gte": 1, "lt": -1, "lte": -1, "eq": 0}
    if up[a.cmp] == 1 and up[b.cmp] == 1:
        # count(wa) > va  =>  count(wb) > vb when the window is no smaller and the bar no higher.
        lo_a = va + (1 if a.cmp == "gt" else 0)
        lo_b = vb + (1 if b.cmp == "gt" else 0)
        return wb >= wa and lo_b <= lo_a
    if up[a.cmp] == -1 and up[b.cmp] == -1:
        hi_a = va - (1 if a.cmp == "lt" else 0)
        hi_b = vb - (1 if b.cmp == "lt" else 0)
        return wb <= wa and hi_b >= hi_a and set(a.args_equal) == set(b.args_equal)
    return False

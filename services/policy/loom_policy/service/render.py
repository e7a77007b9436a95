"""Domain results -> the JSON the ops answer (the same shape as the proto messages), so a
verdict reads the same in policy.check, a 403's detail, policy.decisions and a replay."""

from __future__ import annotations

import json
from typing import Any

import orjson

from ..domain.model import EvalError, LeafOutcome, RuleOutcome, Verdict
from ..domain.timeutil import us_to_iso


def leaf_json(leaf: LeafOutcome) -> dict[str, Any]:
    return {
        "path": leaf.path,
        "op": leaf.op,
        "holds": bool(leaf.holds),
        "observed": leaf.observed,
        "cmp": leaf.cmp,
        "threshold": leaf.threshold,
        "within_seconds": leaf.within_seconds,
        "operation": leaf.operation,
        "key": leaf.key,
        "key_value": leaf.key_value,
        "last_time": us_to_iso(leaf.last_us),
        "error": leaf.error,
    }


def rule_json(rule: RuleOutcome) -> dict[str, Any]:
    return {
        "name": rule.name,
        "effect": rule.effect,
        "mode": rule.mode,
        "condition_holds": bool(rule.condition),
        "denies": rule.denies,
        "leaves": [leaf_json(leaf) for leaf in rule.leaves],
        "error": rule.error,
    }


def error_json(e: EvalError) -> dict[str, Any]:
    return {"rule": e.rule, "path": e.path, "message": e.message}


def verdict_json(v: Verdict) -> dict[str, Any]:
    """Exactly the spec's verdict fields."""
    return {
        "decision": v.decision,
        "would_enforce": v.would_enforce,
        "mode": v.mode,
        "write_shaped": v.write_shaped,
        "determining_rules": list(v.determining_rules),
        "errors": [error_json(e) for e in v.errors],
        "rules": [rule_json(r) for r in v.rules],
        "latency_ms": round(v.latency_ms, 4),
    }


def refusal_detail(v: Verdict) -> dict[str, Any]:
    """A 403 POLICY_FORBIDDEN's detail: the rules that decided it and their per-leaf values."""
    return {
        "reason": "policy",
        "mode": v.mode,
        "write_shaped": v.write_shaped,
        "determining_rules": list(v.determining_rules),
        "rules": [rule_json(r) for r in v.rules if r.name in v.determining_rules],
        "errors": [error_json(e) for e in v.errors],
    }


# --- the decision ledger's storage form -------------------------------------------------------
# policy_decisions.rules holds every rule's outcome and every leaf's values as compact JSON
# arrays (a third of the dict form's rendering time and under half its size: the gate writes
# one per gated call). `rules_from_stored` turns it back into the answer's shape.

_LEAF_FIELDS = (
    "path",
    "op",
    "holds",
    "observed",
    "cmp",
    "threshold",
    "within_seconds",
    "operation",
    "key",
    "key_value",
    "last_us",
    "error",
)


def rules_stored(rules: list[RuleOutcome]) -> str:
    """The rules' outcomes as a decision row stores them (a JSON array of one array per rule),
    written as the JSON string the row's line holds: each outcome is escaped once, when first
    rendered, and escaping the pieces apart gives the escaped whole ("[", "," and "]" are kept
    as they are)."""
    return '"[' + ",".join([r.stored or _rule_stored(r) for r in rules]) + ']"'


def _rule_stored(r: RuleOutcome) -> str:
    # The gate renders each outcome a call's own row moved as it records the call: orjson
    # itself, since every value here is a string, number, bool or None (fastjson's fallbacks for
    # other values cost this call more than the encoding). Escaped as a JSON string's content.
    text = orjson.dumps(
        [
            r.name,
            r.effect,
            r.mode,
            r.condition,
            r.denies,
            r.error,
            [
                [
                    leaf.path,
                    leaf.op,
                    leaf.holds,
                    leaf.observed,
                    leaf.cmp,
                    leaf.threshold,
                    leaf.within_seconds,
                    leaf.operation,
                    leaf.key,
                    leaf.key_value,
                    leaf.last_us,
                    leaf.error,
                ]
                for leaf in r.leaves
            ],
        ]
    )
    r.stored = orjson.dumps(text.decode())[1:-1].decode()
    return r.stored


def rules_from_stored(text: str) -> list[dict[str, Any]]:
    out = []
    for name, effect, mode, condition, denies, error, leaves in json.loads(text or "[]"):
        rendered = []
        for values in leaves:
            leaf = dict(zip(_LEAF_FIELDS, values, strict=True))
            leaf["holds"] = bool(leaf["holds"])
            leaf["last_time"] = us_to_iso(int(leaf.pop("last_us")))
            rendered.append(leaf)
        out.append(
            {
                "name": name,
                "effect": effect,
                "mode": mode,
                "condition_holds": bool(condition),
                "denies": denies,
                "leaves": rendered,
                "error": error,
            }
        )
    return out

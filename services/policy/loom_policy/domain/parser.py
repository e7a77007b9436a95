"""JSON -> rule syntax tree. Every refusal is a 422 naming the path of the bad node
(`condition.of[1].within`), so an owner can fix the rule from the message alone."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from loom_core.errors import ValidationFailed, invalid_field

from .args import scalar
from .model import BOOL_OPS, CMPS, EFFECTS, KEYS, LEAF_OPS, OUTCOMES, RULE_MODES, ArgEq, BoolNode, Leaf, Node, RuleDef
from .timeutil import parse_duration

NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")
OP_PATTERN = re.compile(r"^[A-Za-z0-9_*][A-Za-z0-9_.*-]{0,127}$")
ARG_FIELD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
MAX_DEPTH = 8
MAX_LEAVES = 32
MAX_ACTIONS = 64
MAX_ARGS = 8
BIND_PREFIX = "$args."

_COMMON = {"op", "within", "operation", "key"}
_FIELDS = {
    "formerly": _COMMON | {"args_equal", "outcome"},
    "count_within": _COMMON | {"args_equal", "outcome", "cmp", "value"},
    "not_since": _COMMON | {"args_equal", "outcome", "anchor", "anchor_args_equal"},
    "breadth_within": _COMMON | {"cmp", "value", "fraction", "kind"},
}


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


class _Parse:
    def __init__(self, max_window_seconds: int) -> None:
        self.max_window = max_window_seconds
        self.leaves = 0
        self.warnings: list[str] = []

    def node(self, raw: Any, path: str, depth: int) -> Node:
        if not isinstance(raw, Mapping):
            raise invalid_field(path, "must be an object with an op")
        if depth > MAX_DEPTH:
            raise invalid_field(path, f"nested deeper than {MAX_DEPTH}")
        op = raw.get("op")
        if not isinstance(op, str) or op not in (*BOOL_OPS, *LEAF_OPS):
            raise invalid_field(_join(path, "op"), f"one of {', '.join((*BOOL_OPS, *LEAF_OPS))}")
        if op in BOOL_OPS:
            return self.bool_node(raw, op, path, depth)
        return self.leaf(raw, op, path)

    def bool_node(self, raw: Mapping[str, Any], op: str, path: str, depth: int) -> BoolNode:
        extra = sorted(set(raw) - {"op", "of"})
        if extra:
            raise invalid_field(_join(path, extra[0]), f"unknown field for {op}")
        of = raw.get("of")
        if op == "not":
            if isinstance(of, Sequence) and not isinstance(of, (str, bytes)) and len(of) == 1:
                of = of[0]
                return BoolNode(path, op, (self.node(of, f"{path}.of[0]", depth + 1),))
            if not isinstance(of, Mapping):
                raise invalid_field(_join(path, "of"), "not takes one condition object")
            return BoolNode(path, op, (self.node(of, f"{path}.of", depth + 1),))
        if not isinstance(of, Sequence) or isinstance(of, (str, bytes)) or not of:
            raise invalid_field(_join(path, "of"), f"{op} takes a non-empty list of conditions")
        return BoolNode(path, op, tuple(self.node(c, f"{path}.of[{i}]", depth + 1) for i, c in enumerate(of)))

    def leaf(self, raw: Mapping[str, Any], op: str, path: str) -> Leaf:
        self.leaves += 1
        if self.leaves > MAX_LEAVES:
            raise invalid_field(path, f"a rule holds at most {MAX_LEAVES} leaves")
        extra = sorted(set(raw) - _FIELDS[op])
        if extra:
            raise invalid_field(_join(path, extra[0]), f"unknown field for {op}")
        within_raw = raw.get("within")
        if within_raw is None:
            raise invalid_field(_join(path, "within"), "required (30s, 15m, 1h, 7d)")
        try:
            requested = parse_duration(within_raw)
        except ValueError as exc:
            raise invalid_field(_join(path, "within"), str(exc)) from None
        within = min(requested, self.max_window)
        if within < requested:
            self.warnings.append(f"{_join(path, 'within')}: {within_raw} capped to {within}s (LOOM_POLICY_MAX_WINDOW_SECONDS)")
        operation = self.pattern(raw.get("operation"), _join(path, "operation"), required=op == "not_since")
        default_key = "actor" if op == "breadth_within" else "agent"
        key = raw.get("key", default_key)
        if key not in KEYS:
            raise invalid_field(_join(path, "key"), f"one of {', '.join(KEYS)}")
        outcome = raw.get("outcome", "ok")
        if outcome not in OUTCOMES:
            raise invalid_field(_join(path, "outcome"), f"one of {', '.join(OUTCOMES)}")
        leaf: dict[str, Any] = {
            "path": path,
            "op": op,
            "within_seconds": within,
            "requested_seconds": requested,
            "operation": operation,
            "key": key,
            "outcome": outcome,
        }
        if "args_equal" in raw:
            leaf["args_equal"] = self.args_equal(raw["args_equal"], _join(path, "args_equal"))
        if op in ("count_within", "breadth_within"):
            cmp = raw.get("cmp")
            if cmp not in CMPS:
                raise invalid_field(_join(path, "cmp"), f"required, one of {', '.join(CMPS)}")
            leaf["cmp"] = cmp
            has_value, has_fraction = "value" in raw, "fraction" in raw
            if op == "count_within" or not has_fraction:
                if not has_value:
                    raise invalid_field(_join(path, "value"), "required" if op == "count_within" else "required (or fraction)")
                leaf["value"] = self.count(raw["value"], _join(path, "value"))
            if op == "breadth_within":
                if has_value and has_fraction:
                    raise invalid_field(_join(path, "fraction"), "give value or fraction, not both")
                if has_fraction:
                    f = raw["fraction"]
                    if isinstance(f, bool) or not isinstance(f, (int, float)) or not 0 <= f <= 1:
                        raise invalid_field(_join(path, "fraction"), "a number from 0 to 1")
                    leaf["fraction"] = float(f)
                kind = raw.get("kind", "memory")
                if not isinstance(kind, str) or not NAME.match(kind):
                    raise invalid_field(_join(path, "kind"), "a lower-case name such as memory")
                leaf["kind"] = kind
                leaf["outcome"] = "any"
        if op == "not_since":
            leaf["anchor"] = self.pattern(raw.get("anchor"), _join(path, "anchor"), required=True)
            if "anchor_args_equal" in raw:
                leaf["anchor_args_equal"] = self.args_equal(raw["anchor_args_equal"], _join(path, "anchor_args_equal"))
        return Leaf(**leaf)

    @staticmethod
    def pattern(value: Any, path: str, *, required: bool) -> str:
        if value is None and not required:
            return "*"
        if not isinstance(value, str) or not value:
            raise invalid_field(path, "required: an op name or glob such as memory.get or memory.*")
        if not OP_PATTERN.match(value):
            raise invalid_field(path, "an op name or glob such as memory.get or memory.*")
        return value

    @staticmethod
    def count(value: Any, path: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or float(value) != int(value):
            raise invalid_field(path, "a whole number, 0 or more")
        return float(int(value))

    @staticmethod
    def args_equal(raw: Any, path: str) -> tuple[ArgEq, ...]:
        if not isinstance(raw, Mapping) or not raw:
            raise invalid_field(path, "an object of argument name -> literal or $args.<field>")
        if len(raw) > MAX_ARGS:
            raise invalid_field(path, f"at most {MAX_ARGS} arguments")
        out = []
        for name, value in raw.items():
            p = f"{path}.{name}"
            if not isinstance(name, str) or not ARG_FIELD.match(name):
                raise invalid_field(p, "an argument name")
            if isinstance(value, str) and value.startswith("$"):
                bind = value[len(BIND_PREFIX) :] if value.startswith(BIND_PREFIX) else ""
                if not ARG_FIELD.match(bind):
                    raise invalid_field(p, "a binding is written $args.<field>")
                out.append(ArgEq(name, bind=bind))
            elif isinstance(value, (str, int, float, bool)):
                out.append(ArgEq(name, literal=scalar(value)))
            else:
                raise invalid_field(p, "a string, number or boolean literal, or $args.<field>")
        return tuple(out)


def parse_rule(raw: Any, *, max_window_seconds: int, prefix: str = "") -> tuple[RuleDef, list[str]]:
    """A rule as written -> its syntax tree and any warnings. Raises 422 naming the bad path
    (under `prefix`, e.g. `rules[0]`, when the rule came inside a list)."""
    if not isinstance(raw, Mapping):
        raise invalid_field(prefix or "(body)", "a rule object")
    try:
        return _parse_rule(raw, max_window_seconds)
    except ValidationFailed as exc:
        if not prefix:
            raise
        detail = dict(exc.detail or {})
        field = _join(prefix, str(detail.get("field", "")))
        raise invalid_field(field, str(detail.get("reason", exc.message))) from None


def _parse_rule(raw: Mapping[str, Any], max_window_seconds: int) -> tuple[RuleDef, list[str]]:
    prefix = ""
    p = _Parse(max_window_seconds)
    name = raw.get("name")
    if not isinstance(name, str) or not NAME.match(name):
        raise invalid_field(_join(prefix, "name"), "lower-case letters, digits, '.', '_' and '-', at most 64")
    effect = raw.get("effect")
    if effect not in EFFECTS:
        raise invalid_field(_join(prefix, "effect"), "forbid or require")
    actions = raw.get("actions")
    if not isinstance(actions, Sequence) or isinstance(actions, (str, bytes)) or not actions:
        raise invalid_field(_join(prefix, "actions"), "a non-empty list of op names or globs")
    if len(actions) > MAX_ACTIONS:
        raise invalid_field(_join(prefix, "actions"), f"at most {MAX_ACTIONS}")
    acts = tuple(p.pattern(a, f"{_join(prefix, 'actions')}[{i}]", required=True) for i, a in enumerate(actions))
    for a in acts:
        if a.startswith(("policy.", "ops.")):
            p.warnings.append(f"actions: the gate never applies to {a} (policy.* and ops.* stay open so a rule can be fixed)")
    mode = raw.get("mode") or "inherit"
    if mode not in RULE_MODES:
        raise invalid_field(_join(prefix, "mode"), "inherit, shadow or enforce")
    description = raw.get("description") or ""
    if not isinstance(description, str) or len(description) > 2000:
        raise invalid_field(_join(prefix, "description"), "text of at most 2000 characters")
    cond_raw = raw.get("condition")
    if not cond_raw:
        raise invalid_field(_join(prefix, "condition"), "required: a leaf or an all / any / not tree")
    condition = p.node(cond_raw, _join(prefix, "condition"), 1)
    rule = RuleDef(
        name=name,
        effect=effect,
        actions=acts,
        condition=condition,
        description=description,
        mode=mode,
        raw_condition=dict(cond_raw),
        leaf_count=p.leaves,
    )
    return rule, p.warnings

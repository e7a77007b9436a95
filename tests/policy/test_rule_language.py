"""The rule language's parser: well-formed rules compile with their defaults, and a malformed
one is refused with 422 naming the path of the bad node."""

from __future__ import annotations

from typing import Any

import pytest
from loom_core.errors import ValidationFailed
from loom_policy.domain.model import Leaf
from loom_policy.domain.parser import parse_rule
from loom_policy.domain.timeutil import parse_duration

LEAF = {"op": "formerly", "within": "1h", "operation": "memory.get"}


def parse(**over: Any) -> Any:
    raw = {"name": "r", "effect": "require", "actions": ["memory.delete"], "condition": LEAF, **over}
    return parse_rule(raw, max_window_seconds=86400)


def refused(prefix: str = "", **over: Any) -> dict[str, Any]:
    raw = {"name": "r", "effect": "require", "actions": ["memory.delete"], "condition": LEAF, **over}
    with pytest.raises(ValidationFailed) as info:
        parse_rule(raw, max_window_seconds=86400, prefix=prefix)
    assert info.value.http_status == 422
    detail = info.value.detail or {}
    assert info.value.message.startswith(str(detail["field"]))
    return detail


@pytest.mark.parametrize(("text", "seconds"), [("30s", 30), ("15m", 900), ("1h", 3600), ("7d", 604800)])
def test_durations(text: str, seconds: int) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "0s", "1w", "1.5h", "h", "-1m", "10 m"])
def test_bad_durations_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_the_specs_example_parses_with_one_leaf() -> None:
    rule, warnings = parse(
        name="read-before-delete",
        condition={"op": "formerly", "within": "1h", "operation": "memory.get", "args_equal": {"memory_key": "$args.memory_key"}},
        description="An agent deletes only what it has just looked at.",
    )
    assert (rule.leaf_count, rule.mode, warnings) == (1, "inherit", [])
    leaf = rule.condition
    assert isinstance(leaf, Leaf)
    assert (leaf.key, leaf.outcome, leaf.within_seconds, leaf.args_equal[0].bind) == ("agent", "ok", 3600, "memory_key")


def test_breadth_within_defaults_to_the_actor_key_and_memory_rows() -> None:
    rule, _ = parse(condition={"op": "breadth_within", "within": "1h", "cmp": "gt", "value": 10})
    assert (rule.condition.key, rule.condition.kind) == ("actor", "memory")


def test_a_capped_window_is_accepted_with_a_warning() -> None:
    rule, warnings = parse(condition={**LEAF, "within": "7d"})
    assert rule.condition.within_seconds == 86400 and rule.condition.requested_seconds == 604800
    assert warnings and "capped to 86400s" in warnings[0]


def test_actions_the_gate_never_applies_to_are_warned_about() -> None:
    _, warnings = parse(actions=["policy.set", "memory.delete"])
    assert any("policy.set" in w for w in warnings)


def test_leaf_count_counts_every_leaf() -> None:
    rule, _ = parse(condition={"op": "any", "of": [LEAF, {"op": "not", "of": LEAF}, {"op": "all", "of": [LEAF, LEAF]}]})
    assert rule.leaf_count == 4


@pytest.mark.parametrize(
    ("over", "field"),
    [
        ({"name": "Bad Name"}, "name"),
        ({"effect": "allow"}, "effect"),
        ({"actions": []}, "actions"),
        ({"actions": ["memory.delete", "bad op!"]}, "actions[1]"),
        ({"mode": "loud"}, "mode"),
        ({"condition": None}, "condition"),
        ({"condition": {"op": "sometimes"}}, "condition.op"),
        ({"condition": {"op": "formerly", "operation": "memory.get"}}, "condition.within"),
        ({"condition": {**LEAF, "within": "1w"}}, "condition.within"),
        ({"condition": {**LEAF, "key": "org"}}, "condition.key"),
        ({"condition": {**LEAF, "subject": "user:bob"}}, "condition.subject"),
        ({"condition": {**LEAF, "outcome": "maybe"}}, "condition.outcome"),
        ({"condition": {**LEAF, "args_equal": {"k": "$other.k"}}}, "condition.args_equal.k"),
        ({"condition": {**LEAF, "args_equal": {"k": ["a"]}}}, "condition.args_equal.k"),
        ({"condition": {"op": "all", "of": []}}, "condition.of"),
        (
            {"condition": {"op": "any", "of": [LEAF, {"op": "count_within", "within": "1h", "operation": "memory.set", "value": 3}]}},
            "condition.of[1].cmp",
        ),
        ({"condition": {"op": "all", "of": [LEAF, {"op": "any", "of": [{**LEAF, "within": "soon"}]}]}}, "condition.of[1].of[0].within"),
        ({"condition": {"op": "count_within", "within": "1h", "operation": "x.y", "cmp": "gt", "value": -1}}, "condition.value"),
        ({"condition": {"op": "count_within", "within": "1h", "operation": "x.y", "cmp": "gt", "value": 1.5}}, "condition.value"),
        ({"condition": {"op": "not_since", "within": "1h", "operation": "task.heartbeat"}}, "condition.anchor"),
        ({"condition": {"op": "not_since", "within": "1h", "anchor": "task.claim"}}, "condition.operation"),
        ({"condition": {"op": "breadth_within", "within": "1h", "cmp": "gt"}}, "condition.value"),
        ({"condition": {"op": "breadth_within", "within": "1h", "cmp": "gt", "fraction": 1.5}}, "condition.fraction"),
        ({"condition": {"op": "breadth_within", "within": "1h", "cmp": "gt", "value": 1, "fraction": 0.5}}, "condition.fraction"),
        ({"condition": {"op": "not", "of": [LEAF, LEAF]}}, "condition.of"),
        ({"condition": {"op": "all", "of": [LEAF], "extra": 1}}, "condition.extra"),
    ],
)
def test_a_malformed_rule_is_refused_naming_the_path(over: dict[str, Any], field: str) -> None:
    assert refused(**over)["field"] == field


def test_a_rule_passed_in_a_list_is_refused_under_its_index() -> None:
    assert refused("rules[2]", condition={"op": "all", "of": [{"op": "nope"}]})["field"] == "rules[2].condition.of[0].op"


def test_too_deep_or_too_many_leaves_is_refused() -> None:
    deep: dict[str, Any] = LEAF
    for _ in range(9):
        deep = {"op": "not", "of": deep}
    assert refused(condition=deep)["field"].startswith("condition.of")
    many = {"op": "any", "of": [LEAF] * 33}
    assert refused(condition=many)["field"] == "condition.of[32]"

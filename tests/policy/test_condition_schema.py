"""The rule language's published JSON Schema (proto/loom_api/policy/v1/condition.schema.json, the
`grammar` option of a rule's `condition`): one self-referring `PolicyCondition` (an anyOf over node
kinds, each an object with `op` required and no other fields), cheap to generate from. It accepts
exactly what the parser accepts, save the two rules it does not count, which the plane refuses with
a documented 422 naming the node: a tree deeper than 8, or with more than 32 leaves. Random trees,
valid and not, get the same verdict from both. The schema is what /openapi.json, /v1/ops and MCP
publish and what every door checks first."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from loom_core.catalog import load_catalog
from loom_core.errors import ValidationFailed
from loom_gateway.app import build_openapi
from loom_policy.domain.parser import MAX_DEPTH, MAX_LEAVES, parse_rule

CATALOG = load_catalog()
SET = CATALOG.get("policy.set")
assert SET is not None


def schema_accepts(condition: Any) -> bool:
    try:
        CATALOG.parse_request(SET, {"name": "r", "effect": "forbid", "actions": ["grants.list"], "condition": condition})
    except ValidationFailed:
        return False
    return True


def parser_accepts(condition: Any) -> bool:
    try:
        parse_rule({"name": "r", "effect": "forbid", "actions": ["grants.list"], "condition": condition}, max_window_seconds=86400)
    except ValidationFailed:
        return False
    return True


def depth(condition: Any) -> int:
    if isinstance(condition, dict) and condition.get("op") in ("all", "any", "not"):
        of = condition.get("of")
        children = of if isinstance(of, list) else [of]
        return 1 + max((depth(c) for c in children), default=0)
    return 1


def leaves(condition: Any) -> int:
    if isinstance(condition, dict) and condition.get("op") in ("all", "any", "not"):
        of = condition.get("of")
        children = of if isinstance(of, list) else [of]
        return sum(leaves(c) for c in children)
    return 1


# Values near the grammar's edges, right and wrong, for every field a node can hold.
FIELDS: dict[str, list[Any]] = {
    "within": ["1h", "30s", " 15m ", "7d", "999999999d", "0s", "1w", "1.5h", "", 5, None],
    "operation": ["memory.get", "memory.*", "*", "", "has space", "a" * 129, None, 3],
    "key": ["agent", "session", "user", "actor", "nobody", None],
    "outcome": ["ok", "failed", "any", "never", None],
    "cmp": ["gt", "gte", "lt", "lte", "eq", "ne", None],
    "value": [0, 1, 10.0, 2.5, -1, True, "3", None],
    "fraction": [0, 0.5, 1, 1.5, -0.1, False, None],
    "kind": ["memory", "Memory", "", None],
    "anchor": ["memory.get", "", "bad anchor", None],
    "args_equal": [
        {"memory_key": "$args.memory_key"},
        {"a": "lit"},
        {"a": ""},
        {"a": 1, "b": True},
        {"a": "$x"},
        {"a": None},
        {},
        {"1a": "x"},
        {f"k{i}": i for i in range(9)},
    ],
    "anchor_args_equal": [{"k": "$args.k"}, {"k": [1]}, {}],
    "bogus": [1],
}
LEAF_OPS = ["formerly", "count_within", "not_since", "breadth_within", "sometimes"]


@st.composite
def leaf(draw: st.DrawFn) -> dict[str, Any]:
    node: dict[str, Any] = {"op": draw(st.sampled_from(LEAF_OPS))}
    for name in draw(st.lists(st.sampled_from(sorted(FIELDS)), max_size=6, unique=True)):
        value = draw(st.sampled_from(FIELDS[name]))
        if value is not None:
            node[name] = value
    return node


def tree(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    well_formed = st.one_of(
        st.builds(lambda op, of: {"op": op, "of": of}, st.sampled_from(["all", "any"]), st.lists(children, min_size=1, max_size=4)),
        st.builds(lambda of: {"op": "not", "of": of}, children),
        st.builds(lambda of: {"op": "not", "of": [of]}, children),
    )
    malformed = st.one_of(
        st.builds(lambda op: {"op": op, "of": []}, st.sampled_from(["all", "any", "not"])),
        st.builds(lambda a, b: {"op": "not", "of": [a, b]}, children, children),
        st.builds(lambda of: {"op": "all", "of": of, "extra": 1}, st.lists(children, min_size=1, max_size=1)),
        st.builds(lambda of: {"op": "any", "of": of}, children),
    )
    return st.one_of(well_formed, well_formed, well_formed, malformed)


# Plausible leaves most of the time, so trees are often valid and the two verdicts are tested both ways.
VALID_LEAVES = st.sampled_from(
    [
        {"op": "formerly", "within": "1h", "operation": "memory.get"},
        {"op": "count_within", "within": "15m", "cmp": "gt", "value": 3},
        {"op": "not_since", "within": "1d", "operation": "a.b", "anchor": "c.*"},
        {"op": "breadth_within", "within": "1h", "cmp": "gte", "fraction": 0.5},
    ]
)
CONDITIONS = st.recursive(st.one_of(VALID_LEAVES, VALID_LEAVES, VALID_LEAVES, leaf()), tree, max_leaves=40)


@pytest.mark.slow  # 400 generated rule trees, each through the schema and the parser
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(CONDITIONS)
def test_the_schema_and_the_parser_agree_on_every_condition(condition: Any) -> None:
    by_parser = parser_accepts(condition)
    if leaves(condition) > MAX_LEAVES or depth(condition) > MAX_DEPTH:
        # The two rules the schema does not count: the plane refuses them (422 naming the node).
        assert not by_parser
        return
    assert schema_accepts(condition) == by_parser, condition


@pytest.mark.parametrize("levels", [8, 9])
def test_a_tree_deeper_than_eight_is_schema_valid_and_refused_by_the_plane_only(levels: int) -> None:
    condition: dict[str, Any] = {"op": "formerly", "within": "1h"}
    for _ in range(levels - 1):
        condition = {"op": "not", "of": condition}
    assert schema_accepts(condition)
    assert parser_accepts(condition) == (levels <= 8)


def test_more_than_32_leaves_is_schema_valid_and_refused_by_the_plane_only() -> None:
    leaf = {"op": "formerly", "within": "1h"}
    condition = {"op": "all", "of": [{"op": "any", "of": [leaf] * 17}, {"op": "any", "of": [leaf] * 16}]}
    assert schema_accepts(condition) and not parser_accepts(condition)
    assert not schema_accepts({"op": "all", "of": [leaf] * 33})  # one list past 32 is refused by both


def test_a_refusal_names_the_bad_node() -> None:
    with pytest.raises(ValidationFailed) as info:
        CATALOG.parse_request(
            SET,
            {
                "name": "r",
                "effect": "forbid",
                "actions": ["grants.list"],
                "condition": {"op": "all", "of": [{"op": "formerly", "within": "1h"}, {"op": "formerly", "within": "an hour"}]},
            },
        )
    assert (info.value.detail or {})["field"] == "condition.of[1].within"


def test_openapi_publishes_the_rule_language_in_its_components() -> None:
    doc = build_openapi(CATALOG, {"policy": "(in process)"}, "test")
    for op in ("policy.set", "policy.check", "policy.replay"):
        text = str(doc["paths"][f"/v1/{op}"])
        assert "#/$defs/" not in text and "#/components/schemas/PolicyCondition" in text
    body = doc["paths"]["/v1/policy.set"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body["properties"]["condition"]["$ref"] == "#/components/schemas/PolicyCondition"
    schemas = doc["components"]["schemas"]
    node = schemas["PolicyCondition"]
    assert node["required"] == ["op"] and "if" not in str(schemas)
    kinds = [schemas[b["$ref"].rsplit("/", 1)[1]]["properties"]["op"] for b in node["anyOf"]]
    every = {"formerly", "count_within", "not_since", "breadth_within", "all", "any", "not"}
    assert {k for kind in kinds for k in kind.get("enum", [kind.get("const")])} == every
    # Self-referring, not unrolled: all / any / not hold PolicyCondition again.
    assert schemas["PolicyConditionAllAny"]["properties"]["of"]["items"]["$ref"] == "#/components/schemas/PolicyCondition"
    assert "$defs" in SET.input_schema  # /v1/ops and MCP carry the definitions in the op's own schema


@pytest.mark.parametrize(
    ("condition", "field"),
    [
        ({"op": "sometimes", "within": "1h"}, "condition.op"),
        ({"op": "all", "of": [{"op": "formerly", "within": "1h"}, {"op": "nope"}]}, "condition.of[1].op"),
        ({"op": "count_within", "within": "1h", "cmp": "gt"}, "condition.value"),
        ({"op": "breadth_within", "within": "1h", "cmp": "gt", "value": 1, "fraction": 0.5}, "condition.fraction"),
        ({"op": "not", "of": {"op": "formerly", "within": "1h", "bogus": 1}}, "condition.of.bogus"),
        ({"op": "formerly", "within": "1h", "args_equal": {"a": "$x"}}, "condition.args_equal.a"),
    ],
)
def test_a_schema_refusal_names_the_bad_node_as_the_parser_does(condition: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationFailed) as info:
        CATALOG.parse_request(SET, {"name": "r", "effect": "forbid", "actions": ["grants.list"], "condition": condition})
    assert (info.value.detail or {})["field"] == field, info.value.message

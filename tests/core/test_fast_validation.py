"""The catalog's fast request path gives what the slow one gives.

- The compiled validator (jsonschema-rs) only ever passes what `jsonschema` passes: every
  pattern the catalog publishes against Python's `re`, and mutated batch requests against the
  slow validator. What it refuses goes to `jsonschema`, which names the refusal as before: judging
  a union (a policy condition's node kinds) on the node's kind names the same field and reason
  as plain `jsonschema` walking every branch.
- JSON -> message (`_parse_into`) builds what `json_format.ParseDict` builds, and hands every
  shape it does not take to ParseDict (same message, same refusal).
- message -> JSON for a direct gRPC caller's check equals MessageToDict + 64-bit ints as numbers.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import jsonschema_rs
import pytest
from google.protobuf import json_format, struct_pb2
from jsonschema import Draft202012Validator
from loom_core import catalog as C
from loom_core.catalog import parse, to_json, validation
from loom_core.errors import ValidationFailed

CATALOG = C.load_catalog()


def _patterns(schema: Any, out: set[str]) -> set[str]:
    if isinstance(schema, dict):
        for k, v in schema.items():
            if k == "pattern" and isinstance(v, str):
                out.add(v)
            else:
                _patterns(v, out)
    elif isinstance(schema, list):
        for v in schema:
            _patterns(v, out)
    return out


PATTERNS = sorted(set().union(*(_patterns(op.input_schema, set()) for op in CATALOG.ops.values())))
BMP = [chr(c) for c in range(0x10000) if not 0xD800 <= c < 0xE000]
STEMS = ["abc", "user:abc", "sa:x", "a" * 40, "1-abcdefgh", "$args.x", "5m", " 5m ", "assistant-answer-x", "x.y.z", "*", "a.b", "abcdefgh"]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_compiled_pattern_is_never_looser_than_python_re(pattern: str) -> None:
    rx = re.compile(pattern)
    fast = jsonschema_rs.validator_for(validation._fast_schema({"type": "string", "pattern": pattern}))
    samples = BMP if pattern == C.NOT_BLANK else BMP[:0x800]
    samples = samples + [s + c for s in STEMS for c in ("", "\n", " ", "\x1c", "\x85", "\u00a0", "\u2028")]
    samples += [c + s for s in STEMS for c in BMP[:0x200]]
    looser = [t for t in samples if fast.is_valid(t) and not rx.search(t)]
    assert looser == []


def test_every_op_schema_compiles_for_the_fast_validator() -> None:
    assert [name for name, v in CATALOG._fast.items() if v is None] == []


def _create_many(n: int = 3) -> dict[str, Any]:
    return {
        "tasks": [
            {
                "inbox": "bench-bot",
                "kind": "bench.run",
                "title": f"task {i}",
                "brief": {"n": i, "f": 1.5, "ok": True, "none": None, "list": [1, "x", {"a": []}], "obj": {}},
                "disclosure": "internal",
                "priority": 3,
                "deadline": "2026-12-01T00:00:00Z",
                "not_before": "2026-11-30T00:00:00+01:00",
                "origin": "bench",
                "parent_task_id": "0123456789abcdef",
                "idempotency_key": f"k-{i}",
            }
            for i in range(n)
        ]
    }


def _complete_many(n: int = 3) -> dict[str, Any]:
    return {"tasks": [{"task_id": "0123456789abcdef01234567", "fence": 2**40 + i, "outcome": {"ok": True, "n": i}} for i in range(n)]}


def _pull() -> dict[str, Any]:
    return {"inbox": "bench-bot", "kinds": ["a", "b.c"], "status": "todo", "wait_seconds": 5, "lease_seconds": 60, "max_tasks": 100}


DEEP: Any = 1
for _ in range(parse.FAST_DEPTH + 8):
    DEEP = [DEEP]


def _policy_set() -> dict[str, Any]:
    formerly = {"op": "formerly", "within": "1h", "operation": "memory.get", "key": "agent", "args_equal": {"a": "$args.b"}}
    count = {"op": "count_within", "within": "15m", "operation": "memory.*", "cmp": "gt", "value": 3, "outcome": "ok"}
    breadth = {"op": "breadth_within", "within": "1d", "cmp": "gte", "fraction": 0.5, "kind": "memory"}
    condition = {"op": "any", "of": [formerly, {"op": "not", "of": {"op": "all", "of": [count, breadth]}}, {"op": "not", "of": [formerly]}]}
    return {"name": "r1", "effect": "forbid", "actions": ["memory.put"], "condition": condition}


VALID = [
    ("task.create_many", _create_many()),
    ("task.complete_many", _complete_many()),
    ("task.pull", _pull()),
    ("policy.set", _policy_set()),
]

BAD_VALUES: list[Any] = [
    None,
    True,
    0,
    -1,
    1.5,
    2.0,
    2**70,
    "",
    " ",
    "\x1c",
    "x" * 600,
    "Bad Name",
    "abc\n",
    "2026-13-01T00:00:00Z",
    "2026-12-01",
    [],
    [1],
    {},
    {"x": 1},
]


def _mutations(value: Any) -> list[Any]:
    """Every instance one edit away: each leaf replaced by each bad value, each key dropped, an unknown key added."""
    out: list[Any] = []
    if isinstance(value, dict):
        out.append({**value, "unknown_field": 1})
        for k, v in value.items():
            out.append({kk: vv for kk, vv in value.items() if kk != k})
            out += [{**value, k: bad} for bad in BAD_VALUES]
            out += [{**value, k: m} for m in _mutations(v)]
    elif isinstance(value, list) and value:
        out.append([])
        out.append(value * 40)
        out += [[m, *value[1:]] for m in _mutations(value[0])]
    return out


@pytest.mark.parametrize(("op_name", "args"), VALID)
def test_compiled_validator_passes_only_what_jsonschema_passes(op_name: str, args: dict[str, Any]) -> None:
    slow = Draft202012Validator(CATALOG.ops[op_name].input_schema, format_checker=validation.FORMATS)
    fast = CATALOG._fast[op_name]
    assert fast.is_valid(args) and slow.is_valid(args)
    looser = []
    for m in _mutations(args):
        try:
            passed = fast.is_valid(m)
        except Exception:  # noqa: BLE001 - the catalog sends what it cannot read to jsonschema
            passed = False
        if passed and not slow.is_valid(m):
            looser.append(m)
    assert looser == []


def _answer(op_name: str, args: dict[str, Any]) -> Any:
    try:
        msg = CATALOG.parse_request(CATALOG.ops[op_name], copy.deepcopy(args))
    except ValidationFailed as exc:
        return ("refused", exc.message, exc.detail)
    return msg.SerializeToString(deterministic=True)


@pytest.mark.parametrize(("op_name", "args"), VALID)
def test_every_request_gets_the_answer_it_got_before_the_fast_path(
    op_name: str, args: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Valid or refused, with the same message and field: parse_request with the fast paths on
    and with them off (plain jsonschema alone, walking every branch of a union; ParseDict alone)."""
    instances = [args, *_mutations(args)]
    fast = [_answer(op_name, i) for i in instances]
    monkeypatch.setitem(CATALOG._fast, op_name, None)
    monkeypatch.setitem(
        CATALOG._validators, op_name, Draft202012Validator(CATALOG.ops[op_name].input_schema, format_checker=validation.FORMATS)
    )

    def slow_parse(value: Any, msg: Any, depth: int = 0) -> None:
        raise parse.Slow

    monkeypatch.setattr(parse, "parse_into", slow_parse)
    slow = [_answer(op_name, i) for i in instances]
    assert [(i, a) for i, a, b in zip(instances, fast, slow, strict=True) if a != b] == []
    assert any(isinstance(a, tuple) for a in fast) and not isinstance(fast[0], tuple)


def test_a_valid_batch_does_not_reach_jsonschema(monkeypatch: pytest.MonkeyPatch) -> None:
    class Refuses:
        def iter_errors(self, _args: Any) -> Any:
            raise AssertionError("jsonschema ran on a valid request")

    monkeypatch.setitem(CATALOG._validators, "task.create_many", Refuses())
    msg = CATALOG.parse_request(CATALOG.ops["task.create_many"], _create_many(100))
    assert len(msg.tasks) == 100


def _parse_dict(op_name: str, args: Any) -> Any:
    msg = CATALOG.ops[op_name].request_cls()
    try:
        json_format.ParseDict(args, msg)
    except json_format.ParseError as exc:
        return ("refused", str(exc))
    return msg


def _fast_parse(op_name: str, args: Any) -> Any:
    msg = CATALOG.ops[op_name].request_cls()
    try:
        parse.parse_into(args, msg)
    except (parse.Slow, TypeError, ValueError, OverflowError):
        return _parse_dict(op_name, args)
    return msg


@pytest.mark.parametrize(("op_name", "args"), VALID)
def test_fast_json_to_message_builds_what_parse_dict_builds(op_name: str, args: dict[str, Any]) -> None:
    for instance in [args, *_mutations(args)]:
        want, got = _parse_dict(op_name, instance), _fast_parse(op_name, instance)
        if isinstance(want, tuple):
            assert got == want, instance
        else:
            assert got.SerializeToString(deterministic=True) == want.SerializeToString(deterministic=True), instance


@pytest.mark.parametrize(
    "instance",
    [
        {"tasks": [{"inbox": "a", "kind": "k", "idempotencyKey": "camel"}]},  # a JSON name: ParseDict's call
        {"tasks": [{"inbox": "a", "kind": "k", "brief": {"x": float("inf")}}]},
        {"tasks": [{"inbox": "a", "kind": "k", "brief": {"deep": DEEP}}]},  # past the fast depth
        {"tasks": [{"inbox": "a", "kind": "k", "priority": 2**40}]},
    ],
)
def test_shapes_the_fast_parser_does_not_take_go_to_parse_dict(instance: dict[str, Any]) -> None:
    want, got = _parse_dict("task.create_many", instance), _fast_parse("task.create_many", instance)
    assert got == want


def _reference_json(msg: Any) -> dict[str, Any]:
    out = json_format.MessageToDict(msg, preserving_proto_field_name=True)
    to_json.ints_back(msg.DESCRIPTOR, out)
    return out  # type: ignore[no-any-return]


@pytest.mark.parametrize(("op_name", "args"), VALID)
def test_sparse_message_json_equals_message_to_dict(op_name: str, args: dict[str, Any]) -> None:
    for instance in [args, *_mutations(args)]:
        msg = _fast_parse(op_name, instance)
        if not isinstance(msg, tuple):
            assert C.message_to_sparse_json(msg) == _reference_json(msg), instance


@pytest.mark.parametrize("op_name", sorted(CATALOG.ops))
def test_sparse_json_of_an_empty_request_equals_message_to_dict(op_name: str) -> None:
    msg = CATALOG.ops[op_name].request_cls()
    assert C.message_to_sparse_json(msg) == _reference_json(msg)


def test_struct_to_dict_equals_message_to_dict() -> None:
    s = struct_pb2.Struct()
    s.update({"a": 1, "b": 1.5, "c": [1, "x", None, {"d": True, "e": []}], "f": {"g": {}}, "h": None, "i": ""})
    assert C.struct_to_dict(s) == json_format.MessageToDict(s)
    s["nan"] = float("nan")
    with pytest.raises(ValueError):
        json_format.MessageToDict(s)
    with pytest.raises(ValueError):
        C.struct_to_dict(s)  # refused as the printer refuses it

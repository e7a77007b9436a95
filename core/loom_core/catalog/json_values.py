"""The values inside a message's JSON that are not plain Python values already: a Struct, a
double that is not finite, another google.protobuf type. The generated converters
(converters.py) call these."""

from __future__ import annotations

import math
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message
from google.protobuf.struct_pb2 import Struct, Value

# Deeper values than this go through protobuf's own printer, which refuses them as it always did.
_FAST_DEPTH = 64


class _Printer(Exception):
    """A value only protobuf's json_format prints exactly (a non-finite number, a Value with no kind)."""


def struct_to_dict(msg: Struct) -> dict[str, Any]:
    """A google.protobuf.Struct as protobuf's JSON printer gives it (numbers as floats), without
    the printer's per-value dispatch; anything it would refuse (a non-finite number, a Value
    with no kind) goes through the printer itself."""
    fields = msg.fields
    if not fields:
        return {}
    try:
        return {k: _value_to_py(v, 0) for k, v in fields.items()}
    except _Printer:
        return json_format.MessageToDict(msg)


def dict_to_struct(value: dict[str, Any] | None) -> Struct:
    """A JSON object as a google.protobuf.Struct (an empty one for None)."""
    s = Struct()
    if value:
        s.update(value)
    return s


def _value_to_py(v: Value, depth: int) -> Any:
    if depth > _FAST_DEPTH:
        raise _Printer
    kind = v.WhichOneof("kind")
    if kind == "string_value":
        return v.string_value
    if kind == "number_value":
        n = v.number_value
        if not math.isfinite(n):
            raise _Printer
        return n
    if kind == "bool_value":
        return v.bool_value
    if kind == "struct_value":
        return {k: _value_to_py(x, depth + 1) for k, x in v.struct_value.fields.items()}
    if kind == "list_value":
        return [_value_to_py(x, depth + 1) for x in v.list_value.values]
    if kind == "null_value":
        return None
    raise _Printer


def well_known_json(msg: Message) -> Any:
    """Any other google.protobuf type (Timestamp, Value, ...) as protobuf's printer gives it."""
    return json_format.MessageToDict(msg, preserving_proto_field_name=True)


def double_json(v: float) -> float | str:
    """A double as protobuf's JSON: a number, or "NaN" / "Infinity" / "-Infinity"."""
    if math.isfinite(v):
        return v
    return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")

"""JSON arguments into an op's request message: a fast path for the common shapes, protobuf's
json_format.ParseDict for the rest (whose result and refusals the fast path must equal)."""

from __future__ import annotations

import math
import re
from typing import Any

from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.struct_pb2 import NULL_VALUE, Struct, Value

from ..errors import ValidationFailed, invalid_field
from .schema import INT_FIELD_TYPES, INT_RANGES, FieldDescriptorOf

_PARSE_FIELD = re.compile(r"Failed to parse (\w+) field")
# Deeper values than this go through protobuf's own code, which refuses them as it always did.
FAST_DEPTH = 64


class Slow(Exception):
    """The fast path met something only protobuf's json_format handles exactly."""


def parse_args(cls: type[Message], args: dict[str, Any]) -> Message:
    """JSON arguments (already checked against the op's schema) as a `cls` message, or 422
    naming the field protobuf refuses (an integer past its range)."""
    msg = cls()
    try:
        try:
            parse_into(args, msg)
        except (Slow, TypeError, ValueError, OverflowError):
            msg = cls()
            json_format.ParseDict(args, msg)
    except RecursionError:
        raise ValidationFailed("the body nests too deeply", {"field": "(body)", "reason": "too deep"}) from None
    except json_format.ParseError as exc:
        # What the schema cannot say (an integer past its 32/64-bit range): name the field
        # protobuf names, in Loom's words rather than the library's.
        text = str(exc)
        found = _PARSE_FIELD.match(text)
        field_name = found.group(1) if found else "(body)"
        reason = "out of range" if "out of range" in text else "invalid value"
        raise invalid_field(field_name, reason) from exc
    return msg


def parse_into(args: object, msg: Message, depth: int = 0) -> None:
    """JSON arguments (already checked against the op's schema) into a message, the common
    shapes only: strings, booleans, integers, doubles, enum names, nested and repeated messages,
    Struct. Anything else raises Slow and the caller parses with json_format.ParseDict, whose
    result and refusals this must equal (tests/core/test_fast_validation.py)."""
    if not isinstance(args, dict) or depth > FAST_DEPTH:
        raise Slow
    desc = msg.DESCRIPTOR
    fields = desc.fields_by_name
    oneofs: set[str] | None = None
    for key, value in args.items():
        f = fields.get(key)
        if f is None or value is None:
            raise Slow
        if f.containing_oneof is not None:
            oneofs = oneofs or set()
            if f.containing_oneof.name in oneofs:
                raise Slow
            oneofs.add(f.containing_oneof.name)
        t = f.type
        if t == FieldDescriptor.TYPE_MESSAGE:
            mt = f.message_type
            if mt is None or mt.GetOptions().map_entry:
                raise Slow
            full = mt.full_name
            if f.is_repeated:
                if not isinstance(value, list) or full.startswith("google.protobuf."):
                    raise Slow
                container = getattr(msg, key)
                for item in value:
                    parse_into(item, container.add(), depth + 1)
            elif full == "google.protobuf.Struct":
                if not isinstance(value, dict):
                    raise Slow
                target = getattr(msg, key)
                target.SetInParent()
                _struct_into(value, target, depth + 1)
            elif full.startswith("google.protobuf."):
                raise Slow
            else:
                target = getattr(msg, key)
                target.SetInParent()
                parse_into(value, target, depth + 1)
        elif f.is_repeated:
            if not isinstance(value, list):
                raise Slow
            getattr(msg, key).extend([_scalar(f, t, v) for v in value])
        else:
            setattr(msg, key, _scalar(f, t, value))


def _scalar(f: FieldDescriptorOf, t: int, value: object) -> str | bool | int | float:
    if t == FieldDescriptor.TYPE_STRING:
        if isinstance(value, str):
            return value
    elif t == FieldDescriptor.TYPE_BOOL:
        if isinstance(value, bool):
            return value
    elif t in INT_FIELD_TYPES:
        if isinstance(value, int) and not isinstance(value, bool):
            low, high = INT_RANGES[t]
            if low <= value <= high:
                return value
    elif t == FieldDescriptor.TYPE_DOUBLE:
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            return float(value)
    elif t == FieldDescriptor.TYPE_ENUM and isinstance(value, str) and f.enum_type is not None:
        found = f.enum_type.values_by_name.get(value)
        if found is not None:
            return found.number
    raise Slow


def _struct_into(value: dict[Any, Any], target: Struct, depth: int) -> None:
    """ParseDict's Struct: every number a double; a non-finite one or a non-string key is its call."""
    for k, v in value.items():
        if not isinstance(k, str):
            raise Slow
        _value_into(v, target.fields[k], depth + 1)


def _value_into(v: object, target: Value, depth: int) -> None:
    if depth > FAST_DEPTH:
        raise Slow
    if isinstance(v, str):
        target.string_value = v
    elif isinstance(v, bool):
        target.bool_value = v
    elif isinstance(v, (int, float)):
        if not math.isfinite(v):
            raise Slow
        target.number_value = v
    elif isinstance(v, dict):
        target.struct_value.SetInParent()
        _struct_into(v, target.struct_value, depth)
    elif isinstance(v, list):
        lst = target.list_value
        lst.SetInParent()
        for item in v:
            _value_into(item, lst.values.add(), depth + 1)
    elif v is None:
        target.null_value = NULL_VALUE
    else:
        raise Slow

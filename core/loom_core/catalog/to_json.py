"""Messages as JSON, the way every door prints them. Each message type's converter is a plain
function generated from its descriptor (converters.py, by scripts/gen_converters.py); protobuf's
own printer is the reference they must equal, and the path for a message type they do not
cover (a .proto changed since they were generated: tests/core/test_converters.py says so)."""

from __future__ import annotations

from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message

from .converters import JSON, SPARSE
from .schema import INT64_TYPES, MessageDescriptor
from .timestamps import normalize_timestamps

_WELL_KNOWN_OBJECT = {"google.protobuf.Struct"}


def message_to_json(msg: Message) -> dict[str, Any]:
    """A message as the JSON the spec shows: field names as declared, 64-bit ints as numbers,
    every field without presence printed, instants as RFC 3339 UTC."""
    convert = JSON.get(type(msg))
    if convert is not None:
        return convert(msg)
    copy = type(msg)()
    copy.CopyFrom(msg)
    normalize_timestamps(copy)
    return message_to_json_reference(copy)


def message_to_sparse_json(msg: Message) -> dict[str, Any]:
    """A message as MessageToDict(preserving_proto_field_name=True) prints it (fields at their
    default left out, 64-bit ints as numbers, instants as sent): the JSON a direct gRPC call is
    checked as."""
    convert = SPARSE.get(type(msg))
    return convert(msg) if convert is not None else message_to_sparse_json_reference(msg)


def message_to_json_reference(msg: Message) -> dict[str, Any]:
    """`message_to_json` through protobuf's own printer."""
    out = json_format.MessageToDict(msg, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)
    ints_back(msg.DESCRIPTOR, out)
    return out


def message_to_sparse_json_reference(msg: Message) -> dict[str, Any]:
    """`message_to_sparse_json` through protobuf's own printer."""
    out = json_format.MessageToDict(msg, preserving_proto_field_name=True)
    ints_back(msg.DESCRIPTOR, out)
    return out


def ints_back(desc: MessageDescriptor, data: dict[str, Any]) -> None:
    """The 64-bit integers protobuf's printer gives as strings, as numbers again (a map's values stay strings)."""
    for f in desc.fields:
        if f.name not in data:
            continue
        value = data[f.name]
        if f.type in INT64_TYPES:
            data[f.name] = [int(v) for v in value] if isinstance(value, list) else int(value)
        elif f.message_type is not None and f.message_type.full_name not in _WELL_KNOWN_OBJECT:
            if f.message_type.GetOptions().map_entry:
                continue
            items = value if isinstance(value, list) else [value]
            for item in items:
                if isinstance(item, dict):
                    ints_back(f.message_type, item)

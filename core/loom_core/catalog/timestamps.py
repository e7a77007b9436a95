"""Instants as every door prints them: RFC 3339 UTC with a Z, whatever text a plane stored."""

from __future__ import annotations

import re

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from .schema import MessageDescriptor, field_options

# Per message type: its timestamp fields and the message fields that (transitively) hold some.
_TS_PLANS: dict[str, tuple[tuple[str, int], ...]] = {}
_TS, _TS_LIST, _NESTED, _NESTED_LIST, _NESTED_MAP = range(5)


def _ts_plan(desc: MessageDescriptor, seen: frozenset[str] = frozenset()) -> tuple[tuple[str, int], ...]:
    plan = _TS_PLANS.get(desc.full_name)
    if plan is not None:
        return plan
    steps: list[tuple[str, int]] = []
    for f in desc.fields:
        fo = field_options(f)
        if f.type == FieldDescriptor.TYPE_STRING and fo is not None and fo.timestamp:
            steps.append((f.name, _TS_LIST if f.is_repeated else _TS))
        elif f.message_type is not None and not f.message_type.full_name.startswith("google.protobuf."):
            if f.message_type.GetOptions().map_entry:
                value = f.message_type.fields_by_name["value"]
                if (
                    value.message_type is not None
                    and value.message_type.full_name not in seen
                    and _ts_plan(value.message_type, seen | {desc.full_name})
                ):
                    steps.append((f.name, _NESTED_MAP))
            elif (
                f.message_type.full_name not in seen
                and f.message_type.full_name != desc.full_name
                and _ts_plan(f.message_type, seen | {desc.full_name})
            ):
                steps.append((f.name, _NESTED_LIST if f.is_repeated else _NESTED))
    plan = tuple(steps)
    _TS_PLANS[desc.full_name] = plan
    return plan


_TS_BY_DESC: dict[MessageDescriptor, tuple[tuple[str, int], ...]] = {}


def normalize_timestamps(msg: Message) -> None:
    """Every timestamp field of a message (nested ones too) as RFC 3339 UTC with a Z, in place:
    what the gRPC door answers, so every door prints the same instants the same way."""
    desc = msg.DESCRIPTOR
    plan = _TS_BY_DESC.get(desc)
    if plan is None:
        plan = _TS_BY_DESC[desc] = _ts_plan(desc)
    for name, kind in plan:
        if kind == _TS:
            value = getattr(msg, name)
            if value and value[-1] != "Z":
                setattr(msg, name, rfc3339(value))
        elif kind == _TS_LIST:
            items = getattr(msg, name)
            for i, value in enumerate(items):
                items[i] = rfc3339(value)
        elif kind == _NESTED:
            if msg.HasField(name):
                normalize_timestamps(getattr(msg, name))
        elif kind == _NESTED_LIST:
            for item in getattr(msg, name):
                normalize_timestamps(item)
        else:
            for item in getattr(msg, name).values():
                normalize_timestamps(item)


_CH_TIME = re.compile(r"^(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?)$")


def rfc3339(value: str) -> str:
    """A timestamp field as RFC 3339 UTC with a Z, whatever text the plane stored: ClickHouse's
    `2026-11-30 18:08:44.948241` (UTC) becomes `2026-11-30T18:08:44.948241Z`."""
    if not value or value[-1] == "Z":  # unset, or already RFC 3339 UTC: most values on a hot path
        return value
    found = _CH_TIME.match(value)
    if found:
        return f"{found.group(1)}T{found.group(2)}Z"
    if value.endswith("+00:00"):
        return value[:-6] + "Z"
    return value

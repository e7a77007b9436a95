"""Typed rows into proto messages and request messages into typed rows, field by field by name,
so a handler names only the fields whose name or form differs (a timestamp's `*_time` string,
a field blanked for a caller who may not see it) instead of restating every `x=row.x`.

- `message_from(pb.Task, row, deadline=format_time(row.deadline))`: every field of the message
  that `row` has an attribute of the same name for, plus the keywords given.
- `dataclass_from(NewTask, req, brief=...)`: every field of the dataclass that the message has
  a field of the same name for, plus the keywords given.

A Struct field takes and gives a dict (`dict_to_struct` / `struct_to_dict`), a repeated field
takes any iterable and gives a list, a map field gives a dict; the rest pass as they are.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from google.protobuf.message import Message

from .json_values import dict_to_struct, struct_to_dict
from .schema import FieldDescriptorOf

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

M = TypeVar("M", bound=Message)
D = TypeVar("D", bound="DataclassInstance")

_STRUCT = "google.protobuf.Struct"
# How a field's value crosses: as it is, a Struct (dict), a repeated field (list), a map (dict).
_PLAIN, _STRUCT_KIND, _REPEATED, _MAP = range(4)


# Worked out once per message class (and per message class and source type).
_kinds: dict[type[Message], tuple[tuple[str, int], ...]] = {}
_shared: dict[tuple[type[Message], type], tuple[tuple[str, ...], tuple[str, ...]]] = {}


def _field_kinds(message_type: type[Message]) -> tuple[tuple[str, int], ...]:
    found = _kinds.get(message_type)
    if found is None:
        found = _kinds[message_type] = tuple((field.name, _kind(field)) for field in message_type.DESCRIPTOR.fields)
    return found


def _kind(field: FieldDescriptorOf) -> int:
    message = field.message_type
    if message is not None and message.GetOptions().map_entry:
        return _MAP
    if field.is_repeated:
        return _REPEATED
    if message is not None and message.full_name == _STRUCT:
        return _STRUCT_KIND
    return _PLAIN


def _shared_fields(message_type: type[Message], source_type: type) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The message's fields a source of this type may have (a dataclass's own fields, or, for any
    other source, all of them): those that take the value as it is, and the Struct fields."""
    found = _shared.get((message_type, source_type))
    if found is None:
        kinds = _field_kinds(message_type)
        if dataclasses.is_dataclass(source_type):
            names = {f.name for f in dataclasses.fields(source_type)}
            kinds = tuple((name, kind) for name, kind in kinds if name in names)
        found = _shared[(message_type, source_type)] = (
            tuple(name for name, kind in kinds if kind != _STRUCT_KIND),
            tuple(name for name, kind in kinds if kind == _STRUCT_KIND),
        )
    return found


def message_from(cls: type[M], source: object, /, **fields: Any) -> M:
    """A `cls` message whose fields are `source`'s attributes of the same names, with `fields`
    given explicitly over them. A dataclass source gives its fields, not its properties; None
    leaves a field unset; a repeated field takes any iterable."""
    plain, structs = _shared_fields(cls, type(source))
    values = {name: getattr(source, name, None) for name in plain if name not in fields}
    for name in structs:
        if name not in fields and isinstance(value := getattr(source, name, None), Mapping):
            values[name] = dict_to_struct(dict(value))
    values.update(fields)
    return cls(**values)


def dataclass_from(cls: type[D], message: Message, /, **fields: Any) -> D:
    """A `cls` dataclass whose fields are `message`'s fields of the same names, with `fields`
    given explicitly over them (a dataclass field the message lacks keeps its default)."""
    kinds = dict(_field_kinds(type(message)))
    values: dict[str, object] = {}
    for field in dataclasses.fields(cls):
        name = field.name
        if name in fields or name not in kinds:
            continue
        value = getattr(message, name)
        kind = kinds[name]
        if kind == _STRUCT_KIND:
            value = struct_to_dict(value)
        elif kind == _REPEATED:
            value = list(value)
        elif kind == _MAP:
            value = dict(value)
        values[name] = value
    values.update(fields)
    return cls(**values)

"""The JSON schemas the doors publish and check, read from the proto descriptors and the
`(loom.options.v1.field)` options: a field's, a message's, an op's request and response."""

from __future__ import annotations

import copy
import importlib.resources
import json
from typing import TYPE_CHECKING, Any, TypeAlias

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from loom_api.options.v1 import options_pb2

if TYPE_CHECKING:
    from google._upb import _message as upb

# A message's DESCRIPTOR and its fields, as protobuf's stubs type them: the upb backend's
# classes (what they are at run time) or the pure-Python ones.
MessageDescriptor: TypeAlias = "Descriptor | upb.Descriptor"
FieldDescriptorOf: TypeAlias = "FieldDescriptor | upb.FieldDescriptor"

INT64_TYPES = {
    FieldDescriptor.TYPE_INT64,
    FieldDescriptor.TYPE_UINT64,
    FieldDescriptor.TYPE_SINT64,
    FieldDescriptor.TYPE_FIXED64,
    FieldDescriptor.TYPE_SFIXED64,
}


INT_RANGES = {
    FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SINT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SFIXED32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_FIXED32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SINT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1),
    FieldDescriptor.TYPE_FIXED64: (0, 2**64 - 1),
}
INT_FIELD_TYPES = frozenset(INT_RANGES)
# A required string holds a character that is not whitespace (when no pattern says more).
NOT_BLANK = r"\S"


def field_options(f: FieldDescriptorOf) -> options_pb2.FieldOptions | None:
    opts = f.GetOptions()
    return opts.Extensions[options_pb2.field] if opts.HasExtension(options_pb2.field) else None


# Grammar files read so far: file path -> (the field's schema, the `$defs` it refers to).
_GRAMMARS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}


def grammar_schema(f: FieldDescriptor, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A `grammar` option's JSON Schema file (beside the field's .proto, in its package): the
    field's schema, and the `$defs` its `#/$defs/...` references need at the op schema's root."""
    message = f.containing_type
    assert message is not None, "a grammar option is on a message's field"
    proto_dir = message.file.name.rsplit("/", 1)[0]
    path = f"{proto_dir}/{name}"
    loaded = _GRAMMARS.get(path)
    if loaded is None:
        package = proto_dir.replace("/", ".")
        raw = json.loads(importlib.resources.files(package).joinpath(name).read_text())
        defs = raw.pop("$defs", {})
        loaded = _GRAMMARS[path] = (raw, defs)
    return copy.deepcopy(loaded[0]), loaded[1]


def _grammar_defs(schema: dict[str, Any]) -> dict[str, Any]:
    """Every grammar `$defs` entry a schema refers to (the op schema carries them at its root)."""
    text = json.dumps(schema)
    out: dict[str, Any] = {}
    for _, defs in _GRAMMARS.values():
        if any(f'"#/$defs/{name}"' in text for name in defs):
            out.update(defs)
    return out


def field_schema(f: FieldDescriptor, response: bool = False) -> dict[str, Any]:
    """A field's JSON schema: its type, and the rules its `(loom.options.v1.field)` options state."""
    fo = field_options(f)
    if fo is not None and fo.grammar and not response and not f.is_repeated:
        grammar, _ = grammar_schema(f, fo.grammar)
        base = _scalar_schema(f, response)
        return {**({"type": base["type"]} if "type" in base else {}), **grammar}
    if f.message_type is not None and f.message_type.GetOptions().map_entry:
        # A map field's rules apply to its values.
        value_field = f.message_type.fields_by_name["value"]
        value = _scalar_schema(value_field, response)
        schema_map: dict[str, Any] = {"type": "object", "additionalProperties": value}
        if fo is not None:
            value.update(_item_rules(fo, value_field.type, required=False))
            value.pop("minLength", None)
            if fo.HasField("min_length"):
                schema_map["minProperties"] = fo.min_length  # on a map: its fewest entries
        return schema_map
    item = _scalar_schema(f, response)
    if fo is not None:
        item = {**item, **_item_rules(fo, f.type, required=fo.required and not f.is_repeated)}
        if response and fo.timestamp and not f.is_repeated:
            # An instant not set yet prints as "" (a field without presence is always printed).
            item.pop("format", None)
            item["anyOf"] = [{"format": "date-time"}, {"const": ""}]
    if f.is_repeated:
        schema: dict[str, Any] = {"type": "array", "items": item}
        if fo is not None and fo.HasField("max_items"):
            schema["maxItems"] = fo.max_items
        if fo is not None and fo.required:
            schema["minItems"] = 1
        return schema
    if fo is not None and fo.secret and not response:
        item["writeOnly"] = True
    return item


def _item_rules(fo: options_pb2.FieldOptions, type_: int, required: bool) -> dict[str, Any]:
    rules: dict[str, Any] = {}
    if type_ == FieldDescriptor.TYPE_STRING:
        if fo.enum:
            rules["enum"] = list(fo.enum)
        if fo.HasField("min_length"):
            rules["minLength"] = fo.min_length
        if fo.HasField("max_length"):
            rules["maxLength"] = fo.max_length
        if fo.pattern:
            rules["pattern"] = fo.pattern
        elif required and not fo.enum:
            rules["pattern"] = NOT_BLANK
        if fo.timestamp:
            rules["format"] = "date-time"
    if fo.HasField("minimum"):
        rules["minimum"] = int(fo.minimum) if type_ in INT_RANGES else fo.minimum
    if fo.HasField("maximum"):
        rules["maximum"] = int(fo.maximum) if type_ in INT_RANGES else fo.maximum
    return rules


def _scalar_schema(f: FieldDescriptor, response: bool = False) -> dict[str, Any]:
    t = f.type
    if f.message_type is not None:
        full = f.message_type.full_name
        if full == "google.protobuf.Struct":
            return {"type": "object"}
        if full == "google.protobuf.Value":
            return {}
        if full == "google.protobuf.Timestamp":
            return {"type": "string", "format": "date-time"}
        return message_schema(f.message_type, response)
    if f.enum_type is not None:
        return {"type": "string", "enum": [v.name for v in f.enum_type.values]}
    if t == FieldDescriptor.TYPE_BOOL:
        return {"type": "boolean"}
    if t == FieldDescriptor.TYPE_STRING:
        return {"type": "string"}
    if t == FieldDescriptor.TYPE_BYTES:
        return {"type": "string", "contentEncoding": "base64"}
    if t in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return {"type": "number"}
    lo, hi = INT_RANGES.get(t, (-(2**63), 2**63 - 1))
    return {"type": "integer", "minimum": lo, "maximum": hi}


def message_schema(desc: Descriptor, response: bool = False) -> dict[str, Any]:
    """A message's JSON schema. As a request: its required fields are those marked required.
    As a response: every field without presence is always printed, so it is required."""
    props: dict[str, Any] = {}
    required: list[str] = []
    dependent: dict[str, list[str]] = {}
    groups: dict[str, list[str]] = {}
    exclusive: dict[str, list[str]] = {}
    for f in desc.fields:
        props[f.name] = field_schema(f, response)
        if response:
            if f.is_repeated or not f.has_presence:
                required.append(f.name)
            continue
        fo = field_options(f)
        if fo is None:
            continue
        if fo.required:
            required.append(f.name)
        if fo.requires:
            dependent[f.name] = list(fo.requires)
        if fo.one_required_of:
            groups.setdefault(fo.one_required_of, []).append(f.name)
        if fo.exactly_one_of:
            exclusive.setdefault(fo.exactly_one_of, []).append(f.name)
    schema: dict[str, Any] = {"type": "object", "properties": props, "additionalProperties": False}
    if required:
        schema["required"] = required
    if dependent:
        schema["dependentRequired"] = dependent
    if groups:
        # A boolean without presence names its group only when true: false is proto3's "unset".
        flags = {f.name for f in desc.fields if f.type == FieldDescriptor.TYPE_BOOL and not f.has_presence and not f.is_repeated}
        schema["allOf"] = [
            {
                "anyOf": [
                    {"required": [name], "properties": {name: {"const": True}}} if name in flags else {"required": [name]} for name in names
                ]
            }
            for names in groups.values()
        ]
    if exclusive:
        schema.setdefault("allOf", []).extend({"oneOf": [{"required": [name]} for name in names]} for names in exclusive.values())
    return schema


# The grammar of a namespace name (identity's rule), published on every namespaced op.
NAMESPACE_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,62}$"


def request_schema(desc: Descriptor, org_level: bool) -> dict[str, Any]:
    schema = message_schema(desc)
    defs = _grammar_defs(schema)
    if defs:
        schema["$defs"] = defs
    if not org_level:
        # Every namespaced op takes the namespace as an argument too (else header or token default).
        schema["properties"] = {
            "namespace": {"type": "string", "pattern": NAMESPACE_PATTERN, "description": "Namespace; defaults to the token's."},
            **schema["properties"],
        }
    return schema


def response_schema(desc: Descriptor) -> dict[str, Any]:
    return message_schema(desc, response=True)

"""The op catalog, read from the proto descriptors: the single definition every door uses.

Each RPC's `(loom.options.v1.op)` option names the op and its access rules; the request
message's descriptor gives the JSON schema that REST validates against, MCP lists and the SDK
generator reads.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import loom_api
from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor, MethodDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from jsonschema import Draft202012Validator
from loom_api.options.v1 import options_pb2

from .errors import ValidationFailed
from .roles import Role

_WELL_KNOWN_OBJECT = {"google.protobuf.Struct"}
_PARSE_FIELD = re.compile(r"Failed to parse (\w+) field")
_INT64_TYPES = {
    FieldDescriptor.TYPE_INT64,
    FieldDescriptor.TYPE_UINT64,
    FieldDescriptor.TYPE_SINT64,
    FieldDescriptor.TYPE_FIXED64,
    FieldDescriptor.TYPE_SFIXED64,
}


@dataclass(frozen=True, slots=True)
class OpSpec:
    """One op: its name, where it is served, and its access rules."""

    name: str
    plane: str
    service: str
    method: str
    request_cls: type[Message]
    response_cls: type[Message]
    min_role: Role
    rate_class: str
    write_shaped: bool
    toolsets: tuple[str, ...]
    experimental: bool
    unlisted: bool
    summary: str
    org_level: bool
    input_schema: dict[str, Any] = field(hash=False, compare=False)

    @property
    def grpc_path(self) -> str:
        return f"/{self.service}/{self.method}"

    @property
    def group(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def leaf(self) -> str:
        return self.name.split(".", 1)[1]

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "plane": self.plane,
            "summary": self.summary,
            "min_role": self.min_role.label,
            "rate_class": self.rate_class,
            "write_shaped": self.write_shaped,
            "toolsets": list(self.toolsets),
            "experimental": self.experimental,
            "unlisted": self.unlisted,
            "grpc": self.grpc_path,
            "input_schema": self.input_schema,
        }


class Catalog:
    """Every op Loom serves, by name and by gRPC path."""

    def __init__(self, ops: list[OpSpec]):
        self.ops: dict[str, OpSpec] = {op.name: op for op in sorted(ops, key=lambda o: o.name)}
        self.by_path: dict[str, OpSpec] = {op.grpc_path: op for op in ops}
        self._validators = {op.name: Draft202012Validator(op.input_schema) for op in ops}

    def get(self, name: str) -> OpSpec | None:
        return self.ops.get(name)

    def for_plane(self, plane: str) -> list[OpSpec]:
        return [op for op in self.ops.values() if op.plane == plane]

    def planes(self) -> list[str]:
        return sorted({op.plane for op in self.ops.values()})

    def listed(self, toolset: str | None) -> list[OpSpec]:
        """Ops a listing shows: unlisted never; a toolset filters by membership; the default
        (all) listing leaves experimental ops out, which stay callable by name."""
        return [
            op for op in self.ops.values() if not op.unlisted and (toolset in op.toolsets if toolset is not None else not op.experimental)
        ]

    def parse_request(self, op: OpSpec, args: dict[str, Any]) -> Message:
        """JSON arguments -> request message, or 422 naming the first bad field."""
        errors = sorted(self._validators[op.name].iter_errors(args), key=lambda e: list(e.absolute_path))
        if errors:
            err = errors[0]
            path = ".".join(str(p) for p in err.absolute_path)
            if err.validator == "additionalProperties":
                extra = sorted(set(err.instance) - set(err.schema.get("properties", {})))
                field_name = ".".join(filter(None, [path, extra[0] if extra else ""]))
                raise ValidationFailed(f"unknown field {field_name!r}", {"field": field_name, "reason": "unknown field"})
            if err.validator == "required":
                missing = [m for m in err.validator_value if m not in err.instance]
                field_name = ".".join(filter(None, [path, missing[0] if missing else ""]))
                raise ValidationFailed(f"{field_name}: required", {"field": field_name, "reason": "required"})
            field_name = path or "(body)"
            raise ValidationFailed(f"{field_name}: {err.message}", {"field": field_name, "reason": err.message})
        msg = op.request_cls()
        try:
            json_format.ParseDict(args, msg)
        except json_format.ParseError as exc:
            # What the schema cannot say (an integer past its 32/64-bit range): name the field
            # protobuf names, in Loom's words rather than the library's.
            text = str(exc)
            found = _PARSE_FIELD.match(text)
            field_name = found.group(1) if found else "(body)"
            reason = "out of range" if "out of range" in text else "invalid value"
            raise ValidationFailed(f"{field_name}: {reason}", {"field": field_name, "reason": reason}) from exc
        return msg


def message_to_json(msg: Message) -> dict[str, Any]:
    """A message as the JSON the spec shows: field names as declared, 64-bit ints as numbers."""
    out = json_format.MessageToDict(msg, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)
    _ints_back(msg.DESCRIPTOR, out)
    return out


def _ints_back(desc: Descriptor, data: dict[str, Any]) -> None:
    for f in desc.fields:
        if f.name not in data:
            continue
        value = data[f.name]
        if f.type in _INT64_TYPES:
            data[f.name] = [int(v) for v in value] if isinstance(value, list) else int(value)
        elif f.message_type is not None and f.message_type.full_name not in _WELL_KNOWN_OBJECT:
            if f.message_type.GetOptions().map_entry:
                continue
            items = value if isinstance(value, list) else [value]
            for item in items:
                if isinstance(item, dict):
                    _ints_back(f.message_type, item)


def field_schema(f: FieldDescriptor) -> dict[str, Any]:
    if f.message_type is not None and f.message_type.GetOptions().map_entry:
        value_field = f.message_type.fields_by_name["value"]
        return {"type": "object", "additionalProperties": _scalar_schema(value_field)}
    item = _scalar_schema(f)
    if f.is_repeated:
        return {"type": "array", "items": item}
    return item


def _scalar_schema(f: FieldDescriptor) -> dict[str, Any]:
    t = f.type
    if t == FieldDescriptor.TYPE_MESSAGE:
        full = f.message_type.full_name
        if full == "google.protobuf.Struct":
            return {"type": "object"}
        if full == "google.protobuf.Value":
            return {}
        if full == "google.protobuf.Timestamp":
            return {"type": "string", "format": "date-time"}
        return message_schema(f.message_type)
    if t == FieldDescriptor.TYPE_ENUM:
        return {"type": "string", "enum": [v.name for v in f.enum_type.values]}
    if t == FieldDescriptor.TYPE_BOOL:
        return {"type": "boolean"}
    if t == FieldDescriptor.TYPE_STRING:
        return {"type": "string"}
    if t == FieldDescriptor.TYPE_BYTES:
        return {"type": "string", "contentEncoding": "base64"}
    if t in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return {"type": "number"}
    return {"type": "integer"}


def message_schema(desc: Descriptor) -> dict[str, Any]:
    props: dict[str, Any] = {}
    for f in desc.fields:
        schema = field_schema(f)
        comment = f.GetOptions()
        if comment.HasExtension(options_pb2.field) and comment.Extensions[options_pb2.field].secret:
            schema = {**schema, "writeOnly": True}
        props[f.name] = schema
    return {"type": "object", "properties": props, "additionalProperties": False}


def request_schema(desc: Descriptor, org_level: bool) -> dict[str, Any]:
    schema = message_schema(desc)
    if not org_level:
        # Every namespaced op takes the namespace as an argument too (else header or token default).
        schema["properties"] = {
            "namespace": {"type": "string", "description": "Namespace; defaults to the token's."},
            **schema["properties"],
        }
    return schema


def _op_from_method(method: MethodDescriptor, plane: str) -> OpSpec | None:
    opts = method.GetOptions()
    if not opts.HasExtension(options_pb2.op):
        return None
    o = opts.Extensions[options_pb2.op]
    request_cls = GetMessageClass(method.input_type)
    return OpSpec(
        name=o.name,
        plane=plane,
        service=method.containing_service.full_name,
        method=method.name,
        request_cls=request_cls,
        response_cls=GetMessageClass(method.output_type),
        min_role=Role.from_proto(o.min_role),
        rate_class=o.rate_class or "read",
        write_shaped=o.write_shaped,
        toolsets=tuple(o.toolsets),
        experimental=o.experimental,
        unlisted=o.unlisted,
        summary=o.summary,
        org_level=o.org_level,
        input_schema=request_schema(method.input_type, o.org_level),
    )


def _import_all_api_modules() -> list[Any]:
    mods = []
    for info in pkgutil.walk_packages(loom_api.__path__, "loom_api."):
        if info.name.endswith("_pb2"):
            mods.append(importlib.import_module(info.name))
    return mods


@lru_cache(maxsize=1)
def load_catalog() -> Catalog:
    ops: list[OpSpec] = []
    for mod in _import_all_api_modules():
        for service in mod.DESCRIPTOR.services_by_name.values():
            # loom.<plane>.v1 -> plane
            plane = service.full_name.split(".")[1]
            for method in service.methods:
                op = _op_from_method(method, plane)
                if op is not None:
                    ops.append(op)
    return Catalog(ops)

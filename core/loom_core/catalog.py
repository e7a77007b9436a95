"""The op catalog, read from the proto descriptors: the single definition every door uses.

Each RPC's `(loom.options.v1.op)` option names the op and its access rules; the request
message's descriptor gives the JSON schema that REST validates against, MCP lists and the SDK
generator reads.
"""

from __future__ import annotations

import base64
import copy
import importlib
import importlib.resources
import json
import keyword
import math
import pkgutil
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import Any

import jsonschema_rs
import loom_api
from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor, MethodDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from jsonschema import Draft202012Validator, FormatChecker
from loom_api.options.v1 import options_pb2

from .errors import BadRequest, ErrorCode, ValidationFailed
from .json_limits import QUOTE_CHARS, check_value, clip, non_finite
from .roles import Role

_WELL_KNOWN_OBJECT = {"google.protobuf.Struct"}

# The formats the published schemas name, checked as the planes parse them.
FORMATS = FormatChecker(formats=())


@FORMATS.checks("date-time", raises=ValueError)
def _is_date_time(value: object) -> bool:
    """RFC 3339 with a date, a time and an offset, as the planes parse it (datetime.fromisoformat)."""
    if not isinstance(value, str):
        return True
    if "T" not in value:
        return False
    parsed = datetime.fromisoformat(value)
    return parsed.tzinfo is not None


def _date_time_ok(value: str) -> bool:
    try:
        return _is_date_time(value)
    except ValueError:
        return False


# Python's `\S` is "not str.isspace()" (U+001C..U+001F and U+0085 included); Rust's regex has
# its own whitespace set. The compiled validator's copy of a schema names Python's set, so it
# is never looser than `re` (tests/core/test_fast_validation.py checks every pattern).
_PY_SPACE = "".join(f"\\u{c:04x}" for c in range(0x10000) if chr(c).isspace())
_RUST_PATTERNS = {r"\S": f"[^{_PY_SPACE}]"}


def _fast_schema(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: (_RUST_PATTERNS.get(v, v) if k == "pattern" and isinstance(v, str) else _fast_schema(v)) for k, v in schema.items()}
    if isinstance(schema, list):
        return [_fast_schema(v) for v in schema]
    return schema


def _fast_validator(schema: dict[str, Any]) -> Any:
    """The op's input schema compiled (jsonschema-rs): decides valid or not in a fraction of
    `jsonschema`'s time (~0.1 ms against ~5 ms for a batch of 100). Only "valid" is taken from
    it; anything else goes to `jsonschema`, which names the refusal. None: it cannot compile
    the schema (that op is checked by `jsonschema` alone)."""
    try:
        return jsonschema_rs.validator_for(_fast_schema(schema), formats={"date-time": _date_time_ok}, validate_formats=True)
    except Exception:  # noqa: BLE001 - a schema it cannot take is checked the slow way
        return None


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
    # The MCP tool's name, when the spec names one (else loom_<group>_<op>, the door's rule).
    tool_name: str
    input_schema: dict[str, Any] = field(hash=False, compare=False)
    output_schema: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

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
            "output_schema": self.output_schema,
        }


class Catalog:
    """Every op Loom serves, by name and by gRPC path."""

    def __init__(self, ops: list[OpSpec]):
        self.ops: dict[str, OpSpec] = {op.name: op for op in sorted(ops, key=lambda o: o.name)}
        self.by_path: dict[str, OpSpec] = {op.grpc_path: op for op in ops}
        self._validators = {op.name: Draft202012Validator(op.input_schema, format_checker=FORMATS) for op in ops}
        self._fast = {op.name: _fast_validator(op.input_schema) for op in ops}
        # Ops whose schema takes `{}` (no required argument): a call without arguments skips
        # the validator (its ~25 µs are a fifth of a whole embedded request).
        self._empty_ok = {op.name for op in ops if self._validators[op.name].is_valid({})}

    def get(self, name: str) -> OpSpec | None:
        return self.ops.get(name)

    def for_plane(self, plane: str) -> list[OpSpec]:
        return [op for op in self.ops.values() if op.plane == plane]

    def planes(self) -> list[str]:
        return sorted({op.plane for op in self.ops.values()})

    def toolsets(self) -> list[str]:
        """Every toolset an op names; `all` always among them."""
        return sorted({"all", *(t for op in self.ops.values() for t in op.toolsets)})

    def check_toolset(self, toolset: str | None) -> None:
        """An unknown toolset is the caller's 400, naming the known ones."""
        if toolset is not None and toolset not in self.toolsets():
            known = self.toolsets()
            raise BadRequest(
                ErrorCode.UNKNOWN_TOOLSET,
                f"unknown toolset {toolset!r}; known: {', '.join(known)}",
                {"toolset": toolset, "known": known},
            )

    def listed(self, toolset: str | None) -> list[OpSpec]:
        """Ops a listing shows: unlisted never; a toolset filters by membership; the default
        listing, `all` (None means it too), is every op but the experimental ones, which stay
        callable by name."""
        if toolset is None or toolset == "all":
            return [op for op in self.ops.values() if not op.unlisted and not op.experimental]
        return [op for op in self.ops.values() if not op.unlisted and toolset in op.toolsets]

    def parse_request(self, op: OpSpec, args: dict[str, Any]) -> Message:
        """JSON arguments -> request message, or 422 naming the first bad field."""
        if not args and op.name in self._empty_ok:
            return op.request_cls()
        self._check(op, args)
        if not op.org_level and "namespace" in args and "namespace" not in op.request_cls.DESCRIPTOR.fields_by_name:
            # Checked with the rest, carried as metadata (Relay.metadata), not a message field.
            args = {k: v for k, v in args.items() if k != "namespace"}
        msg = op.request_cls()
        try:
            try:
                _parse_into(args, msg)
            except (_Slow, TypeError, ValueError, OverflowError):
                msg = op.request_cls()
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
            raise ValidationFailed(f"{field_name}: {reason}", {"field": field_name, "reason": reason}) from exc
        return msg

    def check_message(self, op: OpSpec, msg: Message) -> None:
        """A request that arrived as a message (a direct gRPC caller): the same generated checks
        REST runs on its JSON, on the fields the message sets, with the same refusal (422
        INVALID_ARGUMENT naming the first bad field). A field without presence left at its default
        is absent, as protobuf's JSON prints it: a required one is refused as required."""
        if op.name in self._empty_ok and not msg.ListFields():
            return
        try:
            args = message_to_sparse_json(msg)
        except ValueError:  # protobuf's JSON printer refuses a non-finite number in a Struct
            raise non_finite("(body)", "NaN or Infinity") from None
        check_value(args)  # what REST's JSON parser refuses (json_limits), refused here too
        self._check(op, args)

    def _check(self, op: OpSpec, args: dict[str, Any]) -> None:
        """The op's input schema over JSON arguments; the first error as a 422 naming its field.
        The compiled validator passes what is valid; only what it refuses (or cannot read) is
        checked again by `jsonschema`, whose verdict and first error stand."""
        fast = self._fast.get(op.name)
        if fast is not None:
            try:
                if fast.is_valid(args):
                    return
            except Exception:  # noqa: BLE001 - a value it cannot convert (a huge int, deep nesting): the slow path judges
                pass
        try:
            errors = sorted(self._validators[op.name].iter_errors(args), key=lambda e: list(e.absolute_path))
        except RecursionError:
            raise ValidationFailed("the body nests too deeply", {"field": "(body)", "reason": "too deep"}) from None
        if errors:
            err = _chosen_branch(errors[0])
            path = _field_path(err.absolute_path)
            found = [e for e in err.context or () if e.validator in ("const", "enum") and len(e.relative_path) == 1]
            if err.validator in ("anyOf", "oneOf") and found:
                # No kind takes the discriminator (a condition's unknown `op`): name it and the kinds.
                kinds = list(dict.fromkeys(v for e in found for v in (e.validator_value if e.validator == "enum" else [e.validator_value])))
                field_name = _field_path(found[0].absolute_path)
                raise ValidationFailed(
                    f"{field_name}: one of {', '.join(map(str, kinds))}", {"field": field_name, "reason": "unknown kind", "accepted": kinds}
                )
            if err.validator == "additionalProperties":
                extra = sorted(set(err.instance) - set(err.schema.get("properties", {})))
                field_name = ".".join(filter(None, [path, extra[0] if extra else ""]))
                field_name = clip(field_name)
                raise ValidationFailed(f"unknown field {field_name!r}", {"field": field_name, "reason": "unknown field"})
            if err.validator == "required":
                missing = [m for m in err.validator_value if m not in err.instance]
                field_name = ".".join(filter(None, [path, missing[0] if missing else ""]))
                raise ValidationFailed(f"{field_name}: required", {"field": field_name, "reason": "required"})
            field_name = path or "(body)"
            if err.validator == "anyOf" and all("required" in sub for sub in err.validator_value):
                names = [sub["required"][0] for sub in err.validator_value]
                field_name = ".".join(filter(None, [path, names[0]]))
                raise ValidationFailed(
                    f"{field_name}: required (name at least one of {', '.join(names)})",
                    {"field": field_name, "reason": "required", "one_of": names},
                )
            if err.validator == "pattern":
                reason = "blank" if err.validator_value == NOT_BLANK else "malformed"
                what = "must not be blank" if reason == "blank" else f"malformed (must match {err.validator_value})"
                raise ValidationFailed(f"{field_name}: {what}", {"field": field_name, "reason": reason, "pattern": err.validator_value})
            if err.validator == "format":
                raise ValidationFailed(
                    f"{field_name}: malformed (an RFC 3339 time, e.g. 2026-01-02T03:04:05Z)",
                    {"field": field_name, "reason": "malformed", "format": err.validator_value},
                )
            if err.validator == "enum":
                raise ValidationFailed(
                    f"{field_name}: one of {', '.join(map(str, err.validator_value))}",
                    {"field": field_name, "reason": "not one of the accepted values", "accepted": list(err.validator_value)},
                )
            # jsonschema quotes the refused value whole: quote at most QUOTE_CHARS of it.
            quoted = repr(err.instance)
            message = err.message.replace(quoted, clip(quoted)) if len(quoted) > QUOTE_CHARS else err.message
            raise ValidationFailed(f"{field_name}: {message}", {"field": field_name, "reason": message})


def _chosen_branch(err: Any) -> Any:
    """An anyOf / oneOf over kinds discriminated by a `const` key (the rule language's nodes): the
    error of the branch whose kind and type match (the fewest errors among them), so the refusal
    names the bad node, not the union. Stops at a union no branch of which matches."""
    while err.validator in ("anyOf", "oneOf") and err.context:
        branches: dict[Any, list[Any]] = {}
        for e in err.context:
            branches.setdefault(e.relative_schema_path[0], []).append(e)
        matching = [errs for errs in branches.values() if not any(_wrong_kind(e) for e in errs)]
        if not matching or len(matching) == len(branches):
            break  # no kind matches, or the union is not over kinds (one_required_of, an instant's forms)
        errs = min(matching, key=len)
        err = sorted(errs, key=lambda e: (list(e.absolute_path), e.validator != "required"))[0]
    return err


def _wrong_kind(e: Any) -> bool:
    """A branch error saying the instance is another kind: its type, or its discriminator's value."""
    return (e.validator == "type" and len(e.relative_path) == 0) or (e.validator in ("const", "enum") and len(e.relative_path) == 1)


def _field_path(parts: Any) -> str:
    """A JSON path as the planes name fields: `posters[0]`, `brief.inputs`."""
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def struct_to_dict(msg: Any) -> dict[str, Any]:
    """A google.protobuf.Struct as protobuf's JSON printer gives it (numbers as floats), without
    the printer's per-value dispatch; anything it would refuse (a non-finite number, a Value
    with no kind) goes through the printer itself."""
    fields = msg.fields
    if not fields:
        return {}
    try:
        return {k: _value_to_py(v, 0) for k, v in fields.items()}
    except _Slow:
        return json_format.MessageToDict(msg)


# Deeper values than this go through protobuf's own code, which refuses them as it always did.
_FAST_DEPTH = 64


def _value_to_py(v: Any, depth: int) -> Any:
    if depth > _FAST_DEPTH:
        raise _Slow
    kind = v.WhichOneof("kind")
    if kind == "string_value":
        return v.string_value
    if kind == "number_value":
        n = v.number_value
        if not math.isfinite(n):
            raise _Slow
        return n
    if kind == "bool_value":
        return v.bool_value
    if kind == "struct_value":
        return {k: _value_to_py(x, depth + 1) for k, x in v.struct_value.fields.items()}
    if kind == "list_value":
        return [_value_to_py(x, depth + 1) for x in v.list_value.values]
    if kind == "null_value":
        return None
    raise _Slow


class _Slow(Exception):
    """The fast converter met something only protobuf's json_format handles exactly."""


_SPARSE: dict[str, Callable[[Message], dict[str, Any]]] = {}


def message_to_sparse_json(msg: Message) -> dict[str, Any]:
    """A message as MessageToDict(preserving_proto_field_name=True) prints it (fields at their
    default left out, 64-bit ints as numbers): the JSON a direct gRPC call is checked as.
    Built once per message type from its descriptor."""
    return _sparse(msg.DESCRIPTOR)(msg)


def _sparse(desc: Descriptor) -> Callable[[Message], dict[str, Any]]:
    if desc.full_name.startswith("google.protobuf.") and desc.full_name not in _SPARSE:

        def printer(msg: Message) -> dict[str, Any]:
            return json_format.MessageToDict(msg, preserving_proto_field_name=True)

        _SPARSE[desc.full_name] = printer
    # MessageToDict prints a map's 64-bit values as strings (and the checks took them so).
    return _built(desc, _SPARSE, _sparse_value, lambda f: str if f.type in _INT64_TYPES else _sparse_value(f), sparse=True)


def _sparse_value(f: FieldDescriptor) -> _Convert | None:
    if f.type == FieldDescriptor.TYPE_MESSAGE:
        if f.message_type.full_name == "google.protobuf.Struct":
            return struct_to_dict
        return _sparse(f.message_type)
    if f.type == FieldDescriptor.TYPE_STRING:
        return None  # as stored (MessageToDict does not reformat instants)
    return _value_converter(f)


def _parse_into(args: Any, msg: Any, depth: int = 0) -> None:
    """JSON arguments (already checked against the op's schema) into a message, the common
    shapes only: strings, booleans, integers, doubles, enum names, nested and repeated messages,
    Struct. Anything else raises _Slow and the caller parses with json_format.ParseDict, whose
    result and refusals this must equal (tests/core/test_fast_validation.py)."""
    if not isinstance(args, dict) or depth > _FAST_DEPTH:
        raise _Slow
    desc = msg.DESCRIPTOR
    fields = desc.fields_by_name
    oneofs: set[str] | None = None
    for key, value in args.items():
        f = fields.get(key)
        if f is None or value is None:
            raise _Slow
        if f.containing_oneof is not None:
            oneofs = oneofs or set()
            if f.containing_oneof.name in oneofs:
                raise _Slow
            oneofs.add(f.containing_oneof.name)
        t = f.type
        if t == FieldDescriptor.TYPE_MESSAGE:
            mt = f.message_type
            if mt.GetOptions().map_entry:
                raise _Slow
            full = mt.full_name
            if f.is_repeated:
                if not isinstance(value, list) or full.startswith("google.protobuf."):
                    raise _Slow
                container = getattr(msg, key)
                for item in value:
                    _parse_into(item, container.add(), depth + 1)
            elif full == "google.protobuf.Struct":
                if not isinstance(value, dict):
                    raise _Slow
                target = getattr(msg, key)
                target.SetInParent()
                _struct_into(value, target, depth + 1)
            elif full.startswith("google.protobuf."):
                raise _Slow
            else:
                target = getattr(msg, key)
                target.SetInParent()
                _parse_into(value, target, depth + 1)
        elif f.is_repeated:
            if not isinstance(value, list):
                raise _Slow
            getattr(msg, key).extend([_scalar(f, t, v) for v in value])
        else:
            setattr(msg, key, _scalar(f, t, value))


def _scalar(f: FieldDescriptor, t: int, value: Any) -> Any:
    if t == FieldDescriptor.TYPE_STRING:
        if isinstance(value, str):
            return value
    elif t == FieldDescriptor.TYPE_BOOL:
        if isinstance(value, bool):
            return value
    elif t in _INT_FIELD_TYPES:
        if isinstance(value, int) and not isinstance(value, bool):
            low, high = _INT_RANGES[t]
            if low <= value <= high:
                return value
    elif t == FieldDescriptor.TYPE_DOUBLE:
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            return float(value)
    elif t == FieldDescriptor.TYPE_ENUM and isinstance(value, str):
        found = f.enum_type.values_by_name.get(value)
        if found is not None:
            return found.number
    raise _Slow


def _struct_into(value: dict[str, Any], target: Any, depth: int) -> None:
    """ParseDict's Struct: every number a double; a non-finite one or a non-string key is its call."""
    for k, v in value.items():
        if not isinstance(k, str):
            raise _Slow
        _value_into(v, target.fields[k], depth + 1)


def _value_into(v: Any, target: Any, depth: int) -> None:
    if depth > _FAST_DEPTH:
        raise _Slow
    if isinstance(v, str):
        target.string_value = v
    elif isinstance(v, bool):
        target.bool_value = v
    elif isinstance(v, (int, float)):
        if not math.isfinite(v):
            raise _Slow
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
        target.null_value = 0
    else:
        raise _Slow


def message_to_json(msg: Message) -> dict[str, Any]:
    """A message as the JSON the spec shows: field names as declared, 64-bit ints as numbers,
    every field without presence printed. Through a converter built once per message type from
    its descriptor (protobuf's MessageToDict re-reads the descriptor on every call)."""
    return _converter(msg.DESCRIPTOR)(msg)


def message_to_json_reference(msg: Message) -> dict[str, Any]:
    """The same JSON through protobuf's own printer: what the compiled converter must match."""
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


_Convert = Callable[[Any], Any]
_CONVERTERS: dict[str, Callable[[Message], dict[str, Any]]] = {}


def _converter(desc: Descriptor) -> Callable[[Message], dict[str, Any]]:
    return _built(desc, _CONVERTERS, _value_converter, _value_converter, sparse=False)


def _built(
    desc: Descriptor,
    cache: dict[str, Callable[[Message], dict[str, Any]]],
    value_of: Callable[[FieldDescriptor], _Convert | None],
    map_value_of: Callable[[FieldDescriptor], _Convert | None],
    *,
    sparse: bool,
) -> Callable[[Message], dict[str, Any]]:
    """`desc`'s converter from `cache`, compiled on first use (`_compile_plan`), each field's
    value converted by `value_of` (a map's values by `map_value_of`)."""
    conv = cache.get(desc.full_name)
    if conv is not None:
        return conv
    # Registered before its fields are compiled, so a recursive message finds itself.
    compiled: list[Callable[[Message], dict[str, Any]]] = []

    def recursive(msg: Message) -> dict[str, Any]:
        return compiled[0](msg)

    cache[desc.full_name] = recursive
    plan: list[tuple[str, bool, _Convert | None, bool]] = []
    for f in desc.fields:
        if f.message_type is not None and f.message_type.GetOptions().map_entry:
            key_f, val_f = f.message_type.fields_by_name["key"], f.message_type.fields_by_name["value"]
            plan.append((f.name, False, _map_converter(map_value_of(val_f), key_f.type != FieldDescriptor.TYPE_STRING), False))
        else:
            plan.append((f.name, (not f.is_repeated) and f.has_presence, value_of(f), f.is_repeated))
    conv = _compile_plan(desc.full_name, plan, sparse=sparse)
    compiled.append(conv)
    cache[desc.full_name] = conv
    return conv


def _compile_plan(name: str, plan: list[tuple[str, bool, _Convert | None, bool]], *, sparse: bool) -> Callable[[Message], dict[str, Any]]:
    """One message type's converter as straight-line Python (no per-field loop or branch on the
    field's kind): each field read once, converted, stored. `sparse`: a field without presence
    at its default (falsy) is left out, as protobuf's MessageToDict does."""
    env: dict[str, Any] = {}
    lines = ["def convert(msg):", "    out = {}"]
    for i, (field_name, presence, value_conv, repeated) in enumerate(plan):
        key = repr(field_name)
        read = f"msg.{field_name}" if field_name.isidentifier() and not keyword.iskeyword(field_name) else f"getattr(msg, {key})"
        if value_conv is None:
            expr = "list(v)" if repeated else "v"
        else:
            env[f"c{i}"] = value_conv
            expr = f"[c{i}(x) for x in v]" if repeated else f"c{i}(v)"
        if presence:
            lines += [f"    if msg.HasField({key}):", f"        v = {read}", f"        out[{key}] = {expr}"]
        elif sparse:
            lines += [f"    v = {read}", "    if v:", f"        out[{key}] = {expr}"]
        else:
            lines += [f"    v = {read}", f"    out[{key}] = {expr}"]
    lines.append("    return out")
    exec(compile("\n".join(lines), f"<json converter {name}>", "exec"), env)
    return env["convert"]


def _map_converter(vconv: _Convert | None, key_to_str: bool) -> _Convert:
    def convert(value: Any) -> dict[str, Any]:
        return {(str(k) if key_to_str else k): (vconv(v) if vconv is not None else v) for k, v in value.items()}

    return convert


def _value_converter(f: FieldDescriptor) -> _Convert | None:
    """How one value of the field becomes JSON; None: the Python value already is its JSON."""
    t = f.type
    if t == FieldDescriptor.TYPE_MESSAGE:
        if f.message_type.full_name == "google.protobuf.Struct":
            return struct_to_dict
        if f.message_type.full_name.startswith("google.protobuf."):
            return lambda m: json_format.MessageToDict(m, preserving_proto_field_name=True)
        return _converter(f.message_type)
    if t == FieldDescriptor.TYPE_ENUM:
        names = {v.number: v.name for v in f.enum_type.values}
        return lambda n: names.get(n, n)
    if t == FieldDescriptor.TYPE_BYTES:
        return lambda b: base64.b64encode(b).decode()
    if t == FieldDescriptor.TYPE_FLOAT:
        return lambda v: json_format._Printer()._FieldToJsonObject(f, v)  # float32: protobuf prints its shortest form
    if t == FieldDescriptor.TYPE_DOUBLE:
        return _double
    fo = field_options(f)
    if t == FieldDescriptor.TYPE_STRING and fo is not None and fo.timestamp:
        return rfc3339
    return None


# Per message type: its timestamp fields and the message fields that (transitively) hold some.
_TS_PLANS: dict[str, tuple[tuple[str, int], ...]] = {}
_TS, _TS_LIST, _NESTED, _NESTED_LIST, _NESTED_MAP = range(5)


def _ts_plan(desc: Descriptor, seen: frozenset[str] = frozenset()) -> tuple[tuple[str, int], ...]:
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


_TS_BY_DESC: dict[Any, tuple[tuple[str, int], ...]] = {}


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


def _double(v: float) -> Any:
    if math.isfinite(v):
        return v
    return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")


_INT_RANGES = {
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
_INT_FIELD_TYPES = frozenset(_INT_RANGES)
# A required string holds a character that is not whitespace (when no pattern says more).
NOT_BLANK = r"\S"


def field_options(f: FieldDescriptor) -> options_pb2.FieldOptions | None:
    opts = f.GetOptions()
    return opts.Extensions[options_pb2.field] if opts.HasExtension(options_pb2.field) else None


# Grammar files read so far: file path -> (the field's schema, the `$defs` it refers to).
_GRAMMARS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}


def grammar_schema(f: FieldDescriptor, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A `grammar` option's JSON Schema file (beside the field's .proto, in its package): the
    field's schema, and the `$defs` its `#/$defs/...` references need at the op schema's root."""
    path = f"{f.file.name.rsplit('/', 1)[0]}/{name}"
    loaded = _GRAMMARS.get(path)
    if loaded is None:
        package = f.file.name.rsplit("/", 1)[0].replace("/", ".")
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
        rules["minimum"] = int(fo.minimum) if type_ in _INT_RANGES else fo.minimum
    if fo.HasField("maximum"):
        rules["maximum"] = int(fo.maximum) if type_ in _INT_RANGES else fo.maximum
    return rules


def _scalar_schema(f: FieldDescriptor, response: bool = False) -> dict[str, Any]:
    t = f.type
    if t == FieldDescriptor.TYPE_MESSAGE:
        full = f.message_type.full_name
        if full == "google.protobuf.Struct":
            return {"type": "object"}
        if full == "google.protobuf.Value":
            return {}
        if full == "google.protobuf.Timestamp":
            return {"type": "string", "format": "date-time"}
        return message_schema(f.message_type, response)
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
    lo, hi = _INT_RANGES.get(t, (-(2**63), 2**63 - 1))
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
        tool_name=o.tool_name,
        input_schema=request_schema(method.input_type, o.org_level),
        output_schema=response_schema(method.output_type),
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

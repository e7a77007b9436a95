"""The op catalog, read from the proto descriptors: the single definition every door uses.

Each RPC's `(loom.options.v1.op)` option names the op and its access rules; the request
message's descriptor gives the JSON schema that REST validates against, MCP lists and the SDK
generator reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from google.protobuf.descriptor import MethodDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from loom_api.options.v1 import options_pb2

from ..api_modules import api_modules
from ..errors import BadRequest, ErrorCode, ValidationFailed
from ..json_limits import check_value, non_finite
from ..roles import Role
from .parse import parse_args
from .schema import request_schema, response_schema
from .to_json import message_to_sparse_json
from .validation import fast_validator, raise_refusal, refusal_validator


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
        self._validators = {op.name: refusal_validator(op.input_schema) for op in ops}
        self._fast = {op.name: fast_validator(op.input_schema) for op in ops}
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
        return parse_args(op.request_cls, args)

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
            raise_refusal(errors[0])


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


@lru_cache(maxsize=1)
def load_catalog() -> Catalog:
    ops: list[OpSpec] = []
    for mod in api_modules():
        for service in mod.DESCRIPTOR.services_by_name.values():
            # loom.<plane>.v1 -> plane
            plane = service.full_name.split(".")[1]
            for method in service.methods:
                op = _op_from_method(method, plane)
                if op is not None:
                    ops.append(op)
    return Catalog(ops)

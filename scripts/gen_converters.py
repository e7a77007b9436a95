"""Render core/loom_core/catalog/converters.py: every loom_api message's JSON converters as
plain, typed functions, one per message type and printing mode, from the proto descriptors.

    python scripts/gen_converters.py          write the file
    python scripts/gen_converters.py --check  exit 1 if the committed file differs from a fresh render

Two modes, as loom_core.catalog.to_json names them: `_json` (message_to_json: every field
without presence printed, instants as RFC 3339 UTC) for every message, and `_sparse`
(message_to_sparse_json: a field at its default left out, as protobuf's MessageToDict prints it)
for the messages an op's request holds. Both must equal protobuf's printer
(tests/gateway/test_transports.py); they are generated rather than built at run time so a reader
can step through them and mypy checks them against the generated message stubs.
"""

from __future__ import annotations

import importlib.util
import keyword
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from loom_core.api_modules import api_modules

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "core" / "loom_core" / "catalog" / "converters.py"

HEADER = '''"""Every loom_api message's JSON converters (DO NOT EDIT: rendered from the proto descriptors by
scripts/gen_converters.py; `--check` says when it is stale).

`<message>_json(msg)`: loom_core.catalog.message_to_json's JSON of that message type;
`<message>_sparse(msg)`: message_to_sparse_json's. JSON and SPARSE map each message class to
its converter.
"""

from __future__ import annotations
'''


def _schema_module() -> ModuleType:
    """loom_core/catalog/schema.py by its path: importing it through its package would import
    the converters this renders (which may be stale or absent)."""
    path = ROOT / "core" / "loom_core" / "catalog" / "schema.py"
    spec = importlib.util.spec_from_file_location("_loom_catalog_schema", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def render() -> str:
    from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor

    schema = _schema_module()
    INT64_TYPES, field_options = schema.INT64_TYPES, schema.field_options

    modules = api_modules()
    messages: dict[str, Descriptor] = {}
    module_of: dict[str, tuple[str, str]] = {}  # a .proto file -> its module's (package, name)
    requests: list[Descriptor] = []

    def collect(desc: Descriptor) -> None:
        if desc.GetOptions().map_entry:
            return
        messages[desc.full_name] = desc
        for nested in desc.nested_types:
            collect(nested)

    aliases: set[str] = set()
    for mod in modules:
        fd = mod.DESCRIPTOR
        package, _, alias = mod.__name__.rpartition(".")
        if alias in aliases:
            raise SystemExit(f"two loom_api modules are named {alias}: give the converters' imports aliases")
        aliases.add(alias)
        module_of[fd.name] = (package, alias)
        for desc in fd.message_types_by_name.values():
            collect(desc)
        for service in fd.services_by_name.values():
            requests.extend(method.input_type for method in service.methods)

    def loom(desc: Descriptor) -> bool:
        return not desc.full_name.startswith("google.protobuf.")

    # The messages a request holds, transitively: those get a sparse converter.
    sparse: set[str] = set()
    todo = [d for d in requests if loom(d)]
    while todo:
        desc = todo.pop()
        if desc.full_name in sparse:
            continue
        sparse.add(desc.full_name)
        for f in desc.fields:
            mt = f.message_type
            if mt is not None and mt.GetOptions().map_entry:
                mt = mt.fields_by_name["value"].message_type
            if mt is not None and loom(mt):
                todo.append(mt)

    def name(desc: Descriptor | EnumDescriptor) -> str:
        return desc.full_name.removeprefix("loom.").replace(".", "_")

    def cls(desc: Descriptor) -> str:
        alias = module_of[desc.file.name][1]
        return f"{alias}.{desc.full_name.removeprefix(desc.file.package + '.')}"

    enums: dict[str, EnumDescriptor] = {}
    used: set[str] = set()  # the helpers the converters call

    def call(helper: str, v: str) -> str:
        used.add(helper)
        return f"{helper}({v})"

    def value(f: FieldDescriptor, v: str, mode: str, in_map: bool = False) -> str:
        """The JSON of one value `v` of field `f` (an expression)."""
        t = f.type
        if t == FieldDescriptor.TYPE_MESSAGE:
            mt = f.message_type
            assert mt is not None
            if mt.full_name == "google.protobuf.Struct":
                return call("struct_to_dict", v)
            if not loom(mt):
                return call("well_known_json", v)
            return f"{name(mt)}_{mode}({v})"
        if in_map and mode == "sparse" and t in INT64_TYPES:
            return f"str({v})"  # MessageToDict prints a map's 64-bit values as strings
        if t == FieldDescriptor.TYPE_ENUM:
            et = f.enum_type
            assert et is not None
            enums[et.full_name] = et
            return f"_E_{name(et)}.get({v}, {v})"
        if t == FieldDescriptor.TYPE_BYTES:
            used.add("base64")
            return f"base64.b64encode({v}).decode()"
        if t == FieldDescriptor.TYPE_DOUBLE:
            return call("double_json", v)
        if t == FieldDescriptor.TYPE_FLOAT:
            raise SystemExit(f"{f.full_name}: a float32 field; print it as protobuf does (its shortest form) here first")
        if t == FieldDescriptor.TYPE_STRING and mode == "json":
            fo = field_options(f)
            if fo is not None and fo.timestamp:
                return call("rfc3339", v)
        return v

    def field_json(f: FieldDescriptor, read: str, mode: str) -> str:
        """The JSON of field `f` whose Python value is `read`."""
        mt = f.message_type
        if mt is not None and mt.GetOptions().map_entry:
            key_f, val_f = mt.fields_by_name["key"], mt.fields_by_name["value"]
            k = "str(k)" if key_f.type != FieldDescriptor.TYPE_STRING else "k"
            return f"{{{k}: {value(val_f, 'x', mode, in_map=True)} for k, x in {read}.items()}}"
        if f.is_repeated:
            item = value(f, "x", mode)
            return f"list({read})" if item == "x" else f"[{item} for x in {read}]"
        return value(f, read, mode)

    def function(desc: Descriptor, mode: str) -> list[str]:
        lines = [f"def {name(desc)}_{mode}(msg: {cls(desc)}) -> dict[str, Any]:"]
        literal: list[str] = []  # the leading fields printed always: one dict display
        body: list[str] = []
        for f in desc.fields:
            if not f.name.isidentifier() or keyword.iskeyword(f.name):
                raise SystemExit(f"{f.full_name}: a field name Python cannot read as an attribute")
            key = f'"{f.name}"'
            read = f"msg.{f.name}"
            presence = not f.is_repeated and f.has_presence
            if presence:
                body += [f"    if msg.HasField({key}):", f"        out[{key}] = {field_json(f, read, mode)}"]
            elif mode == "sparse":
                local = f"v_{f.name}"
                body += [f"    if {local} := {read}:", f"        out[{key}] = {field_json(f, local, mode)}"]
            elif body:
                body.append(f"    out[{key}] = {field_json(f, read, mode)}")
            else:
                literal.append(f"{key}: {field_json(f, read, mode)}")
        if body:
            lines.append(f"    out: dict[str, Any] = {{{', '.join(literal)}}}")
            lines += body
            lines.append("    return out")
        else:
            lines.append(f"    return {{{', '.join(literal)}}}")
        return lines

    funcs: list[str] = []
    json_map: list[str] = []
    sparse_map: list[str] = []
    for full in sorted(messages):
        desc = messages[full]
        funcs += ["", "", *function(desc, "json")]
        json_map.append(f"    {cls(desc)}: {name(desc)}_json,")
        if full in sparse:
            funcs += ["", "", *function(desc, "sparse")]
            sparse_map.append(f"    {cls(desc)}: {name(desc)}_sparse,")

    out = [HEADER.rstrip("\n"), ""]
    if "base64" in used:
        out.append("import base64")
    out += ["from collections.abc import Callable", "from typing import Any", "", "from google.protobuf.message import Message"]
    by_package: dict[str, list[str]] = {}
    for package, alias in module_of.values():
        by_package.setdefault(package, []).append(alias)
    out += [f"from {package} import {', '.join(sorted(aliases))}" for package, aliases in sorted(by_package.items())]
    values = sorted(used & {"double_json", "struct_to_dict", "well_known_json"})
    out += [""]
    if values:
        out.append(f"from .json_values import {', '.join(values)}")
    if "rfc3339" in used:
        out.append("from .timestamps import rfc3339")
    out.append("")
    for full in sorted(enums):
        et = enums[full]
        items = ", ".join(f'{v.number}: "{v.name}"' for v in et.values)
        out.append(f"_E_{name(et)} = {{{items}}}")
    out += funcs
    out += [
        "",
        "",
        "# Each message class -> its converter, a function of exactly that class (a map over many",
        "# message types, which one Callable type cannot state key by key: hence Any).",
        "JSON: dict[type[Message], Callable[[Any], dict[str, Any]]] = {",
        *json_map,
        "}",
        "SPARSE: dict[type[Message], Callable[[Any], dict[str, Any]]] = {",
        *sparse_map,
        "}",
    ]
    return _formatted("\n".join(out) + "\n")


def _formatted(text: str) -> str:
    """As `ruff format` leaves it (the committed file passes ./loom lint)."""
    ruff = Path(sys.executable).parent / "ruff"
    done = subprocess.run(
        [str(ruff), "format", "--quiet", "--stdin-filename", str(OUT), "-"],
        input=text,
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return done.stdout


def main(argv: list[str] | None = None) -> int:
    from generated_files import write_or_check

    return write_or_check("render core/loom_core/catalog/converters.py", lambda: {OUT: render()}, argv, "gen_converters.py")


if __name__ == "__main__":
    sys.exit(main())

"""Client-side binding of `{name:Type}` query parameters for the ClickHouse server engine
(`server.py`).

Parameter binding: client-side, in `render_literal`. asynch 0.4 cannot send server-side query
parameters. The native protocol carries `{name:Type}` values in a parameters block that exists
only from protocol revision 54459 (DBMS_MIN_PROTOCOL_VERSION_WITH_PARAMETERS); asynch 0.4
negotiates revision 54453 (`asynch.proto.constants.CLIENT_REVISION`), its `send_query` writes no
such block, and its own `args` path is client-side `%(name)s` pyformat with untyped escaping
(`asynch.proto.utils.escape`). Raising the revision would change the wire format of every data
block (custom serialization comes in at 54454), so it cannot be patched in. So
`bind_params` finds each `{name:Type}` placeholder in the statement (not inside quoted strings,
quoted identifiers or comments) and `render_literal` replaces it with a literal built for the
declared type, the way the server does it for server-side parameters: a `String` becomes a
plain string literal, any other type `_CAST(<literal>, '<Type>')`, and an `Identifier` a
backquoted identifier. A value of the wrong Python type or out of range raises `StoreError`
before anything is sent. Every string (values, and the type text in `_CAST`) is quoted with
`\\` and `'` escaped and control bytes as `\\xHH`, so no value ends a literal early. The
`%` in statements is never touched (asynch only applies pyformat when given args, and it never
is). What this costs: the server sees the values in the query text, so they reach
`system.query_log` and the server's own logs as literals, and a statement with very large
parameters counts against `max_query_size` (256 KiB by default; insert rows do not).
"""

from __future__ import annotations

import datetime as dt
import decimal
import ipaddress
import math
import re
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

_PARAM_NAME = re.compile(r"\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*:")
# Where a scan of SQL text stops: a quote or comment start (passed over whole), or a character
# that binding, placeholders or type arguments act on.
_SCAN_STOP = re.compile(r"""['"`/#{}()\[\],;-]""")
_SIMPLE_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$")
_INT_BITS = {f"{p}Int{b}": (p == "", b) for p in ("", "U") for b in (8, 16, 32, 64, 128, 256)}
_FLOATS = {"Float32", "Float64", "BFloat16"}
_DECIMALS = {"Decimal", "Decimal32", "Decimal64", "Decimal128", "Decimal256"}
_TEXT_TYPES = {"UUID", "IPv4", "IPv6", "Enum8", "Enum16", "Enum"}


class _BindError(Exception):
    """A parameter that cannot be bound; reported as a StoreError without the value."""


# --------------------------------------------------------------------------- types


@dataclass(frozen=True, slots=True)
class _Type:
    name: str
    args: tuple[str, ...]  # top-level argument texts, stripped
    text: str  # the whole type as written


def _split_top(text: str) -> list[str]:
    """Split at top-level commas, respecting parentheses and quoted strings."""
    parts: list[str] = []
    depth = start = 0
    for i in _unquoted(text):
        c = text[i]
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return parts


@lru_cache(maxsize=1024)
def _parse_type(text: str) -> _Type:
    text = text.strip()
    m = re.match(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:\((.*)\))?\s*$", text, re.S)
    if not m:
        raise _BindError("unparsable type")
    inner = m.group(2)
    args = tuple(_split_top(inner)) if inner is not None and inner.strip() else ()
    return _Type(m.group(1), args, text)


def _tuple_element(arg: str) -> tuple[str | None, _Type]:
    """`name Type` (named tuple element) or `Type`."""
    m = re.match(r"(`(?:[^`\\]|\\.)*`|[A-Za-z_][A-Za-z0-9_]*)\s+(?=[A-Za-z_])(.*)$", arg, re.S)
    if m:
        name = m.group(1)
        if name.startswith("`"):
            name = re.sub(r"\\(.)", r"\1", name[1:-1])
        return name, _parse_type(m.group(2))
    return None, _parse_type(arg)


def _unwrap(t: _Type) -> _Type:
    """The type a value is rendered or read as: LowCardinality and SimpleAggregateFunction are
    storage details."""
    while True:
        if t.name == "LowCardinality" and t.args:
            t = _parse_type(t.args[0])
        elif t.name == "SimpleAggregateFunction" and len(t.args) == 2:
            t = _parse_type(t.args[1])
        else:
            return t


# --------------------------------------------------------------------------- binding


def _skip_quoted(sql: str, i: int) -> int:
    """Index just past the quoted string, identifier or heredoc-free literal starting at i."""
    q = sql[i]
    j = i + 1
    while j < len(sql):
        c = sql[j]
        if c == "\\":
            j += 2
            continue
        if c == q:
            if j + 1 < len(sql) and sql[j + 1] == q:  # doubled quote
                j += 2
                continue
            return j + 1
        j += 1
    return len(sql)


def _skip_comment(sql: str, i: int) -> int:
    """Index just past a comment starting at i, or i when none starts there."""
    if sql.startswith("--", i) or (sql.startswith("#", i) and sql[i + 1 : i + 2] in (" ", "!")):
        end = sql.find("\n", i)
        return len(sql) if end < 0 else end + 1
    if sql.startswith("/*", i):
        depth, j = 0, i
        while j < len(sql):
            if sql.startswith("/*", j):
                depth += 1
                j += 2
            elif sql.startswith("*/", j):
                depth -= 1
                j += 2
                if depth == 0:
                    return j
            else:
                j += 1
        return len(sql)
    return i


def _placeholder(sql: str, i: int) -> tuple[str, str, int] | None:
    """(name, type text, end) for a `{name:Type}` placeholder starting at i."""
    m = _PARAM_NAME.match(sql, i)
    if not m:
        return None
    depth = 0
    for j in _unquoted(sql, m.end()):
        c = sql[j]
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "}" and depth == 0:
            type_text = sql[m.end() : j].strip()
            return (m.group(1), type_text, j + 1) if type_text else None
        elif c in "{;" and depth == 0:
            return None
    return None


def _unquoted(sql: str, i: int = 0) -> Iterator[int]:
    """The indexes, from i on, of the statement's brackets, braces, commas and semicolons outside
    quoted strings, quoted identifiers and comments: the one scan of SQL text that binding,
    placeholders and type arguments share (a search jumps over the characters between)."""
    while (m := _SCAN_STOP.search(sql, i)) is not None:
        i = m.start()
        c = sql[i]
        if c in "'\"`":
            i = _skip_quoted(sql, i)
        elif c in "-/#":
            end = _skip_comment(sql, i)
            i = end if end != i else i + 1
        else:
            yield i
            i += 1


def bind_params(sql: str, params: Mapping[str, Any] | None) -> str:
    """The statement with each `{name:Type}` placeholder replaced by its value's literal."""
    if "{" not in sql:
        return sql
    params = params or {}
    out: list[str] = []
    start = 0
    for i in _unquoted(sql):
        # A placeholder's own text (up to `start`) is passed over.
        if i < start or sql[i] != "{":
            continue
        ph = _placeholder(sql, i)
        if ph is not None:
            name, type_text, end = ph
            if name not in params:
                raise _BindError(f"parameter {name} is not set")
            out.append(sql[start:i])
            out.append(render_literal(params[name], type_text, top=True, name=name))
            start = end
    out.append(sql[start:])
    return "".join(out)


def _quote(text: str | bytes, quote: str = "'") -> str:
    data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
    out = []
    for ch in data.decode("utf-8", errors="surrogateescape"):
        o = ord(ch)
        if ch == "\\" or ch == quote:
            out.append("\\" + ch)
        elif o < 0x20 or o == 0x7F:
            out.append(f"\\x{o:02X}")
        elif 0xDC80 <= o <= 0xDCFF:  # a byte that is not UTF-8, kept as that byte
            out.append(f"\\x{o - 0xDC00:02X}")
        else:
            out.append(ch)
    return quote + "".join(out) + quote


def render_literal(value: Any, type_text: str, *, top: bool = False, name: str = "") -> str:
    """The one place a value becomes SQL: a ClickHouse literal of the declared type.

    At the top of a placeholder (`top=True`) the literal is typed the way the server types a
    server-side parameter: `String` stays a plain string literal, `Identifier` becomes a
    backquoted identifier, anything else is wrapped in `_CAST(…, '<Type>')`. Nested elements
    (array items, map entries, tuple fields) are plain literals converted by that outer cast.
    A `str` for a non-string type is its ClickHouse text form, sent quoted and parsed by the
    cast, as the server parses a parameter's text.
    """
    t = _parse_type(type_text)
    if top:
        if t.name == "Identifier":
            if not isinstance(value, str) or not value:
                raise _BindError(f"parameter {name} is not an identifier")
            parts = value.split(".") if _SIMPLE_IDENT.match(value) else [value]
            return ".".join(_quote(p, "`") for p in parts)
        lit = render_literal(value, type_text, name=name)
        if t.name == "String":
            return lit
        return f"_CAST({lit}, {_quote(t.text)})"

    u = _unwrap(t)
    n = u.name
    if value is None:
        if n in ("Nullable", "Nothing"):
            return "NULL"
        raise _BindError(f"parameter {name} is None but {n} is not Nullable")
    if n == "Nullable":
        return render_literal(value, u.args[0], name=name)
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, (bytes, bytearray)):
        if n in ("String", "FixedString"):
            return _quote(bytes(value))
        raise _BindError(f"parameter {name}: bytes for {n}")

    if n in ("String", "FixedString"):
        if isinstance(value, (bool, int, float, decimal.Decimal, uuid.UUID)):
            return _quote(str(value))
    elif n in _INT_BITS:
        if isinstance(value, int):  # bool is an int: True binds as 1, as in the chDB engine
            signed, bits = _INT_BITS[n]
            lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
            if not lo <= value <= hi:
                raise _BindError(f"parameter {name} is out of range for {n}")
            return str(int(value))
    elif n in _FLOATS:
        if isinstance(value, (int, float, decimal.Decimal)):
            f = float(value)
            if math.isnan(f):
                return "nan"
            if math.isinf(f):
                return "inf" if f > 0 else "-inf"
            return repr(f)
    elif n in _DECIMALS:
        if isinstance(value, (int, float, decimal.Decimal)) and not isinstance(value, bool):
            d = decimal.Decimal(repr(value)) if isinstance(value, float) else decimal.Decimal(value)
            if not d.is_finite():
                raise _BindError(f"parameter {name} is not a finite decimal")
            return _quote(str(d))
    elif n == "Bool":
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int) and value in (0, 1):
            return "true" if value else "false"
    elif n in ("Date", "Date32"):
        if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
            return _quote(value.isoformat())
    elif n in ("DateTime", "DateTime64"):
        if isinstance(value, dt.datetime):
            if value.tzinfo is not None:  # an instant: keep it whatever the column's zone
                utc = value.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
                return f"toDateTime64({_quote(utc)}, 6, 'UTC')"
            fmt = "%Y-%m-%d %H:%M:%S.%f" if n == "DateTime64" else "%Y-%m-%d %H:%M:%S"
            return _quote(value.strftime(fmt))
        if isinstance(value, int) and not isinstance(value, bool):  # unix seconds
            return str(value)
    elif n in _TEXT_TYPES:
        if isinstance(value, (uuid.UUID, ipaddress.IPv4Address, ipaddress.IPv6Address)):
            return _quote(str(value))
        if n.startswith("Enum") and isinstance(value, int) and not isinstance(value, bool):
            return str(value)
    elif n == "Array":
        if isinstance(value, (list, tuple)):
            return "[" + ", ".join(render_literal(v, u.args[0], name=name) for v in value) + "]"
    elif n == "Map":
        if isinstance(value, Mapping) and len(u.args) == 2:
            k, v = u.args
            items = (f"({render_literal(a, k, name=name)}, {render_literal(b, v, name=name)})" for a, b in value.items())
            return "[" + ", ".join(items) + "]"
    elif n == "Tuple":
        elements = [_tuple_element(a) for a in u.args]
        if isinstance(value, Mapping) and all(en for en, _ in elements):
            if set(value) != {en for en, _ in elements}:
                raise _BindError(f"parameter {name} does not name the tuple's fields")
            value = [value[en] for en, _ in elements]
        if isinstance(value, (list, tuple)) and len(value) == len(elements):
            return "tuple(" + ", ".join(render_literal(v, et.text, name=name) for v, (_, et) in zip(value, elements, strict=True)) + ")"
    raise _BindError(f"parameter {name}: {type(value).__name__} does not fit {n}")

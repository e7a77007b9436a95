"""What every door accepts as a JSON value, whatever the op: how deep it nests, which numbers and
which characters it may hold, and how much of a refused value an error quotes back.

The doors parse differently (REST and MCP from JSON text, gRPC from a message), so each calls
`check_value` on what it parsed; the gateway also checks the depth on the raw text before it
parses anything (loom_gateway.limits)."""

from __future__ import annotations

import math
import re
from typing import Any

from .errors import ErrorCode, LoomError, ValidationFailed

# The deepest JSON a request may nest (the body's own object is level 1). A free-form value
# (a task's brief, an outcome) is a google.protobuf.Struct, which costs two or three protobuf
# levels per JSON level; protobuf refuses to decode past 100 levels, and a task's brief is read
# back inside a Task inside a list answer: a brief nested 34 deep is written but can never be
# read again. 32 keeps every accepted value readable wherever it is embedded.
MAX_JSON_DEPTH = 32

# An error quotes at most this many characters of the value it refuses.
QUOTE_CHARS = 200

_BAD_CHAR = re.compile("[\x00\ud800-\udfff]")


def clip(value: Any, limit: int = QUOTE_CHARS) -> str:
    """`value` as an error quotes it: its repr, cut to `limit` characters with the rest counted."""
    text = value if isinstance(value, str) else repr(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} more characters)"


def too_deep(depth: int | None = None) -> LoomError:
    found = f" ({depth} or more levels)" if depth else ""
    return LoomError(
        ErrorCode.REQUEST_TOO_DEEP,
        f"the request nests deeper than {MAX_JSON_DEPTH} levels{found}",
        {"field": "(body)", "reason": "too deep", "max_depth": MAX_JSON_DEPTH},
    )


def non_finite(field: str, text: str) -> ValidationFailed:
    return ValidationFailed(
        f"{field}: {clip(text)} is not a number JSON can carry (NaN, Infinity and numbers past a double's range are refused)",
        {"field": field, "reason": "not a finite number", "value": clip(text)},
    )


def check_value(value: Any) -> None:
    """Refuse (naming the field) a value nested past MAX_JSON_DEPTH, a non-finite number, or a
    string or key holding a NUL character or a lone surrogate. Iterative: no recursion limit."""
    stack: list[tuple[Any, str, int]] = [(value, "", 1)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, dict):
            if depth > MAX_JSON_DEPTH:
                raise too_deep(depth)
            for key, inner in item.items():
                where = f"{path}.{key}" if path else str(key)
                if isinstance(key, str) and _BAD_CHAR.search(key):
                    raise _bad_string(path or "(body)", key)
                stack.append((inner, where, depth + 1))
        elif isinstance(item, list):
            if depth > MAX_JSON_DEPTH:
                raise too_deep(depth)
            stack.extend((inner, f"{path}[{i}]", depth + 1) for i, inner in enumerate(item))
        elif isinstance(item, str):
            if _BAD_CHAR.search(item):
                raise _bad_string(path or "(body)", item)
        elif isinstance(item, float) and not math.isfinite(item):
            raise non_finite(path or "(body)", repr(item))


def _bad_string(field: str, text: str) -> ValidationFailed:
    found = _BAD_CHAR.search(text)
    what = "a NUL character" if found is not None and found.group() == "\x00" else "a lone surrogate (not Unicode text)"
    quoted = clip(repr(text))  # escaped: the refused characters quoted, not sent back raw
    return ValidationFailed(f"{field}: holds {what}: {quoted}", {"field": field, "reason": "invalid character", "value": quoted})

"""What every door accepts as a JSON value, whatever the op: how deep it nests, which numbers and
which characters it may hold, how large a body and of which media type, and how much of a
refused value an error quotes back.

The doors parse differently (REST and MCP from JSON text, gRPC from a message), so each calls
`check_value` on what it parsed; an HTTP door (the gateway's outermost layer, the assistant
bridge's own chat route) reads its body with `read_body` and parses it with `parse_json`,
which also checks the depth on the raw text before it parses anything."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Awaitable, Callable, MutableMapping
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


def too_large(max_bytes: int, size: int | None = None) -> LoomError:
    sent = f" (this one is {size} bytes)" if size else ""
    return LoomError(
        ErrorCode.REQUEST_TOO_LARGE,
        f"the request body is over the limit of {max_bytes} bytes{sent}",
        {"field": "(body)", "reason": "too large", "max_bytes": max_bytes},
    )


def check_media_type(content_type: bytes) -> None:
    """A body's media type: JSON (`application/json`, `…+json`; none at all is taken for JSON),
    else 415."""
    media = content_type.split(b";", 1)[0].strip().lower()
    if media and media != b"application/json" and not media.endswith(b"+json"):
        quoted = clip(media.decode("latin-1"))
        raise LoomError(
            ErrorCode.UNSUPPORTED_MEDIA_TYPE,
            f"content-type {quoted!r} is not accepted: send application/json",
            {"field": "content-type", "reason": "unsupported media type", "accepted": ["application/json"]},
        )


async def read_body(receive: Callable[[], Awaitable[MutableMapping[str, Any]]], max_bytes: int) -> bytes:
    """An ASGI request's whole body, refused past `max_bytes` (413, reading stops there). How
    long it may take to arrive is the HTTP server's limit (loom_runner.http), which costs the
    fast path no timer of its own."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ValidationFailed("the client went away", {"field": "(body)", "reason": "disconnected"})
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > max_bytes:
            raise too_large(max_bytes)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def parse_json(raw: bytes) -> Any:
    """The body as JSON, or its refusal: nesting past MAX_JSON_DEPTH (400, judged on the text
    before parsing), text that is not JSON, a number JSON cannot carry (NaN, Infinity, 1e400),
    a NUL character or a lone surrogate in a string (422). No body at all is no arguments; a
    whitespace-only body is not JSON."""
    if not raw or raw == b"{}":  # no arguments: most calls' body on a hot path
        return {}
    _check_depth(raw)
    try:
        value = _DECODER.decode(raw.decode())
    except _NonFinite as exc:
        raise non_finite("(body)", exc.text) from None
    except (ValueError, RecursionError):
        raise ValidationFailed("the body is not valid JSON", {"field": "(body)", "reason": "invalid JSON"}) from None
    if b"\\u" in raw:  # only an escape can put a NUL or a lone surrogate into a parsed string
        check_value(value)
    return value


# A JSON string (escapes included), to blank out before counting brackets.
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_OPEN = frozenset(b"[{")


def _check_depth(raw: bytes) -> None:
    # Fewer brackets than the limit cannot nest past it: the common case costs two counts.
    if raw.count(b"{") + raw.count(b"[") <= MAX_JSON_DEPTH:
        return
    depth = 0
    for byte in _JSON_STRING.sub(b'""', raw).translate(None, _NOT_BRACKETS):
        if byte in _OPEN:
            depth += 1
            if depth > MAX_JSON_DEPTH:
                raise too_deep()
        else:
            depth -= 1


class _NonFinite(Exception):
    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


def _refuse_constant(text: str) -> float:
    raise _NonFinite(text)


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _NonFinite(text)
    return value


# Built once: json.loads with these hooks would build a decoder per call.
_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite_float)

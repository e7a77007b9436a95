"""The limits every request body meets before any route sees it (op calls, MCP, the assistant's
chat route): its declared and actual size, its media type, and what its JSON may hold
(loom_core.json_limits). Applied once, in the gateway's outermost ASGI layer
(fastpath.OpFastPath); how long a client may take over its headers and body, and how long an
idle connection stays open, are the HTTP server's (loom_runner.http)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from loom_core.errors import ErrorCode, LoomError, ValidationFailed
from loom_core.json_limits import MAX_JSON_DEPTH, check_value, clip, non_finite, too_deep
from loom_core.runtime import MAX_MESSAGE_BYTES
from starlette.types import Message, Receive

# The largest body any route reads: the largest message an op takes.
MAX_BODY_BYTES = MAX_MESSAGE_BYTES

METHODS_WITH_BODY = frozenset({"POST", "PUT", "PATCH"})

# A JSON string (escapes included), to blank out before counting brackets.
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_OPEN = frozenset(b"[{")


def too_large(size: int | None = None) -> LoomError:
    sent = f" (this one is {size} bytes)" if size else ""
    return LoomError(
        ErrorCode.REQUEST_TOO_LARGE,
        f"the request body is over the limit of {MAX_BODY_BYTES} bytes{sent}",
        {"field": "(body)", "reason": "too large", "max_bytes": MAX_BODY_BYTES},
    )


def check_headers(headers: Iterable[tuple[bytes, bytes]]) -> None:
    """What the headers say about the body, refused before any of it is read: a declared length
    over the limit (413), a media type other than JSON (415; none at all is taken for JSON)."""
    for name, value in headers:
        if name == b"content-length":
            try:
                declared = int(value)
            except ValueError:
                raise ValidationFailed("content-length: not a number", {"field": "content-length", "reason": "malformed"}) from None
            if declared > MAX_BODY_BYTES:
                raise too_large(declared)
        elif name == b"content-type":
            media = value.split(b";", 1)[0].strip().lower()
            if media and media != b"application/json" and not media.endswith(b"+json"):
                quoted = clip(media.decode("latin-1"))
                raise LoomError(
                    ErrorCode.UNSUPPORTED_MEDIA_TYPE,
                    f"content-type {quoted!r} is not accepted: send application/json",
                    {"field": "content-type", "reason": "unsupported media type", "accepted": ["application/json"]},
                )


async def read_body(receive: Receive) -> bytes:
    """The whole body, refused past MAX_BODY_BYTES (413, reading stops there). How long it may
    take to arrive is the HTTP server's limit (loom_runner.http), which costs the fast path no
    timer of its own."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message: Message = await receive()
        if message["type"] == "http.disconnect":
            raise ValidationFailed("the client went away", {"field": "(body)", "reason": "disconnected"})
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise too_large()
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def parse_json(raw: bytes) -> Any:
    """The body as JSON, or its refusal: nesting past MAX_JSON_DEPTH (400, judged on the text
    before parsing), text that is not JSON, a number JSON cannot carry (NaN, Infinity, 1e400),
    a NUL character or a lone surrogate in a string (422). No body at all is no arguments; a
    whitespace-only body is not JSON."""
    if not raw:
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

"""The limits every request body meets before any route sees it (op calls, MCP, the assistant's
chat route): its declared and actual size, its media type, and what its JSON may hold
(loom_core.json_limits, where every HTTP door's body rules live). Applied once, in the
gateway's outermost ASGI layer (fastpath.OpFastPath); how long a client may take over its
headers and body, and how long an idle connection stays open, are the HTTP server's
(loom_runner.http)."""

from __future__ import annotations

from collections.abc import Coroutine, Iterable
from typing import Any

from loom_core import json_limits
from loom_core.errors import LoomError, ValidationFailed
from loom_core.json_limits import check_media_type, parse_json
from loom_core.runtime import MAX_MESSAGE_BYTES
from starlette.types import Receive

# The largest body any route reads: the largest message an op takes.
MAX_BODY_BYTES = MAX_MESSAGE_BYTES

METHODS_WITH_BODY = frozenset({"POST", "PUT", "PATCH"})

__all__ = ["MAX_BODY_BYTES", "METHODS_WITH_BODY", "check_headers", "parse_json", "read_body", "too_large"]


def too_large(size: int | None = None) -> LoomError:
    return json_limits.too_large(MAX_BODY_BYTES, size)


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
            check_media_type(value)


def read_body(receive: Receive) -> Coroutine[Any, Any, bytes]:
    """The whole body, refused past MAX_BODY_BYTES (413, reading stops there). Core's reader
    itself, not a coroutine around it: the hot path pays no extra frame."""
    return json_limits.read_body(receive, MAX_BODY_BYTES)

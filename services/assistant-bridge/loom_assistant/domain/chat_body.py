"""The chat route's request body, checked before anything else runs (pure): before the token,
the rate class, the slot or LibreChat, so a hostile body costs nothing and holds nothing.

A body is JSON (`Content-Type: application/json`), at most MAX_BODY_BYTES, nested at most
MAX_DEPTH levels (an OpenAI request is five deep: body, messages, a message, its content
parts, a part), with no NaN or Infinity (not JSON) and no NUL character in any string. Each
refusal is VALIDATION_FAILED naming `(body)` and its reason.
"""

from __future__ import annotations

import json
from typing import Any

from loom_core.errors import ValidationFailed

# Fifty turns and a question of 20,000 characters each, escaped, fit well inside.
MAX_BODY_BYTES = 4 * 1024 * 1024
MAX_DEPTH = 16


def refusal(message: str, reason: str, *, field: str = "(body)", **detail: Any) -> ValidationFailed:
    return ValidationFailed(message, {"field": field, "reason": reason, **detail})


def check_content_type(content_type: str) -> None:
    media = content_type.split(";", 1)[0].strip().lower()
    if media != "application/json":
        raise refusal("the body must be JSON, sent as Content-Type: application/json", "content_type")


def too_large() -> ValidationFailed:
    return refusal("the request is too large", "too_large", max_bytes=MAX_BODY_BYTES)


def _no_constant(name: str) -> Any:
    raise ValueError(name)


def _check_tree(value: Any) -> None:
    """Depth and NUL over the parsed value, iteratively (no recursion a body could exhaust)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            if depth > MAX_DEPTH:
                raise refusal(f"the body nests deeper than {MAX_DEPTH} levels", "too_deep", max_depth=MAX_DEPTH)
            for k, v in item.items():
                if "\x00" in k:
                    raise refusal("the body holds a NUL character", "nul")
                stack.append((v, depth + 1))
        elif isinstance(item, list):
            if depth > MAX_DEPTH:
                raise refusal(f"the body nests deeper than {MAX_DEPTH} levels", "too_deep", max_depth=MAX_DEPTH)
            stack.extend((v, depth + 1) for v in item)
        elif isinstance(item, str) and "\x00" in item:
            raise refusal("the body holds a NUL character", "nul")


def parse(raw: bytes) -> dict[str, Any]:
    """The body as a JSON object, or the caller's VALIDATION_FAILED."""
    if len(raw) > MAX_BODY_BYTES:
        raise too_large()
    if b"\x00" in raw:
        raise refusal("the body holds a NUL character", "nul")
    try:
        # A nesting past the parser's own limit raises RecursionError, not ValueError.
        value = json.loads(raw, parse_constant=_no_constant)
    except RecursionError:
        raise refusal(f"the body nests deeper than {MAX_DEPTH} levels", "too_deep", max_depth=MAX_DEPTH) from None
    except ValueError:
        raise refusal("the body is not valid JSON (NaN and Infinity are not JSON)", "invalid_json") from None
    _check_tree(value)
    if not isinstance(value, dict):
        raise refusal("the body must be a JSON object", "not_an_object")
    return value

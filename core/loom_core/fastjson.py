"""Compact JSON on the hot paths (task state on NATS, wake-ups, events, store inserts), by orjson.

`dumps(value)` is `json.dumps(value, separators=(",", ":"), default=str).encode()` at a fifth of
the cost: datetimes and dataclasses go through `default=str` as with the standard library (not
orjson's own forms), and a value orjson refuses (an integer past 64 bits, a non-string key)
falls back to the standard library, so every caller gets the same JSON it got before, except
that non-ASCII text is written as UTF-8 rather than as `\\u` escapes (the same value once read).
`loads` accepts bytes or str.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS

loads = orjson.loads


def dumps(value: Any) -> bytes:
    try:
        return orjson.dumps(value, default=str, option=_OPTIONS)
    except TypeError:
        return json.dumps(value, separators=(",", ":"), default=str).encode()


def dumps_str(value: Any) -> str:
    return dumps(value).decode()

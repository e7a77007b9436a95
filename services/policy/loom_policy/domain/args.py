"""Argument values as the ledger records them (agent_events.args is Map(String, String)).

`args_equal` compares a recorded event's argument to a literal or to the current call's own
argument, so both sides are first put in the ledger's form: strings as they are, booleans as
`true`/`false`, integral numbers without a decimal point, lists as compact JSON, nested
objects flattened to dotted names. Text fields and free-form objects are recorded as digests,
so only `$args.<field>` (normalised by the same code as the ledger) can compare them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def scalar(value: Any) -> str:
    """One JSON value in the ledger's string form."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return json.dumps([v if isinstance(v, (str, int, float, bool)) else str(v) for v in value])
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def flatten_json(args: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """A JSON object of arguments in the ledger's form (for ops this deployment does not serve)."""
    out: dict[str, str] = {}
    for name, value in args.items():
        if value is None:
            continue
        key = prefix + str(name)
        if isinstance(value, dict):
            out.update(flatten_json(value, key + "."))
        else:
            out[key] = scalar(value)
    return out

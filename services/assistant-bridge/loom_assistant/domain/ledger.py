"""One of an answer's ledgered calls (loom.agent_events), as the checks and steps read it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class LedgerCall:
    """An op the answer's token called: whether it succeeded, how many hits it answered, and
    its ledgered arguments (as text)."""

    op: str
    ok: bool
    out_hits: int = 0
    args: Mapping[str, str] = field(default_factory=dict)
    namespace: str = ""
    ts: str = ""

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> LedgerCall:
        """A call from agent_events' columns: `args` holds JSON text (an object is taken as is)."""
        return cls(
            op=str(row["op"]),
            ok=bool(row["ok"]),
            out_hits=int(row.get("out_hits") or 0),
            args=_args(row.get("args")),
            namespace=str(row.get("namespace", "")),
            ts=str(row.get("ts", "")),
        )


def _args(raw: object) -> dict[str, str]:
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return {}
    if not isinstance(raw, Mapping):
        return {}
    return {str(k): str(v) for k, v in raw.items()}

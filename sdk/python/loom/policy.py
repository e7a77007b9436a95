"""History policies' condition helpers: rules over an agent's own recent history.

The policy ops are generated methods (``agent.policy``, ``loom.PolicyClient``, spec 003's
names; every op also as ``agent.ops.policy.*``)::

    await agent.policy.set(
        "read-before-delete",
        effect="require",
        actions=["memory.delete"],
        condition={"op": "formerly", "within": "1h", "operation": "memory.get",
                   "args_equal": {"memory_key": "$args.memory_key"}},
        description="An agent deletes only what it has just looked at.",
    )
    verdict = await agent.policy.check(operation="memory.delete", agent="cleanup-bot",
                                       args={"memory_key": "notes/old"})

Conditions can be written as dicts, or with the leaf helpers here, which bound the verified
caller (`key="actor"`) unless told otherwise, so an agent cannot step around a limit by
sending another `X-Loom-Agent` label:

    from loom.policy import count_within
    await agent.policy.set("writes-per-hour", effect="forbid", actions=["task.create"],
                           condition=count_within("task.create", within="1h", cmp="gte", value=200))

The rule language, modes and worked examples: docs/policies.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["count_within", "formerly", "not_since"]

Key = str  # "actor" (the verified subject, whatever its labels), "agent", "session" or "user"


def _leaf(op: str, operation: str, within: str, key: Key, extra: Mapping[str, Any]) -> dict[str, Any]:
    leaf: dict[str, Any] = {"op": op, "within": within, "operation": operation, "key": key}
    leaf.update({k: v for k, v in extra.items() if v is not None})
    return leaf


def count_within(
    operation: str,
    *,
    within: str,
    cmp: str,
    value: float,
    key: Key = "actor",
    args_equal: Mapping[str, str] | None = None,
    outcome: str | None = None,
) -> dict[str, Any]:
    """A ``count_within`` leaf: how many ``operation`` calls the caller made in ``within``.

    ``key`` defaults to ``actor``: the verified subject's calls, whatever agent label each one
    sent (``agent`` would count per label, which the caller picks). Calls in flight count too.
    """
    return _leaf("count_within", operation, within, key, {"cmp": cmp, "value": value, "args_equal": args_equal, "outcome": outcome})


def formerly(
    operation: str, *, within: str, key: Key = "actor", args_equal: Mapping[str, str] | None = None, outcome: str | None = None
) -> dict[str, Any]:
    """A ``formerly`` leaf: the caller made an ``operation`` call in ``within`` (``key``: see count_within)."""
    return _leaf("formerly", operation, within, key, {"args_equal": args_equal, "outcome": outcome})


def not_since(
    operation: str,
    *,
    anchor: str,
    within: str,
    key: Key = "actor",
    args_equal: Mapping[str, str] | None = None,
    anchor_args_equal: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A ``not_since`` leaf: no ``operation`` call since the caller's last ``anchor`` call within ``within``."""
    return _leaf("not_since", operation, within, key, {"anchor": anchor, "args_equal": args_equal, "anchor_args_equal": anchor_args_equal})

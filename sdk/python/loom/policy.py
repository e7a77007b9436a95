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
from typing import Literal, TypeVar

from ._ops import PolicyConditionCountWithin, PolicyConditionFormerly, PolicyConditionNotSince

__all__ = ["count_within", "formerly", "not_since"]

# "actor" (the verified subject, whatever its labels), "agent", "session" or "user"
Key = Literal["agent", "session", "user", "actor"]
Cmp = Literal["gt", "gte", "lt", "lte", "eq"]
Outcome = Literal["ok", "failed", "any"]
Leaf = TypeVar("Leaf", PolicyConditionCountWithin, PolicyConditionFormerly, PolicyConditionNotSince)


def _narrowed(leaf: Leaf, args_equal: Mapping[str, str] | None, outcome: Outcome | None) -> Leaf:
    """The leaf matching only calls with these arguments and this outcome (None: any)."""
    if args_equal is not None:
        leaf["args_equal"] = dict(args_equal)
    if outcome is not None:
        leaf["outcome"] = outcome
    return leaf


def count_within(
    operation: str,
    *,
    within: str,
    cmp: Cmp,
    value: int,
    key: Key = "actor",
    args_equal: Mapping[str, str] | None = None,
    outcome: Outcome | None = None,
) -> PolicyConditionCountWithin:
    """A ``count_within`` leaf: how many ``operation`` calls the caller made in ``within``.

    ``key`` defaults to ``actor``: the verified subject's calls, whatever agent label each one
    sent (``agent`` would count per label, which the caller picks). Calls in flight count too.
    """
    leaf = PolicyConditionCountWithin(op="count_within", within=within, operation=operation, key=key, cmp=cmp, value=value)
    return _narrowed(leaf, args_equal, outcome)


def formerly(
    operation: str, *, within: str, key: Key = "actor", args_equal: Mapping[str, str] | None = None, outcome: Outcome | None = None
) -> PolicyConditionFormerly:
    """A ``formerly`` leaf: the caller made an ``operation`` call in ``within`` (``key``: see count_within)."""
    return _narrowed(PolicyConditionFormerly(op="formerly", within=within, operation=operation, key=key), args_equal, outcome)


def not_since(
    operation: str,
    *,
    anchor: str,
    within: str,
    key: Key = "actor",
    args_equal: Mapping[str, str] | None = None,
    anchor_args_equal: Mapping[str, str] | None = None,
) -> PolicyConditionNotSince:
    """A ``not_since`` leaf: no ``operation`` call since the caller's last ``anchor`` call within ``within``."""
    leaf = _narrowed(PolicyConditionNotSince(op="not_since", within=within, operation=operation, key=key, anchor=anchor), args_equal, None)
    if anchor_args_equal is not None:
        leaf["anchor_args_equal"] = dict(anchor_args_equal)
    return leaf

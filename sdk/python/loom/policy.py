"""`agent.policy`: history policies, rules over an agent's own recent history.

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

import builtins
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ._ops import CheckPolicyResponse, Decision, DeletePolicyResponse, ListPoliciesResponse, Ops, ReplayPolicyResponse, SetPolicyResponse

if TYPE_CHECKING:
    from ._agent import Agent


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


class PolicyClient:
    """Helpers for the history-policy ops (`policy.*`), reached as `agent.policy`."""

    def __init__(self, agent: Agent) -> None:
        self._ops = Ops(agent)

    async def set(
        self,
        name: str,
        *,
        effect: str,
        actions: Sequence[str],
        condition: Mapping[str, Any],
        description: str | None = None,
        mode: str | None = None,
    ) -> SetPolicyResponse:
        """Create or replace a rule (admin).

        Args:
            name: The rule's name in the namespace.
            effect: ``forbid`` (deny when the condition holds) or ``require`` (deny when it
                does not).
            actions: Op names or globs the rule applies to (``memory.delete``, ``memory.*``).
            condition: A tree of ``all`` / ``any`` / ``not`` over the leaves ``formerly``,
                ``count_within``, ``not_since`` and ``breadth_within``.
            description: Why the rule exists.
            mode: ``inherit`` (default), ``shadow`` or ``enforce``.

        Returns:
            ``{rule, leaf_count, widened, widened_reasons, created, warnings, mode_in_effect}``.

        Raises:
            ValidationError: a malformed rule; ``detail.field`` names the bad node's path.
        """
        return await self._ops.policy.set(
            name=name, effect=effect, actions=list(actions), condition=dict(condition), description=description, mode=mode
        )

    async def delete(self, name: str) -> DeletePolicyResponse:
        """Remove a rule (admin). Returns ``{deleted, widened}``."""
        return await self._ops.policy.delete(name=name)

    async def list(self) -> ListPoliciesResponse:
        """The namespace's rules and the deployment's mode: ``{rules, mode, ...}``."""
        return await self._ops.policy.list()

    async def check(
        self,
        *,
        operation: str,
        agent: str | None = None,
        user: str | None = None,
        session: str | None = None,
        args: Mapping[str, Any] | None = None,
        rules: Sequence[Mapping[str, Any]] | None = None,
    ) -> CheckPolicyResponse:
        """Dry-run a call against the stored rules, or against ``rules`` passed in.

        The history read is always the caller's own (its token's subject), under the labels
        given (default: this agent's).

        Returns:
            The verdict: ``{decision, would_enforce, mode, write_shaped, determining_rules,
            errors, rules, latency_ms}``.
        """
        return await self._ops.policy.check(
            operation=operation,
            agent=agent,
            user=user,
            session=session,
            args=dict(args) if args is not None else None,
            rules=[dict(r) for r in rules] if rules is not None else None,
        )

    async def decisions(
        self,
        *,
        decision: str | None = None,
        agent: str | None = None,
        operation: str | None = None,
        rule: str | None = None,
        since: str | None = None,
        limit: int | None = None,
    ) -> builtins.list[Decision]:
        """The decision ledger, newest first, filtered by ``allow`` / ``deny`` and more."""
        body = await self._ops.policy.decisions(decision=decision, agent=agent, operation=operation, rule=rule, since=since, limit=limit)
        return body["decisions"]

    async def replay(
        self,
        *,
        rules: Sequence[Mapping[str, Any]] | None = None,
        names: Sequence[str] | None = None,
        include_stored: bool | None = None,
        mode: str | None = None,
        since: str | None = None,
        until: str | None = None,
        agent: str | None = None,
        limit: int | None = None,
        only_denied: bool | None = None,
    ) -> ReplayPolicyResponse:
        """What rules would have decided over the recorded ledger in a window.

        Args:
            rules: Proposed rules; without them the stored rules (``names`` picks some).
            include_stored: With proposed rules, replay the stored ones too.
            mode: Replay every rule as ``shadow`` or ``enforce``.
            since: Start of the window (RFC 3339 or a duration back from now, ``7d``).
            until: End of the window (default now).
            agent: Only this agent's calls.
            limit: Per-call results to return (totals count every call).
            only_denied: Return only calls that would be denied.

        Returns:
            ``{calls, totals, since_time, until_time, truncated, mode}``.
        """
        return await self._ops.policy.replay(
            rules=[dict(r) for r in rules] if rules is not None else None,
            names=list(names) if names is not None else None,
            include_stored=include_stored,
            mode=mode,
            since=since,
            until=until,
            agent=agent,
            limit=limit,
            only_denied=only_denied,
        )

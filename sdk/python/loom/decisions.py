"""`agent.decision`: decisions that matter later, their precedents, causes and outcomes.

    rec = await agent.decision.record(
        category="storage",
        scenario="retention for raw transcripts in the support namespace",
        reasoning="Replay needs 30 days; legal hold is handled by export, not by retention.",
        outcome="keep transcripts 30 days",
        alternatives=["keep forever", "7 days"],
        confidence=0.8,
        influenced_by=["policy/legal/hold"],
    )
    prior = await agent.decision.precedents("how long do we keep transcripts?", category="storage")
    await agent.decision.outcome(rec["memory_key"], "no replay gaps in the quarter", success=True)

Rules, refusals and examples: docs/decisions.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._client import OpCaller

__all__ = ["DecisionsClient"]


def _list(values: Sequence[str] | None) -> list[str] | None:
    return None if values is None else list(values)


class DecisionsClient:
    """Helpers for the decision ops (``decision.*``), reached as ``agent.decision``."""

    def __init__(self, agent: OpCaller) -> None:
        self._agent = agent

    async def record(
        self,
        *,
        category: str,
        scenario: str,
        outcome: str,
        reasoning: str | None = None,
        alternatives: Sequence[str] | None = None,
        confidence: float | None = None,
        caused_by: Sequence[str] | None = None,
        influenced_by: Sequence[str] | None = None,
        stage: str | None = None,
        files: Sequence[str] | None = None,
        source_resource_id: str | None = None,
        source_class: str | None = None,
        tags: Sequence[str] | None = None,
        run_id: str | None = None,
        memories_used: Sequence[str] | None = None,
    ) -> dict[str, Any]:
        """Record a decision; category + scenario identify it. ``memories_used``: the memory keys
        it relied on, which its outcome credits or charges (with caused_by and influenced_by).

        Returns ``{memory_key, created, superseded_prior, restated, conflicts, stage, statement, version}``.

        Raises:
            LoomError: ``MISSING_IDENTITY_FIELD`` (400) when the category or scenario has no letter or
                digit; ``PINNED_CONFLICT`` (409) when your own pinned decision says otherwise;
                ``LOCKED`` (423) while the key is locked.
        """
        return await self._agent.call(
            "decision.record",
            category=category,
            scenario=scenario,
            outcome=outcome,
            reasoning=reasoning,
            alternatives=_list(alternatives),
            confidence=confidence,
            caused_by=_list(caused_by),
            influenced_by=_list(influenced_by),
            stage=stage,
            files=_list(files),
            source_resource_id=source_resource_id,
            source_class=source_class,
            tags=_list(tags),
            run_id=run_id,
            memories_used=_list(memories_used),
        )

    async def precedents(
        self, query: str, *, category: str | None = None, with_outcome_only: bool | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """Past decisions closest in meaning to ``query`` (at most 25), best first, each with its
        ``score`` and ``stage``."""
        out = await self._agent.call(
            "decision.precedents", query=query, category=category, with_outcome_only=with_outcome_only, limit=limit
        )
        return list(out.get("precedents", []))

    async def chain(self, memory_key: str, *, direction: str | None = None, max_hops: int | None = None) -> dict[str, Any]:
        """The decision's causal edges (``upstream``, ``downstream`` or ``both``, up to 4 hops):
        ``{nodes, edges}``, each decision node with its stage."""
        return await self._agent.call("decision.chain", memory_key=memory_key, direction=direction, max_hops=max_hops)

    async def outcome(self, memory_key: str, realized_outcome: str, *, success: bool | None = None) -> dict[str, Any]:
        """Record what the decision led to; with ``success``, credit (or charge) the memories the
        decision used that its run was shown; a later failure turns an earlier credit into a charge.

        Raises:
            ConflictError: ``PRECONDITION_FAILED`` (409) when the decision changed during the call; call again.
            UnavailableError: 503 when the key's lease store is unreachable; call again.
        """
        return await self._agent.call("decision.outcome", memory_key=memory_key, realized_outcome=realized_outcome, success=success)

    async def calibration(
        self, *, window_days: int | None = None, agent: str | None = None, category: str | None = None
    ) -> list[dict[str, Any]]:
        """Per agent and category: stated confidence against realized success (counts, Brier score)."""
        out = await self._agent.call("decision.calibration", window_days=window_days, agent=agent, category=category)
        return list(out.get("rows", []))

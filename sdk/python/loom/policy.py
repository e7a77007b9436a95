"""`agent.policy`: the history-policy plane's helpers (placeholder until the policy plane lands)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._agent import Agent


class PolicyClient:
    """Helpers for the history-policy ops, reached as `agent.policy`."""

    def __init__(self, agent: Agent) -> None:
        self._agent = agent

"""`agent.tasks`: the task inbox plane's helpers (placeholder until the tasks plane lands)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._agent import Agent


class TasksClient:
    """Helpers for the task inbox ops, reached as `agent.tasks`."""

    def __init__(self, agent: Agent) -> None:
        self._agent = agent

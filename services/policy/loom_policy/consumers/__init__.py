"""Everything of the policy plane that reads the bus. Wired by plane.py; nothing imports it."""

from __future__ import annotations

from loom_core.bus import Consuming

from ..service.gate import PolicyGate
from .history_feed import listen_history_feed
from .rule_pushes import listen_rule_pushes


async def listen(gate: PolicyGate) -> list[Consuming]:
    """The gate's consumers: rule pushes into its rule book, the feed into its live history."""
    if gate.bus is None or gate.rules is None or gate.history is None:
        return []
    return [await listen_rule_pushes(gate.bus, gate.rules), await listen_history_feed(gate.bus, gate.history)]

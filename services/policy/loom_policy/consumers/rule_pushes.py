"""Rule pushes (`loom.policy.rules`, core NATS, at most once): another replica changed a
namespace's rules; the rule book reloads it (a lost push is caught by the periodic reload)."""

from __future__ import annotations

from faststream.nats.message import NatsMessage
from loom_core.bus import Bus, Consuming

from ..bus import RULE_PUSHES
from ..service.rulebook import RuleBook


async def listen_rule_pushes(bus: Bus, rules: RuleBook) -> Consuming:
    async def on_push(msg: NatsMessage) -> None:
        await rules.pushed(msg.body)

    return await bus.consume(RULE_PUSHES, on_push)

"""The policy plane: its ops' handlers and tables. The gate itself is built per runtime from
the `loom.gate` entry point (gate.py), since every plane's process needs one."""

from __future__ import annotations

from collections.abc import Sequence

from loom_core.runtime import Handler, Runtime
from loom_core.store import Migration

from .handlers import PolicyHandlers
from .store.schema import MIGRATIONS


class PolicyPlane:
    name = "policy"
    migrations: Sequence[Migration] = MIGRATIONS

    def __init__(self, runtime: Runtime) -> None:
        self.ops = PolicyHandlers(runtime)

    def handlers(self) -> dict[str, Handler]:
        h = self.ops
        return {
            "policy.set": h.set_rule,
            "policy.delete": h.delete_rule,
            "policy.list": h.list_rules,
            "policy.check": h.check,
            "policy.decisions": h.decisions,
            "policy.replay": h.replay,
        }

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None


def build(runtime: Runtime) -> PolicyPlane:
    return PolicyPlane(runtime)

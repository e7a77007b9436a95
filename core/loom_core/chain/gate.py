"""The history-policy gate hook. The chain calls `check` after role and rate, before the
handler; the policy plane supplies the real gate. Until then (and with LOOM_POLICY_MODE=off)
the no-op gate reads and writes nothing."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from google.protobuf.message import Message

from .context import CallContext


@dataclass(slots=True)  # not frozen: a frozen dataclass's __init__ costs every gated call ~0.4 us more
class GateCall:
    ctx: CallContext
    # The request as the handler gets it: the gate reads the arguments a rule binds from it the
    # way the ledger does, and only when a rule or reservation needs them (no JSON copy per call).
    request: Message
    # Set by the gate: what it writes about the call (its decision row). The chain runs it with
    # the call's ledger row, after the answer has gone (`answer_first`), allowed or refused.
    after: Callable[[], None] | None = None


class PolicyGate(Protocol):
    @property
    def enabled(self) -> bool: ...

    async def check(self, call: GateCall) -> None:
        """Return to allow; raise Forbidden(POLICY_FORBIDDEN) to deny."""


class NoopGate:
    enabled = False

    async def check(self, call: GateCall) -> None:
        return None


def gated(op_name: str) -> bool:
    """The gate never applies to policy.* or ops.*, so an operator can always fix a rule."""
    return not (op_name.startswith("policy.") or op_name.startswith("ops."))

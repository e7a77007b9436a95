"""Replay: what a rule set would have decided for each recorded call in a time window.

The recorded ledger is swept in time order through the same window and evaluator the gate
uses. Each call is evaluated at the instant it started (its row's time less its latency) over
the events recorded strictly before that instant, so the replay keeps the gate's past-only
rule; its `$args` are the arguments as the ledger recorded them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from loom_core.errors import ErrorCode

from .compiler import Caller, CompiledRule, EvalContext
from .evaluator import evaluate
from .history import Event, Exposure, Shape, Window
from .model import Verdict

# Calls refused before the gate (token, role, rate) never met a rule; a replay skips them too.
PRE_GATE_CODES: frozenset[str] = frozenset(
    {
        ErrorCode.AUTH_REQUIRED,
        ErrorCode.AUTH_INVALID,
        ErrorCode.AUTH_EXPIRED,
        ErrorCode.AUTH_REVOKED,
        ErrorCode.AUTH_INSUFFICIENT,
        ErrorCode.AUTH_WRONG_ORG,
        ErrorCode.RATE_LIMITED,
    }
)


@dataclass(slots=True)
class RecordedCall:
    event: Event
    latency_us: int
    error_code: str
    write_shaped: bool

    @property
    def started_us(self) -> int:
        return self.event.ts - max(0, self.latency_us)


@dataclass(slots=True)
class ReplayItem:
    call: RecordedCall
    verdict: Verdict


@dataclass(slots=True)
class RuleCount:
    evaluated: int = 0
    denied: int = 0
    errors: int = 0


@dataclass(slots=True)
class ReplayResult:
    items: list[ReplayItem] = field(default_factory=list)
    calls: int = 0
    evaluated: int = 0
    allowed: int = 0
    denied: int = 0
    would_enforce: int = 0
    errors: int = 0
    newly_denied: int = 0
    by_rule: dict[str, RuleCount] = field(default_factory=dict)


def gated(op: str) -> bool:
    return not (op.startswith("policy.") or op.startswith("ops."))


def replay(
    rules: Sequence[CompiledRule],
    calls: Sequence[RecordedCall],
    exposures: Sequence[Exposure],
    *,
    since_us: int,
    until_us: int,
    deployment_mode: str,
    mode_override: str = "",
    agent: str = "",
    limit: int = 100,
    only_denied: bool = False,
    live_rows: dict[str, int] | None = None,
    write_shaped: Callable[[str, bool], bool] = lambda _op, recorded: recorded,
    complete_from_us: int | None = None,
) -> ReplayResult:
    """`calls` and `exposures` sorted by time, from `since_us` less the rules' longest window
    (or from `complete_from_us` when the read was cut: older history counts as missing)."""
    shape = Shape()
    for r in rules:
        shape = shape.union(r.shape)
    floor = complete_from_us if complete_from_us is not None else since_us - shape.retention_us
    window = Window(shape=shape, floor_us=max(floor, 1), cap=10**9)
    window.live_rows = dict(live_rows or {})
    result = ResultBuilder(limit, only_denied, [r.name for r in rules])
    points = sorted(
        (c for c in calls if since_us <= c.started_us < until_us and gated(c.event.op) and c.error_code not in PRE_GATE_CODES),
        key=lambda c: c.started_us,
    )
    result.r.calls = len(points)
    ei = xi = 0
    for call in points:
        now = call.started_us
        # Past-only: everything recorded strictly before the call started, nothing after.
        while ei < len(calls) and calls[ei].event.ts < now:
            window.add_event(calls[ei].event)
            ei += 1
        while xi < len(exposures) and exposures[xi].ts < now:
            window.add_exposure(exposures[xi])
            xi += 1
        ev = call.event
        if agent and (ev.agent or ev.subject) != agent:
            continue
        if not any(r.applies(ev.op) for r in rules):
            continue
        ctx = EvalContext(window, Caller(ev.subject, ev.agent, ev.user, ev.session), now, ev.args)
        verdict = evaluate(
            rules,
            ctx,
            op=ev.op,
            write_shaped=write_shaped(ev.op, call.write_shaped),
            deployment_mode=deployment_mode,
            mode_override=mode_override,
        )
        result.add(call, verdict)
    return result.r


class ResultBuilder:
    def __init__(self, limit: int, only_denied: bool, names: list[str]) -> None:
        self.r = ReplayResult(by_rule={n: RuleCount() for n in names})
        self.limit = limit
        self.only_denied = only_denied

    def add(self, call: RecordedCall, v: Verdict) -> None:
        r = self.r
        r.evaluated += 1
        if v.decision == "deny":
            r.denied += 1
        else:
            r.allowed += 1
        if v.would_enforce:
            r.would_enforce += 1
            if call.event.ok:
                r.newly_denied += 1
        if v.errors:
            r.errors += 1
        for o in v.rules:
            c = r.by_rule.setdefault(o.name, RuleCount())
            c.evaluated += 1
            c.denied += int(o.denies)
            c.errors += int(o.condition is None)
        if len(r.items) < self.limit and (not self.only_denied or v.decision == "deny" or v.errors):
            r.items.append(ReplayItem(call, v))

"""Building blocks for the policy unit tests: a rule from JSON, a window of events at chosen
instants, and one evaluation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from loom_policy.domain.compiler import Caller, CompiledRule, EvalContext, compile_rule
from loom_policy.domain.evaluator import evaluate
from loom_policy.domain.history import Event, Exposure, Shape, Window
from loom_policy.domain.model import Verdict
from loom_policy.domain.parser import parse_rule
from loom_policy.domain.timeutil import US

T0 = 1_750_000_000 * US  # an instant well past the epoch, so windows never reach before 0
CALLER = Caller("user:ann", agent="cleanup-bot", user="ann", session="s-1")


def rule(
    condition: Mapping[str, Any],
    *,
    effect: str = "forbid",
    actions: tuple[str, ...] = ("memory.delete",),
    mode: str = "inherit",
    cap: int = 86400,
) -> CompiledRule:
    r, _ = parse_rule(
        {"name": "r", "effect": effect, "actions": list(actions), "condition": dict(condition), "mode": mode}, max_window_seconds=cap
    )
    return compile_rule(r)


def ev(
    at_s: float,
    op: str,
    *,
    subject: str = "user:ann",
    agent: str = "cleanup-bot",
    user: str = "ann",
    session: str = "s-1",
    ok: bool = True,
    **args: str,
) -> Event:
    return Event(T0 + int(at_s * US), subject, agent, user, session, op, ok, dict(args), request_id=f"r{at_s}{op}")


def shown(
    at_s: float, key: str, *, subject: str = "user:ann", agent: str = "cleanup-bot", op: str = "memory.get", kind: str = "memory"
) -> Exposure:
    return Exposure(T0 + int(at_s * US), subject, agent, "ann", "s-1", op, kind, key)


def window(
    rules: list[CompiledRule],
    events: Sequence[Event] = (),
    exposures: Sequence[Exposure] = (),
    *,
    cap: int = 200_000,
    floor_us: int = 1,
    live: dict[str, int] | None = None,
) -> Window:
    shape = Shape()
    for r in rules:
        shape = shape.union(r.shape)
    w = Window(shape=shape, floor_us=floor_us, cap=cap)
    for e in events:
        w.add_event(e)
    for x in exposures:
        w.add_exposure(x)
    w.live_rows = dict(live or {})
    return w


def check(
    rules: list[CompiledRule],
    w: Window,
    at_s: float,
    *,
    op: str = "memory.delete",
    caller: Caller = CALLER,
    args: Mapping[str, str] | None = None,
    write: bool = True,
    mode: str = "enforce",
) -> Verdict:
    ctx = EvalContext(w, caller, T0 + int(at_s * US), dict(args or {}))
    return evaluate(rules, ctx, op=op, write_shaped=write, deployment_mode=mode)


def holds(r: CompiledRule, w: Window, at_s: float, **kw: Any) -> bool | None:
    v = check([r], w, at_s, **kw)
    return v.rules[0].condition

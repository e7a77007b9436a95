"""The live gate's rule memo (compiler.CompiledRule.evaluate with EvalContext(memo=True)): an
answer is given again only while nothing it depends on changed. Each case evaluates with the
memo and without it, at the same instant over the same window, and wants the same answer."""

from __future__ import annotations

from collections.abc import Mapping

from loom_policy.domain.compiler import CompiledRule, EvalContext
from loom_policy.domain.evaluator import evaluate
from loom_policy.domain.history import Window
from loom_policy.domain.model import Verdict
from loom_policy.domain.reservations import PendingCall
from loom_policy.domain.timeutil import US

from .helpers import CALLER, T0, ev, rule, shown, window


def both(
    rules: list[CompiledRule], w: Window, at_s: float, *, args: Mapping[str, str] | None = None, pending: tuple[PendingCall, ...] = ()
) -> Verdict:
    """The verdict with the memo, checked against a fresh evaluation (no memo) at the same instant."""
    now = T0 + int(at_s * US)
    memo = evaluate(
        rules,
        EvalContext(w, CALLER, now, dict(args or {}), pending, memo=True),
        op="memory.delete",
        write_shaped=True,
        deployment_mode="enforce",
    )
    fresh = evaluate(
        rules, EvalContext(w, CALLER, now, dict(args or {}), pending), op="memory.delete", write_shaped=True, deployment_mode="enforce"
    )
    assert [(r.condition, [(x.holds, x.observed) for x in r.leaves]) for r in memo.rules] == [
        (r.condition, [(x.holds, x.observed) for x in r.leaves]) for r in fresh.rules
    ]
    return memo


def observed(v: Verdict) -> float:
    return v.rules[0].leaves[0].observed


def test_a_new_event_changes_the_answer() -> None:
    r = rule({"op": "count_within", "within": "1h", "operation": "memory.set", "cmp": "gte", "value": 2})
    w = window([r], [ev(0, "memory.set")])
    first = both([r], w, 10)
    again = both([r], w, 11)
    assert again.decision == "allow" and again.rules[0].leaves is first.rules[0].leaves  # the memo's answer
    w.add_event(ev(12, "memory.set"))
    assert both([r], w, 13).decision == "deny"


def test_an_event_leaving_the_window_changes_the_answer() -> None:
    r = rule({"op": "count_within", "within": "1m", "operation": "memory.*", "cmp": "gte", "value": 2})
    w = window([r], [ev(0, "memory.set"), ev(30, "memory.get")])
    assert observed(both([r], w, 40)) == 2
    assert observed(both([r], w, 59)) == 2
    assert observed(both([r], w, 60.5)) == 1  # the first event is a minute old: out
    assert observed(both([r], w, 91)) == 0


def test_an_event_at_or_after_the_instant_enters_when_time_reaches_it() -> None:
    r = rule({"op": "formerly", "within": "1h", "operation": "memory.get"})
    w = window([r], [ev(100, "memory.get")])  # recorded ahead of the instant evaluated (another replica's clock)
    assert both([r], w, 50).rules[0].condition is False
    assert both([r], w, 100).rules[0].condition is False  # the trace is past only
    assert both([r], w, 100.5).rules[0].condition is True


def test_a_series_created_after_the_answer_counts() -> None:
    r = rule({"op": "formerly", "within": "1h", "operation": "memory.get", "outcome": "failed"})
    w = window([r], [ev(0, "memory.set")])
    assert both([r], w, 10).rules[0].condition is False
    w.add_event(ev(11, "memory.get", ok=False))  # a series this principal did not have
    assert both([r], w, 12).rules[0].condition is True


def test_not_since_follows_a_new_anchor_and_its_expiry() -> None:
    r = rule({"op": "not_since", "within": "5m", "anchor": "task.claim", "operation": "task.heartbeat"})
    w = window([r], [ev(0, "task.claim"), ev(10, "task.heartbeat")])
    assert both([r], w, 20).rules[0].condition is False
    w.add_event(ev(30, "task.claim"))
    assert both([r], w, 40).rules[0].condition is True
    assert both([r], w, 331).rules[0].condition is False  # the anchor left the window


def test_bound_arguments_are_part_of_the_key() -> None:
    r = rule({"op": "formerly", "within": "1h", "operation": "memory.get", "args_equal": {"memory_key": "$args.memory_key"}})
    w = window([r], [ev(0, "memory.get", memory_key="a")])
    assert both([r], w, 10, args={"memory_key": "a"}).rules[0].condition is True
    assert both([r], w, 11, args={"memory_key": "b"}).rules[0].condition is False
    assert both([r], w, 12, args={"memory_key": "a"}).rules[0].condition is True


def test_calls_in_flight_count_whatever_was_remembered() -> None:
    r = rule({"op": "count_within", "within": "1h", "operation": "memory.set", "cmp": "gte", "value": 2})
    w = window([r], [ev(0, "memory.set")])
    assert both([r], w, 10).decision == "allow"
    flight = PendingCall("r-x", "memory.set", T0 + 11 * US, CALLER.subject, CALLER.agent, CALLER.user, CALLER.session)
    assert both([r], w, 12, pending=(flight,)).decision == "deny"
    assert both([r], w, 13).decision == "allow"


def test_breadth_follows_new_keys_and_their_expiry() -> None:
    r = rule({"op": "breadth_within", "within": "1m", "cmp": "gte", "value": 2})
    w = window([r], exposures=[shown(0, "k1")])
    assert observed(both([r], w, 10)) == 1
    w.add_exposure(shown(20, "k2"))
    assert observed(both([r], w, 30)) == 2
    assert observed(both([r], w, 61)) == 1


def test_eviction_moves_the_floor() -> None:
    r = rule({"op": "formerly", "within": "1h", "operation": "memory.get"})
    w = window([r], [ev(0, "memory.get")])
    assert both([r], w, 100).rules[0].condition is True
    w.evict(T0 + 50 * US)
    assert both([r], w, 100).rules[0].condition is None  # the hour reaches before the new floor


def test_a_call_in_flight_the_rule_does_not_count_leaves_the_memo_in_use() -> None:
    r = rule({"op": "count_within", "within": "1h", "operation": "memory.set", "cmp": "gte", "value": 2})
    w = window([r], [ev(0, "memory.set")])
    first = both([r], w, 10)
    other = PendingCall("r-y", "memory.get", T0 + 11 * US, CALLER.subject, CALLER.agent, CALLER.user, CALLER.session)
    again = both([r], w, 12, pending=(other,))
    assert again.decision == "allow" and again.rules[0].leaves is first.rules[0].leaves

"""A count kept up to date from the events appended to its series (compiler.CompiledLeaf.extend,
on the live gate's memo path): whatever happens to the window between two calls, the values the
gate reports and records equal a fresh count at the same instant."""

from __future__ import annotations

import random
from typing import Any

from loom_policy.domain.compiler import SLACK_FOREVER, CompiledRule, EvalContext, compare
from loom_policy.domain.evaluator import evaluate
from loom_policy.domain.history import ArgTable, Series, Window
from loom_policy.domain.model import LeafOutcome, Verdict
from loom_policy.domain.reservations import PendingCall
from loom_policy.domain.standing import decide
from loom_policy.domain.timeutil import US

from .helpers import CALLER, T0, ev, rule, shown, window

LEAVES = [
    {"op": "count_within", "within": "1m", "operation": "memory.set", "cmp": "gte", "value": 3},
    {"op": "count_within", "within": "1m", "operation": "memory.*", "cmp": "gt", "value": 5},
    {"op": "count_within", "within": "30s", "operation": "*", "outcome": "any", "cmp": "lt", "value": 4},
    {"op": "count_within", "within": "1m", "operation": "memory.get", "outcome": "failed", "cmp": "eq", "value": 2},
    {"op": "formerly", "within": "20s", "operation": "memory.get"},
]
OPS = ["memory.set", "memory.get", "task.create"]


def values(v: Verdict) -> list[tuple[object, ...]]:
    """Everything a decision row records of each rule and leaf."""
    return [(r.condition, r.denies, r.error, [(x.holds, x.observed, x.last_us, x.error, x.threshold) for x in r.leaves]) for r in v.rules]


def memo_and_fresh(rules: list[CompiledRule], w: Window, now: int) -> tuple[Verdict, Verdict]:
    memo = evaluate(rules, EvalContext(w, CALLER, now, {}, memo=True), op="memory.delete", write_shaped=True, deployment_mode="enforce")
    fresh = evaluate(rules, EvalContext(w, CALLER, now, {}), op="memory.delete", write_shaped=True, deployment_mode="enforce")
    return memo, fresh


def test_appended_events_extend_the_count() -> None:
    r = rule(LEAVES[0])
    w = window([r], [ev(0, "memory.set")])
    now = T0 + 1 * US
    memo, fresh = memo_and_fresh([r], w, now)
    assert values(memo) == values(fresh)
    s = w.series_for(CALLER.pkey("agent"))[("memory.set", True)]  # type: ignore[index]
    rewrites = s.rewrites
    for i in range(2, 6):
        w.add_event(ev(i, "memory.set"))
        memo, fresh = memo_and_fresh([r], w, T0 + i * US + 1)
        assert values(memo) == values(fresh)
        assert memo.rules[0].leaves[0].observed == i and memo.rules[0].leaves[0].last_us == T0 + i * US
    assert s.rewrites == rewrites  # appends only: each answer above was extended, not counted again
    assert memo.decision == "deny"


def test_an_insert_before_the_end_is_a_rewrite() -> None:
    r = rule(LEAVES[0])
    w = window([r], [ev(0, "memory.set"), ev(10, "memory.set")])
    memo, fresh = memo_and_fresh([r], w, T0 + 11 * US)
    s = w.series_for(CALLER.pkey("agent"))[("memory.set", True)]  # type: ignore[index]
    rewrites = s.rewrites
    w.add_event(ev(5, "memory.set"))  # another replica's row, older than the last one kept
    assert s.rewrites == rewrites + 1
    memo, fresh = memo_and_fresh([r], w, T0 + 12 * US)
    assert values(memo) == values(fresh) and memo.rules[0].leaves[0].observed == 3


def test_a_truncated_series_is_counted_afresh() -> None:
    r = rule(LEAVES[0])
    w = window([r], [ev(i, "memory.set") for i in range(4)], cap=3)
    memo, fresh = memo_and_fresh([r], w, T0 + 5 * US)
    assert values(memo) == values(fresh)
    for i in range(5, 12):
        w.add_event(ev(i, "memory.set"))  # cut back to the cap from the front as it grows
        memo, fresh = memo_and_fresh([r], w, T0 + i * US + 1)
        assert values(memo) == values(fresh)


def test_an_event_ahead_of_the_instant_waits_for_it() -> None:
    r = rule(LEAVES[0])
    w = window([r], [ev(0, "memory.set")])
    memo_and_fresh([r], w, T0 + 1 * US)
    w.add_event(ev(30, "memory.set"))  # recorded ahead of the instant (another replica's clock)
    memo, fresh = memo_and_fresh([r], w, T0 + 2 * US)
    assert values(memo) == values(fresh) and memo.rules[0].leaves[0].observed == 1
    memo, fresh = memo_and_fresh([r], w, T0 + 31 * US)
    assert values(memo) == values(fresh) and memo.rules[0].leaves[0].observed == 2


def test_random_histories_match_a_fresh_count() -> None:
    """Events appended, inserted out of order, failed and ahead of time; time moving on past
    windows' ends; eviction and the cap: after each step, every leaf kind's values equal a fresh
    count's."""
    rng = random.Random(35)
    for trial in range(20):
        rules = [rule(c) for c in LEAVES]
        w = window(rules, cap=rng.choice([5, 8, 1000]))
        t = 0.0
        for _ in range(150):
            step = rng.random()
            if step < 0.6:
                at = t - rng.choice([0.0, 0.0, 0.0, rng.uniform(0, 40)]) + (rng.uniform(0, 3) if rng.random() < 0.05 else 0.0)
                w.add_event(ev(at, rng.choice(OPS), ok=rng.random() < 0.8))
            elif step < 0.65:
                w.evict(T0 + int((t - 60) * US))
            t += rng.choice([0.001, 0.5, 2.0, 7.0])
            memo, fresh = memo_and_fresh(rules, w, T0 + int(t * US))
            assert values(memo) == values(fresh), (trial, t)


def standing_and_fresh(
    kept: dict[Any, Any], rules: list[CompiledRule], w: Window, now: int, grew: list[int] | None = None
) -> tuple[Verdict, Verdict]:
    """The standing verdict, settled as the gate settles it before reading its rules (`grew`
    gets the positions of the rules that stood as their counts grew), and a fresh one."""
    kept_v = decide(
        kept, rules, EvalContext(w, CALLER, now, {}, memo=True), op="memory.delete", write_shaped=True, deployment_mode="enforce"
    )
    assert kept_v is not None
    if grew is not None:
        grew[:] = [i for i, _, _ in kept_v.grown]
    kept_v.settle()
    fresh = evaluate(rules, EvalContext(w, CALLER, now, {}), op="memory.delete", write_shaped=True, deployment_mode="enforce")
    return kept_v, fresh


def verdict_values(v: Verdict) -> tuple[object, ...]:
    return (v.decision, v.would_enforce, v.determining_rules, [(e.rule, e.path, e.message) for e in v.errors], values(v))


def test_a_standing_verdict_asks_again_only_the_rules_whose_history_moved() -> None:
    rules = [rule(c, mode="enforce") for c in LEAVES]
    # The task.create series exists already: a new series is a new generation (everything asked again).
    w = window(rules, [ev(0, "memory.set"), ev(1, "memory.get"), ev(1.5, "task.create")])
    kept: dict = {}  # type: ignore[type-arg]
    first, fresh = standing_and_fresh(kept, rules, w, T0 + 2 * US)
    assert verdict_values(first) == verdict_values(fresh)
    again, _ = standing_and_fresh(kept, rules, w, T0 + 3 * US)
    assert again.rules is first.rules  # nothing moved: every outcome stands, no list rebuilt
    w.add_event(ev(3.5, "task.create"))  # read by the `*` leaf only
    grew: list[int] = []
    moved, fresh = standing_and_fresh(kept, rules, w, T0 + 4 * US, grew)
    assert verdict_values(moved) == verdict_values(fresh)
    assert [a is b for a, b in zip(moved.rules, first.rules, strict=True)] == [True, True, False, True, True]
    assert grew == []  # 3 -> 4 flips `lt 4`: asked again
    w.add_event(ev(4.5, "task.create"))  # the `*` count grows again; its rule's denial stays
    grown, fresh = standing_and_fresh(kept, rules, w, T0 + 5 * US, grew)
    # `lt 4` failing at 4 fails however many more come: the rule stood, its count built after.
    assert verdict_values(grown) == verdict_values(fresh) and grew == [2]
    assert grown.rules[2] is not moved.rules[2]
    # No rule's denial or errors changed: the lists read from them are the ones already built.
    assert grown.determining_rules is moved.determining_rules and grown.errors is moved.errors


def test_random_histories_match_a_fresh_verdict() -> None:
    """As test_random_histories_match_a_fresh_count, for the standing verdict of every leaf
    kind's rule together (plus one not, one any, one all, and a breadth)."""
    rng = random.Random(1335)
    conditions = [
        *LEAVES,
        {"op": "not", "of": LEAVES[1]},
        {"op": "any", "of": [LEAVES[0], LEAVES[2]]},
        {"op": "all", "of": [LEAVES[3], LEAVES[4]]},
        {"op": "not_since", "within": "30s", "anchor": "memory.get", "operation": "memory.set"},
        {"op": "breadth_within", "within": "20s", "cmp": "gte", "value": 3},
    ]
    grew: list[int] = []
    stood = 0
    for trial in range(15):
        rules = [rule(c, mode=rng.choice(["enforce", "shadow"])) for c in conditions]
        w = window(rules, cap=rng.choice([5, 8, 1000]))
        kept: dict = {}  # type: ignore[type-arg]
        t = 0.0
        for _ in range(150):
            step = rng.random()
            if step < 0.55:
                at = t - rng.choice([0.0, 0.0, 0.0, rng.uniform(0, 40)]) + (rng.uniform(0, 3) if rng.random() < 0.05 else 0.0)
                w.add_event(ev(at, rng.choice(OPS), ok=rng.random() < 0.8))
            elif step < 0.65:
                w.add_exposure(shown(t - rng.uniform(0, 5), f"k{rng.randrange(6)}"))
            elif step < 0.7:
                w.evict(T0 + int((t - 60) * US))
            t += rng.choice([0.001, 0.5, 2.0, 7.0])
            kept_v, fresh = standing_and_fresh(kept, rules, w, T0 + int(t * US), grew)
            assert verdict_values(kept_v) == verdict_values(fresh), (trial, t)
            stood += bool(grew)
    assert stood > 100  # the verdicts compared include many whose rules stood as their counts grew


def test_no_standing_verdict_where_an_answer_depends_on_more_than_the_caller() -> None:
    bound = rule({"op": "formerly", "within": "1h", "operation": "memory.get", "args_equal": {"memory_key": "$args.memory_key"}})
    fraction = rule({"op": "breadth_within", "within": "1h", "cmp": "gt", "fraction": 0.5})
    plain = rule(LEAVES[0])
    w = window([bound, fraction, plain], [ev(0, "memory.get", memory_key="a")], live={"memory": 4})
    kept: dict = {}  # type: ignore[type-arg]
    now = T0 + US
    for rules in ([plain, bound], [fraction, plain]):
        ctx = EvalContext(w, CALLER, now, {"memory_key": "a"}, memo=True)
        assert decide(kept, rules, ctx, op="memory.delete", write_shaped=True, deployment_mode="enforce") is None
    in_flight = (PendingCall("q1", "memory.set", now - 1, CALLER.subject, CALLER.agent, CALLER.user, CALLER.session, {}),)
    ctx = EvalContext(w, CALLER, now, {}, in_flight, memo=True)
    assert decide(kept, [plain], ctx, op="memory.delete", write_shaped=True, deployment_mode="enforce") is None
    assert not kept


def test_rewrites_counts_every_change_but_an_append() -> None:
    s = Series(ArgTable(frozenset()))
    s.add(10, {}, 0)
    s.add(20, {}, 0)
    assert s.rewrites == 0 and s.version == 2
    s.add(15, {}, 0)
    assert s.rewrites == 1
    s.drop_before(12)
    assert s.rewrites == 2 and list(s.times) == [15, 20]
    s.add(30, {}, 0)
    s.truncate(2)
    assert s.rewrites == 4 and list(s.times) == [20, 30] and s.truncated_upto == 15


def test_a_count_holds_as_it_did_for_as_many_appended_events_as_its_slack_and_flips_after() -> None:
    """CompiledLeaf.slack: for every comparison, threshold (a whole number, as the language
    takes) and count, adding up to `slack` events leaves whether the leaf holds unchanged, and
    one more changes it (unless it never can)."""
    for cmp in ("gt", "gte", "lt", "lte", "eq"):
        for threshold in (0, 1, 2, 3, 5):
            compiled = rule({"op": "count_within", "within": "1m", "operation": "memory.set", "cmp": cmp, "value": threshold})._order[0]
            for count in range(1, 8):
                holds = compare(cmp, count, threshold, True)
                out = LeafOutcome("condition", "count_within", holds, float(count), cmp, float(threshold))
                slack = compiled.slack(out)
                if slack == SLACK_FOREVER:
                    assert all(compare(cmp, count + k, threshold, True) == holds for k in range(50)), (cmp, threshold, count)
                    continue
                assert all(compare(cmp, count + k, threshold, True) == holds for k in range(slack + 1)), (cmp, threshold, count, slack)
                assert compare(cmp, count + slack + 1, threshold, True) != holds, (cmp, threshold, count, slack)
    formerly = rule({"op": "formerly", "within": "1m", "operation": "memory.set"})._order[0]
    assert formerly.slack(LeafOutcome("condition", "formerly", True, 1.0)) == SLACK_FOREVER
    assert formerly.slack(LeafOutcome("condition", "formerly", False, 0.0)) == 0
    undecided = LeafOutcome("condition", "count_within", None, 3.0, "gt", 5.0)
    assert rule(LEAVES[1])._order[0].slack(undecided) == 0

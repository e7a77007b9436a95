"""Every leaf, operator, combinator, key choice and `$args` binding of the rule language,
evaluated over an in-memory history at chosen instants (no I/O)."""

from __future__ import annotations

from typing import Any

import pytest
from loom_policy.domain.compiler import Caller
from loom_policy.domain.timeutil import US

from .helpers import CALLER, T0, check, ev, holds, rule, shown, window

# --- formerly -------------------------------------------------------------------------------


def test_formerly_holds_with_a_matching_event_in_the_window() -> None:
    r = rule({"op": "formerly", "within": "1h", "operation": "memory.get"})
    w = window([r], [ev(0, "memory.get")])
    assert holds(r, w, 60) is True


def test_formerly_does_not_hold_without_one() -> None:
    r = rule({"op": "formerly", "within": "1h", "operation": "memory.get"})
    w = window([r], [ev(0, "memory.set")])
    assert holds(r, w, 60) is False


def test_formerly_counts_an_event_exactly_at_the_window_edge() -> None:
    r = rule({"op": "formerly", "within": "1h", "operation": "memory.get"})
    w = window([r], [ev(0, "memory.get")])
    # The window is [now - within, now): an event exactly `within` ago is inside it...
    assert holds(r, w, 3600) is True
    # ...and one microsecond later it has left.
    assert check([r], w, 3600 + 1 / US).rules[0].condition is False


def test_formerly_is_past_only_an_event_at_the_current_instant_is_not_in_the_trace() -> None:
    r = rule({"op": "formerly", "within": "1h", "operation": "memory.get"})
    w = window([r], [ev(10, "memory.get")])
    assert holds(r, w, 10) is False
    assert holds(r, w, 10 + 1 / US) is True


def test_formerly_with_a_glob_matches_every_op_it_names() -> None:
    r = rule({"op": "formerly", "within": "1h", "operation": "memory.*"})
    assert holds(r, window([r], [ev(0, "memory.search")]), 1) is True
    assert holds(r, window([r], [ev(0, "task.create")]), 1) is False


def test_formerly_args_equal_a_literal() -> None:
    r = rule({"op": "formerly", "within": "1h", "operation": "memory.get", "args_equal": {"memory_key": "notes/old"}})
    assert holds(r, window([r], [ev(0, "memory.get", memory_key="notes/old")]), 1) is True
    assert holds(r, window([r], [ev(0, "memory.get", memory_key="notes/new")]), 1) is False


def test_formerly_args_equal_binds_the_current_calls_argument() -> None:
    r = rule({"op": "formerly", "within": "1h", "operation": "memory.get", "args_equal": {"memory_key": "$args.memory_key"}})
    w = window([r], [ev(0, "memory.get", memory_key="notes/old")])
    assert holds(r, w, 1, args={"memory_key": "notes/old"}) is True
    assert holds(r, w, 1, args={"memory_key": "notes/other"}) is False


def test_args_binding_to_an_argument_the_call_lacks_is_an_evaluation_error() -> None:
    r = rule({"op": "formerly", "within": "1h", "operation": "memory.get", "args_equal": {"memory_key": "$args.memory_key"}})
    v = check([r], window([r], [ev(0, "memory.get", memory_key="k")]), 1, args={})
    assert v.rules[0].condition is None
    assert [(e.rule, e.path) for e in v.errors] == [("r", "condition")]
    assert "$args.memory_key" in v.errors[0].message


def test_args_equal_on_several_fields_needs_all_of_them() -> None:
    r = rule(
        {"op": "formerly", "within": "1h", "operation": "memory.get", "args_equal": {"memory_key": "$args.memory_key", "scope": "team"}}
    )
    w = window([r], [ev(0, "memory.get", memory_key="k", scope="me"), ev(1, "memory.get", memory_key="j", scope="team")])
    assert holds(r, w, 2, args={"memory_key": "k"}) is False
    w.add_event(ev(1.5, "memory.get", memory_key="k", scope="team"))
    assert holds(r, w, 2, args={"memory_key": "k"}) is True


def test_args_equal_literals_compare_in_the_ledgers_form() -> None:
    r = rule({"op": "formerly", "within": "1h", "operation": "task.list", "args_equal": {"limit": 5, "mine": True}})
    w = window([r], [ev(0, "task.list", limit="5", mine="true")])
    assert holds(r, w, 1) is True


def test_failed_calls_do_not_count_unless_asked() -> None:
    failed = [ev(0, "memory.get", ok=False)]
    default = rule({"op": "formerly", "within": "1h", "operation": "memory.get"})
    assert holds(default, window([default], failed), 1) is False
    for outcome in ("failed", "any"):
        r = rule({"op": "formerly", "within": "1h", "operation": "memory.get", "outcome": outcome})
        assert holds(r, window([r], failed), 1) is True


# --- count_within ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cmp", "value", "expected"),
    [
        ("gt", 2, True),
        ("gt", 3, False),
        ("gte", 3, True),
        ("gte", 4, False),
        ("lt", 4, True),
        ("lt", 3, False),
        ("lte", 3, True),
        ("lte", 2, False),
        ("eq", 3, True),
        ("eq", 2, False),
    ],
)
def test_count_within_compares_the_count_of_three_events(cmp: str, value: int, expected: bool) -> None:
    r = rule({"op": "count_within", "within": "15m", "operation": "memory.set", "cmp": cmp, "value": value})
    w = window([r], [ev(i, "memory.set") for i in range(3)] + [ev(1, "memory.get")])
    v = check([r], w, 60)
    assert v.rules[0].condition is expected
    assert v.rules[0].leaves[0].observed == 3


def test_count_within_counts_only_the_window() -> None:
    r = rule({"op": "count_within", "within": "30s", "operation": "memory.set", "cmp": "eq", "value": 2})
    w = window([r], [ev(0, "memory.set"), ev(40, "memory.set"), ev(69, "memory.set"), ev(70, "memory.set")])
    # At 70: [40, 70) holds 40 and 69; 70 itself is the present, 0 has left.
    assert holds(r, w, 70) is True


def test_count_within_with_args_equal_counts_matching_events_only() -> None:
    r = rule(
        {
            "op": "count_within",
            "within": "1h",
            "operation": "memory.set",
            "args_equal": {"memory_key": "$args.memory_key"},
            "cmp": "gte",
            "value": 2,
        }
    )
    w = window([r], [ev(0, "memory.set", memory_key="a"), ev(1, "memory.set", memory_key="a"), ev(2, "memory.set", memory_key="b")])
    assert holds(r, w, 3, args={"memory_key": "a"}) is True
    assert holds(r, w, 3, args={"memory_key": "b"}) is False


# --- not_since ------------------------------------------------------------------------------


def test_not_since_holds_when_the_named_event_has_not_followed_the_latest_anchor() -> None:
    r = rule({"op": "not_since", "within": "1h", "anchor": "task.claim", "operation": "task.heartbeat"})
    w = window([r], [ev(0, "task.claim"), ev(5, "task.heartbeat"), ev(10, "task.claim")])
    v = check([r], w, 20)
    assert v.rules[0].condition is True
    assert v.rules[0].leaves[0].last_us == T0 + 10 * US


def test_not_since_does_not_hold_once_the_named_event_happened() -> None:
    r = rule({"op": "not_since", "within": "1h", "anchor": "task.claim", "operation": "task.heartbeat"})
    w = window([r], [ev(0, "task.claim"), ev(5, "task.heartbeat")])
    v = check([r], w, 20)
    assert v.rules[0].condition is False
    assert v.rules[0].leaves[0].observed == 1


def test_not_since_does_not_hold_without_an_anchor_in_the_window() -> None:
    r = rule({"op": "not_since", "within": "1m", "anchor": "task.claim", "operation": "task.heartbeat"})
    assert holds(r, window([r], [ev(0, "task.claim")]), 61) is False
    assert holds(r, window([r], []), 1) is False


def test_not_since_anchor_args_filter_the_anchor() -> None:
    r = rule(
        {
            "op": "not_since",
            "within": "1h",
            "anchor": "task.claim",
            "anchor_args_equal": {"task_id": "$args.task_id"},
            "operation": "task.heartbeat",
            "args_equal": {"task_id": "$args.task_id"},
        }
    )
    w = window([r], [ev(0, "task.claim", task_id="t1"), ev(1, "task.heartbeat", task_id="t2")])
    assert holds(r, w, 2, args={"task_id": "t1"}) is True
    assert holds(r, w, 2, args={"task_id": "t2"}) is False  # no claim of t2


# --- breadth_within -------------------------------------------------------------------------


def test_breadth_within_counts_distinct_keys_shown() -> None:
    r = rule({"op": "breadth_within", "within": "1h", "cmp": "gt", "value": 2})
    w = window([r], exposures=[shown(0, "a"), shown(1, "a"), shown(2, "b")])
    v = check([r], w, 10)
    assert v.rules[0].leaves[0].observed == 2
    assert v.rules[0].condition is False
    w.add_exposure(shown(3, "c"))
    assert holds(r, w, 10) is True


def test_breadth_within_window_edge_and_reshown_keys() -> None:
    r = rule({"op": "breadth_within", "within": "30s", "cmp": "eq", "value": 1})
    w = window([r], exposures=[shown(0, "a"), shown(5, "b"), shown(20, "a")])
    # At 35: [5, 35) holds b (at its edge) and a (re-shown at 20).
    assert check([r], w, 35).rules[0].leaves[0].observed == 2
    assert holds(r, w, 35 + 1 / US) is True  # b has left


def test_breadth_within_fraction_of_the_namespaces_live_rows() -> None:
    r = rule({"op": "breadth_within", "within": "1h", "cmp": "gte", "fraction": 0.5})
    exposures = [shown(i, f"k{i}") for i in range(5)]
    assert holds(r, window([r], exposures=exposures, live={"memory": 10}), 10) is True
    assert holds(r, window([r], exposures=exposures, live={"memory": 11}), 10) is False
    v = check([r], window([r], exposures=exposures, live={"memory": 10}), 10)
    assert v.rules[0].leaves[0].threshold == 5.0


def test_breadth_within_fraction_without_a_live_count_is_an_evaluation_error() -> None:
    r = rule({"op": "breadth_within", "within": "1h", "cmp": "gte", "fraction": 0.5})
    v = check([r], window([r], exposures=[shown(0, "a")]), 10)
    assert v.rules[0].condition is None
    assert "live memory row count" in v.errors[0].message


def test_breadth_within_defaults_to_the_actor_key_across_labels() -> None:
    r = rule({"op": "breadth_within", "within": "1h", "cmp": "eq", "value": 2})
    w = window([r], exposures=[shown(0, "a", agent="bot-1"), shown(1, "b", agent="bot-2"), shown(2, "c", subject="user:bob")])
    assert holds(r, w, 10) is True
    by_agent = rule({"op": "breadth_within", "within": "1h", "key": "agent", "cmp": "eq", "value": 1})
    assert holds(by_agent, window([by_agent], exposures=[shown(0, "a", agent="cleanup-bot"), shown(1, "b", agent="bot-2")]), 10) is True


def test_breadth_within_operation_filters_the_exposing_op() -> None:
    r = rule({"op": "breadth_within", "within": "1h", "operation": "memory.search", "cmp": "eq", "value": 1})
    w = window([r], exposures=[shown(0, "a", op="memory.search"), shown(1, "b", op="memory.get")])
    assert holds(r, w, 10) is True
    glob = rule({"op": "breadth_within", "within": "1h", "operation": "memory.*", "cmp": "eq", "value": 2})
    assert (
        holds(
            glob,
            window([glob], exposures=[shown(0, "a", op="memory.search"), shown(1, "b", op="memory.get"), shown(2, "a", op="memory.get")]),
            10,
        )
        is True
    )


# --- keys and the caller pin ----------------------------------------------------------------


def test_key_agent_is_the_default_and_reads_only_that_agent_label() -> None:
    r = rule({"op": "formerly", "within": "1h", "operation": "memory.get"})
    assert holds(r, window([r], [ev(0, "memory.get", agent="other-bot")]), 1) is False
    assert holds(r, window([r], [ev(0, "memory.get")]), 1) is True


def test_key_agent_without_a_label_is_the_subject() -> None:
    r = rule({"op": "formerly", "within": "1h", "operation": "memory.get"})
    w = window([r], [ev(0, "memory.get", agent="")])
    assert holds(r, w, 1, caller=Caller("user:ann")) is True
    assert holds(r, w, 1, caller=Caller("user:ann", agent="cleanup-bot")) is False


@pytest.mark.parametrize(("key", "other"), [("session", {"session": "s-2"}), ("user", {"user": "bob"})])
def test_key_session_and_user_read_only_that_label(key: str, other: dict[str, str]) -> None:
    r = rule({"op": "formerly", "within": "1h", "operation": "memory.get", "key": key})
    assert holds(r, window([r], [ev(0, "memory.get", agent="another-bot")]), 1) is True  # same session/user
    assert holds(r, window([r], [ev(0, "memory.get", session=other.get("session", "s-1"), user=other.get("user", "ann"))]), 1) is False


def test_key_actor_reads_every_label_of_the_subject() -> None:
    r = rule({"op": "count_within", "within": "1h", "operation": "memory.get", "key": "actor", "cmp": "eq", "value": 3})
    w = window([r], [ev(0, "memory.get", agent="a"), ev(1, "memory.get", session="x"), ev(2, "memory.get", user="u")])
    assert holds(r, w, 5) is True


@pytest.mark.parametrize("key", ["agent", "session", "user", "actor"])
def test_caller_pin_another_subjects_events_never_count_whatever_the_key(key: str) -> None:
    r = rule({"op": "count_within", "within": "1h", "operation": "memory.get", "key": key, "cmp": "gt", "value": 0})
    # Same agent, user and session labels, another verified subject.
    w = window([r], [ev(i, "memory.get", subject="user:mallory") for i in range(5)])
    v = check([r], w, 10)
    assert v.rules[0].condition is False
    assert v.rules[0].leaves[0].observed == 0


# --- combinators ----------------------------------------------------------------------------


def test_all_any_not() -> None:
    got = {"op": "formerly", "within": "1h", "operation": "memory.get"}
    setx = {"op": "formerly", "within": "1h", "operation": "memory.set"}
    events = [ev(0, "memory.get")]
    cases: list[tuple[dict[str, Any], bool | None]] = [
        ({"op": "all", "of": [got, setx]}, False),
        ({"op": "any", "of": [got, setx]}, True),
        ({"op": "not", "of": setx}, True),
        ({"op": "not", "of": [got]}, False),
        ({"op": "all", "of": [got, {"op": "not", "of": setx}]}, True),
    ]
    for cond, expected in cases:
        r = rule(cond)
        assert holds(r, window([r], events), 1) is expected, cond


def test_every_leaf_is_reported_with_its_path() -> None:
    r = rule(
        {
            "op": "all",
            "of": [
                {"op": "formerly", "within": "1h", "operation": "a.b"},
                {"op": "any", "of": [{"op": "formerly", "within": "1h", "operation": "c.d"}]},
            ],
        }
    )
    v = check([r], window([r], []), 1)
    assert [leaf.path for leaf in v.rules[0].leaves] == ["condition.of[0]", "condition.of[1].of[0]"]


def test_combinators_follow_three_valued_logic_with_undecided_leaves() -> None:
    bad = {"op": "formerly", "within": "1h", "operation": "memory.get", "args_equal": {"k": "$args.missing"}}
    yes = {"op": "formerly", "within": "1h", "operation": "memory.set"}
    no = {"op": "formerly", "within": "1h", "operation": "memory.list"}
    events = [ev(0, "memory.set")]
    cases: list[tuple[dict[str, Any], bool | None]] = [
        ({"op": "any", "of": [bad, yes]}, True),
        ({"op": "all", "of": [bad, no]}, False),
        ({"op": "all", "of": [bad, yes]}, None),
        ({"op": "not", "of": bad}, None),
    ]
    for cond, expected in cases:
        r = rule(cond)
        assert holds(r, window([r], events), 1) is expected, cond


# --- window cap and truncation --------------------------------------------------------------


def test_within_is_capped_by_the_max_window() -> None:
    r = rule({"op": "formerly", "within": "7d", "operation": "memory.get"}, cap=86400)
    assert r.definition.condition.within_seconds == 86400  # type: ignore[union-attr]
    w = window([r], [ev(0, "memory.get")])
    assert holds(r, w, 2 * 86400) is False  # two days ago: outside the capped window
    assert holds(r, w, 86400) is True


def test_a_truncated_series_decides_only_what_its_kept_events_decide() -> None:
    gt = rule({"op": "count_within", "within": "1h", "operation": "memory.set", "cmp": "gt", "value": 5})
    lt = rule({"op": "count_within", "within": "1h", "operation": "memory.set", "cmp": "lt", "value": 5})
    eq = rule({"op": "count_within", "within": "1h", "operation": "memory.set", "cmp": "eq", "value": 30})
    w = window([gt], [ev(i, "memory.set") for i in range(25)], cap=10)
    assert w.stats()["events"] <= 11
    assert holds(gt, w, 100) is True  # at least 10 kept: more than 5 whatever was dropped
    assert holds(lt, w, 100) is False
    v = check([eq], w, 100)
    assert v.rules[0].condition is None and "truncated" in v.errors[0].message


def test_a_glob_leaf_counts_events_that_arrive_after_its_first_evaluation() -> None:
    # The view a glob (or outcome `any`) leaf reads is built on first use, then kept as events arrive.
    r = rule({"op": "count_within", "within": "1h", "operation": "memory.*", "outcome": "any", "cmp": "gte", "value": 4})
    w = window([r], [ev(0, "memory.get"), ev(1, "memory.set", ok=False)])
    assert check([r], w, 10).rules[0].leaves[0].observed == 2
    w.add_event(ev(20, "memory.search"))
    w.add_event(ev(21, "memory.get", ok=False, memory_key="k"))
    w.add_event(ev(22, "task.create"))  # another op: not counted
    out = check([r], w, 30).rules[0]
    assert out.leaves[0].observed == 4 and out.condition is True


def test_a_glob_leaf_drops_what_eviction_and_the_cap_drop() -> None:
    gt = rule({"op": "count_within", "within": "1d", "operation": "memory.*", "cmp": "gt", "value": 5})
    eq = rule({"op": "count_within", "within": "1d", "operation": "memory.*", "cmp": "eq", "value": 30})
    w = window([gt], [ev(i, "memory.get") for i in range(3)], cap=10)
    assert check([gt], w, 100).rules[0].leaves[0].observed == 3
    for i in range(3, 25):
        w.add_event(ev(i, "memory.set"))
    assert check([gt], w, 100).rules[0].condition is True  # at least the kept events: more than 5
    v = check([eq], w, 100)  # memory.set was cut to the cap: 30 is not decided
    assert v.rules[0].condition is None and "truncated" in v.errors[0].message
    w.evict(T0 + 50 * US)
    assert check([gt], w, 100).rules[0].leaves[0].observed == 0


def test_history_before_the_window_floor_is_not_claimed_absent() -> None:
    r = rule({"op": "formerly", "within": "1h", "operation": "memory.get"})
    w = window([r], [], floor_us=T0 + 1000 * US)
    v = check([r], w, 1200)  # the hour reaches before the floor: unknown, not "no read"
    assert v.rules[0].condition is None


# --- verdicts -------------------------------------------------------------------------------


def test_require_denies_when_its_condition_does_not_hold_and_forbid_when_it_does() -> None:
    cond = {"op": "formerly", "within": "1h", "operation": "memory.get"}
    req, forb = rule(cond, effect="require"), rule(cond, effect="forbid")
    empty = window([req], [])
    assert check([req], empty, 1).decision == "deny"
    assert check([forb], empty, 1).decision == "allow"
    read = window([req], [ev(0, "memory.get")])
    assert check([req], read, 1).decision == "allow"
    assert check([forb], read, 1).determining_rules == ["r"]


def test_an_undecided_rule_denies_a_write_and_allows_a_read() -> None:
    r = rule({"op": "formerly", "within": "1h", "operation": "memory.get", "args_equal": {"k": "$args.k"}}, actions=("memory.*",))
    w = window([r], [])
    write = check([r], w, 1, op="memory.delete", write=True)
    read = check([r], w, 1, op="memory.get", write=False)
    assert (write.decision, write.would_enforce, write.determining_rules) == ("deny", True, ["r"])
    assert (read.decision, read.would_enforce) == ("allow", False)
    assert read.errors and write.errors


def test_rule_mode_overrides_the_deployment_except_off() -> None:
    cond = {"op": "formerly", "within": "1h", "operation": "memory.get"}
    empty = window([rule(cond)], [])
    shadow_rule = rule(cond, effect="require", mode="shadow")
    enforce_rule = rule(cond, effect="require", mode="enforce")
    assert check([shadow_rule], empty, 1, mode="enforce").would_enforce is False
    assert check([enforce_rule], empty, 1, mode="shadow").would_enforce is True
    off = check([enforce_rule], empty, 1, mode="off")
    assert (off.decision, off.would_enforce, off.rules[0].mode) == ("deny", False, "off")


def test_rules_whose_actions_miss_the_op_do_not_apply() -> None:
    r = rule({"op": "formerly", "within": "1h", "operation": "memory.get"}, effect="require", actions=("memory.delete",))
    v = check([r], window([r], []), 1, op="memory.set")
    assert (v.decision, v.rules) == ("allow", [])


def test_the_verdict_names_the_caller_key_value() -> None:
    r = rule({"op": "formerly", "within": "1h", "operation": "memory.get"})
    leaf = check([r], window([r], []), 1, caller=CALLER).rules[0].leaves[0]
    assert (leaf.key, leaf.key_value, leaf.within_seconds, leaf.operation) == ("agent", "cleanup-bot", 3600, "memory.get")

"""The in-memory history index: out-of-order arrivals, eviction, shapes."""

from __future__ import annotations

from loom_policy.domain.history import ArgTable, Breadth, Series, Shape, Window
from loom_policy.domain.timeutil import US, ch_to_us, parse_instant, us_to_ch, us_to_iso

from .helpers import T0, check, ev, rule, window


def test_a_series_stays_sorted_when_events_arrive_out_of_order() -> None:
    table = ArgTable(frozenset({"k"}))
    s = Series(table)
    for ts, k in [(5, "a"), (1, "b"), (3, "a"), (9, "a")]:
        s.add(ts, {"k": k}, table.code({"k": k}))
    assert list(s.times) == [1, 3, 5, 9]
    assert s.count(2, 9, (("k", "a"),)) == (2, 5)
    assert s.latest(0, 10) == 9


def test_breadth_keeps_each_key_once_at_its_latest_showing() -> None:
    b = Breadth()
    for ts, k in [(1, "a"), (2, "b"), (3, "a"), (2, "a")]:
        b.add(ts, k)
    assert b.order == [(2, "b"), (3, "a")] and b.distinct_since(3) == 1


def test_eviction_drops_old_events_and_raises_the_floor() -> None:
    r = rule({"op": "count_within", "within": "1m", "operation": "memory.get", "cmp": "eq", "value": 1})
    w = window([r], [ev(0, "memory.get"), ev(100, "memory.get")])
    w.evict(T0 + 50 * US)
    assert w.stats()["events"] == 1 and w.floor_us == T0 + 50 * US
    assert check([r], w, 120).rules[0].condition is True


def test_a_window_keeps_only_the_ops_keys_and_arguments_its_rules_read() -> None:
    r = rule({"op": "formerly", "within": "1h", "operation": "memory.get", "args_equal": {"memory_key": "$args.memory_key"}})
    w = window([r], [ev(0, "memory.get", memory_key="a"), ev(1, "task.create"), ev(2, "memory.set")])
    assert w.shape == Shape(frozenset({"agent"}), frozenset({"memory.get"}), frozenset({"memory_key"}), 3600 * US, frozenset())
    assert w.stats()["events"] == 1


def test_shape_cover_and_union() -> None:
    small = Shape(frozenset({"agent"}), frozenset({"memory.get"}), frozenset(), 60 * US)
    wide = Shape(frozenset({"agent", "actor"}), None, frozenset({"k"}), 3600 * US, frozenset({"memory"}))
    assert wide.covers(small) and not small.covers(wide)
    assert small.union(wide) == Shape(frozenset({"agent", "actor"}), None, frozenset({"k"}), 3600 * US, frozenset({"memory"}))
    assert Window(shape=small).wants("memory.get") and not Window(shape=small).wants("memory.set")


def test_instants_round_trip_to_the_microsecond() -> None:
    us = 1_750_000_000_123_456
    assert ch_to_us(us_to_ch(us)) == us
    assert us_to_iso(us) == "2025-06-15T15:06:40.123456Z"
    assert parse_instant("2025-06-15T15:06:40.123456Z", 0) == us
    assert parse_instant("1h", us) == us - 3600 * US

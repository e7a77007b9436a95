"""What a replica's history leaves for the cyclic collector: a full collection walks every
object it tracks and every reference those hold, so the window and the ring must not grow
either with the number of events they keep (bench/policy.py measured ~1 s per full collection
when the window's 10^5 times and arguments sat in lists)."""

from __future__ import annotations

import gc
from typing import Any

from loom_core import fastjson
from loom_policy.domain.history import Window
from loom_policy.service.live_history import LiveHistory, event_from_ring, feed_payload
from loom_policy.store.decisions import DecisionWriter, encode_row

from .helpers import ev, rule, window

KEYS = ("notes/a", "notes/b", "notes/c")


def _rules() -> list[Any]:
    return [
        rule({"op": "count_within", "within": "1h", "operation": "memory.*", "cmp": "gt", "value": 10**6}),
        rule(
            {
                "op": "count_within",
                "within": "1h",
                "operation": "memory.get",
                "args_equal": {"memory_key": "notes/a", "scope": "team"},
                "cmp": "gt",
                "value": 10**6,
            }
        ),
        rule({"op": "formerly", "within": "1h", "operation": "task.claim", "outcome": "any"}),
    ]


def _filled(n: int) -> Window:
    w = window(_rules())
    for i in range(n):
        op = ("memory.get", "memory.set", "task.claim")[i % 3]
        w.add_event(ev(i / 1000, op, memory_key=KEYS[i % 3], scope="team"))
    return w


def _walked(root: object) -> tuple[int, int]:
    """Tracked objects reachable from `root` (classes aside) and the references they hold:
    what a full collection visits on the window's account."""
    gc.collect()  # tuples and dicts of atoms are untracked by a collection
    seen: set[int] = set()
    stack, tracked, refs = [root], 0, 0
    while stack:
        o = stack.pop()
        if id(o) in seen or isinstance(o, type) or not gc.is_tracked(o):
            continue
        seen.add(id(o))
        referents = gc.get_referents(o)
        tracked += 1
        refs += len(referents)
        stack.extend(referents)
    return tracked, refs


def test_a_window_adds_the_same_tracked_objects_for_300_events_as_for_30000() -> None:
    small, large = _filled(300), _filled(30_000)
    assert large.stats()["events"] == 100 * small.stats()["events"]
    assert _walked(large) == _walked(small)


def test_the_ring_of_recent_calls_holds_no_tracked_rows() -> None:
    history = LiveHistory(store=None, bus=None, cap=1000, live_rows_ttl=60.0)  # type: ignore[arg-type]  # the ring reads no store
    for i in range(2000):
        row = {"ts": "2026-12-03 10:00:00.000000", "org": "o", "namespace": "n", "subject": "user:ann", "op": "memory.get"}
        history.observe_ledger_row({**row, "args": {"memory_key": KEYS[i % 3]}, "request_id": f"r{i}"})
    gc.collect()
    assert len(history._ring) == 2000
    assert not any(gc.is_tracked(r) for r in history._ring)


def test_the_decision_writer_keeps_each_row_as_atoms_until_its_flush() -> None:
    """A decision row waits up to a flush interval (0.5 s): kept as the verdict and its outcomes,
    it outlived two young collections, and gated calls filled the oldest generation. Kept as a
    tuple of atoms, it is built and encoded at the flush, and the collector stops tracking it."""
    writer = DecisionWriter(store=None, flush_interval=3600)  # type: ignore[arg-type]  # recording reads no store
    outcomes = '[["a","forbid","enforce",false,false,"",[]]]'
    ts = 1_796_292_000_000_001  # 2026-12-03 10:00:00.000001 UTC
    rules = fastjson.dumps_str(outcomes)
    for i in range(1000):
        call = ("o", "n", "user:ann", "bot", "", "", "memory.get", "grpc", f"r{i}")
        writer.record((*call, "allow", False, "enforce", False, (), ("a", "b"), 0.0123, ts, "[]", rules))
    assert _walked(writer._buf) == (1, 1000)  # the list alone: its rows are untracked
    assert fastjson.loads(encode_row(writer._buf[1])) == {
        "org": "o",
        "namespace": "n",
        "subject": "user:ann",
        "agent": "bot",
        "user": "",
        "session": "",
        "op": "memory.get",
        "transport": "grpc",
        "request_id": "r1",
        "decision": "allow",
        "enforced": False,
        "mode": "enforce",
        "write_shaped": False,
        "determining_rules": [],
        "rule_names": ["a", "b"],
        "latency_ms": 0.0123,
        "ts": "2026-12-03 10:00:00.000001",
        "errors": "[]",
        "rules": outcomes,
    }


def test_a_replica_drops_its_own_feed_batches_and_takes_another_replicas() -> None:
    history = LiveHistory(store=None, bus=None, cap=1000, live_rows_ttl=60.0)  # type: ignore[arg-type]  # the feed reads no store
    row = [1_750_000_000_000_000, "o", "n", "user:ann", "bot", "", "", "memory.get", True, {"memory_key": "notes/a"}, "r1"]
    history.fed(feed_payload(history.origin, [row], []))
    assert not history._ring and history.feed_received == 0
    history.fed(feed_payload("another-replica", [row], []))
    assert history.feed_received == 1 and event_from_ring(history._ring[0]).args == {"memory_key": "notes/a"}

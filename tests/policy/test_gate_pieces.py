"""Pure pieces of the gate's per-call path: the condition combiner built at compile time, the
request ids kept for shared reservations, the call's arguments read from its request, and the
decision row's instant."""

from __future__ import annotations

import itertools
import random
from datetime import UTC, datetime

from google.protobuf import struct_pb2
from loom_core.catalog import load_catalog, message_to_json
from loom_core.chain.ledger import ledger_args
from loom_policy.domain.compiler import combiner
from loom_policy.domain.model import BoolNode, Leaf, LeafOutcome, Node
from loom_policy.domain.reservations import RecentIds
from loom_policy.domain.timeutil import US, us_to_ch
from loom_policy.service.gate import _call_args_once, call_args


def _kleene_reference(node: Node, leaves: list[LeafOutcome], at: list[int]) -> bool | None:
    """Kleene logic written out by truth table, the leaves taken depth first."""
    if isinstance(node, Leaf):
        v = leaves[at[0]].holds
        at[0] += 1
        return v
    assert isinstance(node, BoolNode)
    values = [_kleene_reference(c, leaves, at) for c in node.children]
    if node.op == "not":
        return None if values[0] is None else not values[0]
    if node.op == "all":
        return False if any(v is False for v in values) else (True if all(v is True for v in values) else None)
    return True if any(v is True for v in values) else (False if all(v is False for v in values) else None)


def _tree(rng: random.Random, depth: int, counter: itertools.count[int]) -> Node:
    if depth == 0 or rng.random() < 0.3:
        return Leaf(f"l{next(counter)}", "formerly", 60, 60, "memory.get", "agent")
    op = rng.choice(["all", "any", "not"])
    width = 1 if op == "not" else rng.randint(1, 3)
    return BoolNode("n", op, tuple(_tree(rng, depth - 1, counter) for _ in range(width)))


def test_the_combiner_agrees_with_kleene_logic_over_random_trees() -> None:
    rng = random.Random(35)
    for _ in range(300):
        counter = itertools.count()
        tree = _tree(rng, 4, counter)
        n = next(counter)
        combine = combiner(tree)
        for _ in range(5):
            leaves = [LeafOutcome(f"l{i}", "formerly", rng.choice([True, False, None])) for i in range(n)]
            assert combine(leaves) == _kleene_reference(tree, leaves, [0])


def test_an_empty_all_holds() -> None:
    # A broken rule's condition (compiler.BrokenRule) is an `all` of nothing.
    assert combiner(BoolNode("condition", "all", ()))([]) is True


def test_recent_ids_forget_what_is_older_than_they_keep() -> None:
    seen = RecentIds(keep_us=100, floor=4)
    for i in range(4):
        seen.add(f"r{i}", i)
    assert "r0" in seen and len(seen) == 4  # at the floor: nothing pruned yet
    seen.add("r4", 200)  # over it: every id seen before 100 goes
    assert "r0" not in seen and "r3" not in seen and "r4" in seen and len(seen) == 1


def test_recent_ids_prune_once_per_doubling_however_many_stay_young() -> None:
    # Every id is young (within keep_us), so a prune drops none: pruning at a fixed size would
    # then walk them all on every add.
    seen = RecentIds(keep_us=10**9, floor=1000)
    for i in range(100_000):
        seen.add(f"r{i}", i)
    assert len(seen) == 100_000
    assert seen.prunes <= 7  # 1000 -> 2000 -> ... -> 128000: log2(100) rounds, not 99,000


def test_the_gate_reads_a_calls_arguments_from_its_request_as_the_ledger_and_policy_check_do() -> None:
    """The chain hands the gate the request message itself (no JSON copy per call): the arguments
    a rule binds are the ledger's (`ledger_args`), and policy.check's, given the same call as JSON."""
    catalog = load_catalog()
    memory_set = catalog.get("memory.set")
    request = memory_set.request_cls(memory_key="notes/k1", value="a text the ledger digests", tags=["a", "b"])
    task_create = catalog.get("task.create")
    brief = struct_pb2.Struct()
    brief.update({"goal": "ship", "steps": [1, 2]})
    created = task_create.request_cls(inbox="ops", title="t", priority=3, brief=brief)
    for op, msg in [(memory_set, request), (task_create, created)]:
        read = _call_args_once(op, msg)
        assert read() == ledger_args(msg) == call_args(op, message_to_json(msg))
        assert read() is read()  # computed once
    assert _call_args_once(memory_set, request)()["value"].startswith("sha256:")  # text digested, as in the ledger
    empty = catalog.get("grants.list")
    assert _call_args_once(empty, empty.request_cls())() == call_args(empty, {}) == {}


def test_a_decision_rows_instant_is_the_ledgers_text_form() -> None:
    rng = random.Random(5)
    for us in [0, US - 1, *(rng.randrange(0, 4_000_000_000 * US) for _ in range(2000))]:
        secs, micros = divmod(us, US)
        assert us_to_ch(us) == datetime.fromtimestamp(secs, UTC).replace(microsecond=micros).strftime("%Y-%m-%d %H:%M:%S.%f")

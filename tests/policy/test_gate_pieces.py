"""Pure pieces of the gate's per-call path: the condition combiner built at compile time, and
the request ids kept for shared reservations."""

from __future__ import annotations

import itertools
import random

from loom_policy.domain.compiler import combiner
from loom_policy.domain.model import BoolNode, Leaf, LeafOutcome, Node
from loom_policy.domain.reservations import RecentIds


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

"""Whether a rule change widened what agents may do: sound, never a false 'not widened'."""

from __future__ import annotations

from typing import Any

import pytest
from loom_policy.domain.parser import parse_rule
from loom_policy.domain.widening import widened

COUNT = {"op": "count_within", "within": "1h", "operation": "memory.set", "cmp": "gt", "value": 200}
READ = {"op": "formerly", "within": "1h", "operation": "memory.get"}


def r(condition: dict[str, Any], *, effect: str = "forbid", actions: tuple[str, ...] = ("memory.set",), mode: str = "inherit") -> Any:
    rule, _ = parse_rule(
        {"name": "x", "effect": effect, "actions": list(actions), "condition": condition, "mode": mode}, max_window_seconds=86400
    )
    return rule


def test_a_new_rule_never_widens() -> None:
    assert widened(None, r(COUNT)) == (False, [])


def test_removing_a_rule_widens() -> None:
    wide, reasons = widened(r(COUNT), None)
    assert wide and "removed" in reasons[0]


def test_the_same_rule_again_does_not_widen() -> None:
    assert widened(r(COUNT), r(COUNT))[0] is False


@pytest.mark.parametrize(
    ("new", "wide"),
    [
        ({**COUNT, "value": 100}, False),  # forbids sooner
        ({**COUNT, "value": 300}, True),  # forbids later
        ({**COUNT, "within": "2h"}, False),  # more events counted
        ({**COUNT, "within": "30m"}, True),
        ({**COUNT, "cmp": "gte", "value": 201}, False),  # same bar written another way
        ({**COUNT, "cmp": "gte", "value": 202}, True),
        ({"op": "any", "of": [COUNT, READ]}, False),  # denies in more cases
        ({"op": "all", "of": [COUNT, READ]}, True),  # denies in fewer
    ],
)
def test_forbid_conditions(new: dict[str, Any], wide: bool) -> None:
    assert widened(r(COUNT), r(new))[0] is wide


@pytest.mark.parametrize(
    ("new", "wide"),
    [
        ({**READ, "within": "30m"}, False),  # require a more recent read: stricter
        ({**READ, "within": "2h"}, True),
        ({**READ, "args_equal": {"memory_key": "$args.memory_key"}}, False),  # require the same key: stricter
        ({"op": "any", "of": [READ, COUNT]}, True),
    ],
)
def test_require_conditions(new: dict[str, Any], wide: bool) -> None:
    assert widened(r(READ, effect="require"), r(new, effect="require"))[0] is wide


def test_narrowing_the_actions_widens_and_covering_them_does_not() -> None:
    old = r(COUNT, actions=("memory.set", "memory.delete"))
    assert widened(old, r(COUNT, actions=("memory.set",)))[0] is True
    assert widened(old, r(COUNT, actions=("memory.*",)))[0] is False


def test_moving_towards_shadow_widens_and_towards_enforce_does_not() -> None:
    assert widened(r(COUNT, mode="enforce"), r(COUNT, mode="shadow"))[0] is True
    assert widened(r(COUNT, mode="inherit"), r(COUNT, mode="shadow"))[0] is True
    assert widened(r(COUNT, mode="shadow"), r(COUNT, mode="enforce"))[0] is False


def test_changing_the_effect_widens() -> None:
    assert widened(r(COUNT), r(COUNT, effect="require"))[0] is True

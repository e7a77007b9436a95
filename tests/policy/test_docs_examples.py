"""Every rule block of docs/policies.md (```json rule=<name>) compiles, and does what the page
says on a history that shows it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from loom_policy.domain.compiler import compile_rule
from loom_policy.domain.parser import parse_rule

from .helpers import check, ev, shown, window

DOC = Path(__file__).resolve().parents[2] / "docs" / "policies.md"
BLOCK = re.compile(r"```json rule=([a-z0-9-]+)\n(.*?)```", re.S)


def doc_rules() -> dict[str, dict[str, Any]]:
    return {name: json.loads(body) for name, body in BLOCK.findall(DOC.read_text())}


def compiled(name: str) -> Any:
    raw = doc_rules()[name]
    assert raw["name"] == name
    rule, _ = parse_rule(raw, max_window_seconds=86400)
    return compile_rule(rule)


def test_the_page_has_its_worked_examples() -> None:
    assert set(doc_rules()) == {
        "no-bulk-delete-without-reads",
        "one-list-per-hour",
        "writes-per-hour",
        "heartbeat-after-claim",
        "not-too-broad",
        "broken",
        "third-list",
    }


def decide(
    name: str,
    events: list[Any],
    op: str,
    *,
    exposures: list[Any] = (),
    live: dict[str, int] | None = None,
    args: dict[str, str] | None = None,
    write: bool = True,
) -> Any:  # type: ignore[assignment]
    r = compiled(name)
    return check([r], window([r], events, exposures, live=live), 3000, op=op, args=args, write=write)


@pytest.mark.parametrize(("deletes", "read", "expected"), [(20, False, "deny"), (19, False, "allow"), (20, True, "allow")])
def test_no_bulk_delete_without_reads(deletes: int, read: bool, expected: str) -> None:
    events = [ev(2500 + i, "memory.delete") for i in range(deletes)] + ([ev(2600, "memory.get")] if read else [])
    assert decide("no-bulk-delete-without-reads", events, "memory.delete").decision == expected


def test_one_list_per_hour() -> None:
    assert decide("one-list-per-hour", [], "grants.list").decision == "allow"
    v = decide("one-list-per-hour", [ev(2999, "grants.list")], "grants.list")
    assert v.decision == "deny" and v.rules[0].leaves[0].observed == 1


@pytest.mark.parametrize(("writes", "expected"), [(199, "allow"), (200, "deny")])
def test_writes_per_hour(writes: int, expected: str) -> None:
    events = [ev(1000 + i, "memory.set") for i in range(writes)]
    v = decide("writes-per-hour", events, "memory.delete")
    assert v.decision == expected and v.rules[0].mode == "shadow" and not v.would_enforce


def test_heartbeat_after_claim() -> None:
    assert decide("heartbeat-after-claim", [ev(2900, "task.claim")], "task.pull").decision == "deny"
    assert decide("heartbeat-after-claim", [ev(2900, "task.claim"), ev(2950, "task.heartbeat")], "task.pull").decision == "allow"
    assert decide("heartbeat-after-claim", [], "task.pull").decision == "allow"


@pytest.mark.parametrize(("keys", "expected"), [(5, "allow"), (6, "deny")])
def test_not_too_broad(keys: int, expected: str) -> None:
    exposures = [shown(2000 + i, f"k{i}") for i in range(keys)]
    assert decide("not-too-broad", [], "memory.search", exposures=exposures, live={"memory": 10}).decision == expected


def test_broken_denies_a_write_and_allows_a_read() -> None:
    write = decide("broken", [], "grants.set", write=True)
    read = decide("broken", [], "grants.list", write=False)
    assert (write.decision, read.decision) == ("deny", "allow")
    assert write.errors[0].message == read.errors[0].message == "$args.no_such_field: the call has no argument no_such_field"


def test_third_list() -> None:
    assert decide("third-list", [ev(10, "grants.list"), ev(20, "grants.list")], "grants.list").decision == "deny"
    assert decide("third-list", [ev(10, "grants.list")], "grants.list").decision == "allow"

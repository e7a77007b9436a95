"""Calls in flight, counted toward `count_within` before their ledger rows exist.

A call the gate lets through takes a reservation; its ledger row settles it (the row then
counts, as an event, if its outcome does); a reservation no row settles expires. Without
reservations, N calls racing through the gate all read the same history and all pass a limit
meant for fewer: with them, a replica decides and reserves in one step, so exactly the limit
passes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .history import key_value

# A reservation no ledger row settles (a call that never finished) stops counting after this.
RESERVATION_TTL_US = 120 * 1_000_000


@dataclass(slots=True)
class PendingCall:
    """One call the gate let through whose ledger row has not been seen yet. Never changed once
    made (not frozen: a frozen dataclass's __init__ costs the gate's every counted call ~0.7 µs)."""

    request_id: str
    op: str
    at_us: int
    subject: str
    agent: str = ""
    user: str = ""
    session: str = ""
    args: Mapping[str, str] = field(default_factory=dict)

    def key_value(self, kind: str) -> str:
        return key_value(kind, self.subject, self.agent, self.user, self.session)

    def matches(self, args_equal: Iterable[tuple[str, str | None]]) -> bool:
        return all(self.args.get(name) == value for name, value in args_equal)

    def to_json(self) -> list[object]:
        return [self.request_id, self.op, self.at_us, self.subject, self.agent, self.user, self.session, dict(self.args)]

    @classmethod
    def from_json(cls, v: list[object]) -> PendingCall:
        rid, op, at, subject, agent, user, session, args = v
        assert isinstance(args, dict)
        return cls(
            str(rid), str(op), int(str(at)), str(subject), str(agent), str(user), str(session), {str(k): str(a) for k, a in args.items()}
        )


@dataclass(slots=True)
class Reservations:
    """One replica's calls in flight, by (org, namespace)."""

    _by_ns: dict[tuple[str, str], dict[str, PendingCall]] = field(default_factory=dict)

    def pending(self, org: str, namespace: str, now_us: int) -> tuple[PendingCall, ...]:
        calls = self._by_ns.get((org, namespace))
        if not calls:
            return ()
        expired = [rid for rid, c in calls.items() if c.at_us + RESERVATION_TTL_US < now_us]
        for rid in expired:
            del calls[rid]
        return tuple(calls.values())

    def add(self, org: str, namespace: str, call: PendingCall) -> None:
        calls = self._by_ns.get((org, namespace))
        if calls is None:
            calls = self._by_ns[(org, namespace)] = {}
        calls[call.request_id] = call

    def settle(self, org: str, namespace: str, request_id: str) -> bool:
        calls = self._by_ns.get((org, namespace))
        if not calls or calls.pop(request_id, None) is None:
            return False
        if not calls:
            del self._by_ns[(org, namespace)]
        return True


class RecentIds:
    """Request ids seen lately, each with when: forgotten once older than `keep_us`. Pruned when
    it has doubled since the last prune (at least `floor` entries), so each id costs O(1)
    amortised at any rate: pruning at a fixed size would walk every id on every add once more
    than that many arrive within `keep_us`."""

    __slots__ = ("_at", "_limit", "floor", "keep_us", "prunes")

    def __init__(self, keep_us: int, floor: int = 50_000) -> None:
        self.keep_us = keep_us
        self.floor = floor
        self._at: dict[str, int] = {}
        self._limit = floor
        self.prunes = 0

    def add(self, request_id: str, now_us: int) -> None:
        self._at[request_id] = now_us
        if len(self._at) > self._limit:
            horizon = now_us - self.keep_us
            self._at = {k: at for k, at in self._at.items() if at >= horizon}
            self._limit = max(self.floor, 2 * len(self._at))
            self.prunes += 1

    def __contains__(self, request_id: object) -> bool:
        return request_id in self._at

    def __len__(self) -> int:
        return len(self._at)


def live(calls: Iterable[PendingCall], now_us: int, settled: Mapping[str, int]) -> tuple[PendingCall, ...]:
    """Reservations still in flight: not expired, and not settled by a ledger row this replica
    has seen (another replica's completed call, whose reservation may linger a moment)."""
    return tuple(c for c in calls if c.at_us + RESERVATION_TTL_US >= now_us and c.request_id not in settled)

"""Calibration: how an agent's stated confidence compared with realized success.

For each (agent, category) with decisions whose outcome carries a verdict: the count, the
successes, the mean stated confidence, the realized success rate, the Brier score (mean of
(confidence - success)^2; 0 is perfect, 0.25 is a coin flip stated at 0.5) and a reliability
table over confidence bins.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

BINS = 5


@dataclass(frozen=True, slots=True)
class Scored:
    agent: str
    category: str
    confidence: float
    success: bool


@dataclass(slots=True)
class Bin:
    lower: float
    upper: float
    count: int = 0
    mean_confidence: float = 0.0
    success_rate: float = 0.0


@dataclass(slots=True)
class Calibration:
    agent: str
    category: str
    count: int
    successes: int
    mean_confidence: float
    success_rate: float
    brier: float
    overconfidence: float
    bins: list[Bin] = field(default_factory=list)


def calibrate(rows: Iterable[Scored], bins: int = BINS) -> list[Calibration]:
    groups: dict[tuple[str, str], list[Scored]] = {}
    for r in rows:
        groups.setdefault((r.agent, r.category), []).append(r)
    out: list[Calibration] = []
    for (agent, category), items in sorted(groups.items()):
        n = len(items)
        wins = sum(1 for r in items if r.success)
        conf = sum(r.confidence for r in items) / n
        rate = wins / n
        brier = sum((r.confidence - (1.0 if r.success else 0.0)) ** 2 for r in items) / n
        table: list[Bin] = []
        for b in range(bins):
            lo, hi = b / bins, (b + 1) / bins
            inside = [r for r in items if lo <= r.confidence < hi or (b == bins - 1 and r.confidence == 1.0)]
            if inside:
                table.append(
                    Bin(
                        lo,
                        hi,
                        len(inside),
                        sum(r.confidence for r in inside) / len(inside),
                        sum(1 for r in inside if r.success) / len(inside),
                    )
                )
        out.append(Calibration(agent, category, n, wins, conf, rate, brier, conf - rate, table))
    return out

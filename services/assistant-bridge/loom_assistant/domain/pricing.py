"""Pricing an answer's usage (spec 000 "Model and cost")."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

# USD per million tokens (input, output).
RATES: dict[str, tuple[float, float]] = {
    "claude-haiku-4-5": (1.0, 5.0),
    "claude-sonnet-4-5": (3.0, 15.0),
    "claude-opus-4-1": (15.0, 75.0),
}


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int


def usage_of(chunk: Mapping[str, object]) -> Usage | None:
    raw = chunk.get("usage")
    if not isinstance(raw, Mapping):
        return None
    try:
        return Usage(int(raw.get("prompt_tokens") or 0), int(raw.get("completion_tokens") or 0))
    except (TypeError, ValueError):
        return None


def answer_cost(model: str, usage: Usage | None, *, ceiling_usd: float) -> float:
    """The answer's spend: its usage at the model's rate; the ceiling for a cut answer (no
    final usage) or a model with no rate, so no answer spends for free."""
    rate = RATES.get(model)
    if usage is None or rate is None:
        return ceiling_usd
    return usage.prompt_tokens / 1e6 * rate[0] + usage.completion_tokens / 1e6 * rate[1]


def over_share(spent_usd: float, cap_usd: float, share: float) -> bool:
    return spent_usd >= cap_usd * share

"""The org's model-calls switch (loom.assistant_model_calls) and each namespace's daily model
cost cap (loom.assistant_budgets): one ReplacingMergeTree row per key, read with FINAL and
read-your-writes so a change made on one replica holds on the next answer anywhere."""

from __future__ import annotations

import time

from loom_core.store import Store, ch_time

_RYW = " SETTINGS select_sequential_consistency = 1"


def _version() -> int:
    return time.time_ns()


async def model_calls_enabled(store: Store, *, org: str) -> bool:
    """On unless an admin switched it off (raises on a failed read)."""
    rows = await store.query(
        "SELECT enabled FROM {db}.assistant_model_calls FINAL WHERE org = {org:String}" + _RYW,
        {"org": org},
    )
    return bool(rows[0]["enabled"]) if rows else True


async def set_model_calls(store: Store, *, org: str, enabled: bool) -> None:
    await store.insert(
        "{db}.assistant_model_calls",
        [{"org": org, "enabled": enabled, "updated_at": ch_time(), "version": _version()}],
    )


async def cost_cap(store: Store, *, org: str, namespace: str) -> float | None:
    """The namespace's own daily_cost_cap_usd, or None when it sets none (raises on a failed read)."""
    rows = await store.query(
        "SELECT daily_cost_cap_usd, is_set FROM {db}.assistant_budgets FINAL WHERE org = {org:String} AND namespace = {ns:String}" + _RYW,
        {"org": org, "ns": namespace},
    )
    if not rows or not bool(rows[0]["is_set"]):
        return None
    return float(rows[0]["daily_cost_cap_usd"])


async def set_cost_cap(store: Store, *, org: str, namespace: str, cap_usd: float | None) -> None:
    """Set the namespace's cap; None goes back to the deployment's default."""
    await store.insert(
        "{db}.assistant_budgets",
        [
            {
                "org": org,
                "namespace": namespace,
                "daily_cost_cap_usd": 0.0 if cap_usd is None else float(cap_usd),
                "is_set": cap_usd is not None,
                "updated_at": ch_time(),
                "version": _version(),
            }
        ],
    )

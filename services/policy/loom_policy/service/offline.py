"""History read straight from the tables, for the ops that evaluate rules outside the gate:
policy.check when this replica's gate is off (no live window exists), and policy.replay.

The tables hold what the ledger has written: up to a flush interval behind the calls."""

from __future__ import annotations

from collections.abc import Sequence

from loom_core.exposures import live_rows
from loom_core.store import Store

from ..domain.compiler import CompiledRule
from ..domain.history import Exposure, Shape, Window
from ..domain.replay import RecordedCall
from ..domain.timeutil import US
from ..store import history as hist
from .live_history import event_from_table, exposure_from_table

REPLAY_LIMIT = 500_000


def shape_of(rules: Sequence[CompiledRule]) -> Shape:
    shape = Shape()
    for r in rules:
        shape = shape.union(r.shape)
    return shape


async def caller_window(store: Store, org: str, namespace: str, subject: str, shape: Shape, now_us: int, cap: int) -> Window:
    """One caller's history for `shape`, from the tables (the pin: only its own subject)."""
    since = now_us - shape.retention_us - US
    rows = await hist.events(store, org, namespace, since_us=since, patterns=hist.like_patterns(shape.op_globs), subject=subject, limit=cap)
    xrows = await hist.exposures(store, org, namespace, since_us=since, kinds=shape.exposure_kinds, subject=subject, limit=cap)
    w = Window(shape=shape, floor_us=since, cap=cap)
    for batch in (rows, xrows):
        if len(batch) >= cap:
            w.floor_us = max(w.floor_us, int(batch[-1]["t"]) + 1)
    for r in reversed(rows):
        w.add_event(event_from_table(r))
    for r in reversed(xrows):
        w.add_exposure(exposure_from_table(r))
    if shape.exposure_kinds:
        w.live_rows = await live_rows(store, org, namespace)
    return w


async def recorded(
    store: Store, org: str, namespace: str, rules: Sequence[CompiledRule], since_us: int, until_us: int
) -> tuple[list[RecordedCall], list[Exposure], dict[str, int], bool]:
    """The ledger calls and exposures a replay needs, oldest first, and whether the read was cut."""
    shape = shape_of(rules)
    globs: set[str] | None = set()
    for r in rules:
        globs = None if globs is None or "*" in r.definition.actions else globs | set(r.definition.actions)
    if globs is not None:
        globs = None if shape.op_globs is None else globs | shape.op_globs
    start = since_us - shape.retention_us - US
    rows = await hist.events(
        store,
        org,
        namespace,
        since_us=start,
        until_us=until_us,
        patterns=hist.like_patterns(None if globs is None else frozenset(globs)),
        limit=REPLAY_LIMIT,
    )
    xrows = await hist.exposures(store, org, namespace, since_us=start, until_us=until_us, kinds=shape.exposure_kinds, limit=REPLAY_LIMIT)
    truncated = len(rows) >= REPLAY_LIMIT or len(xrows) >= REPLAY_LIMIT
    calls = [
        RecordedCall(event_from_table(r), int(float(r["latency_ms"]) * 1000), str(r["error_code"]), bool(r["write_shaped"]))
        for r in reversed(rows)
    ]
    exposures = [exposure_from_table(r) for r in reversed(xrows)]
    live = await live_rows(store, org, namespace) if shape.exposure_kinds else {}
    return calls, exposures, live, truncated

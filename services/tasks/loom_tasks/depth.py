"""The queue-depth gauge on /metrics: `loom_task_queue_depth{org, inbox, state}`, the unfinished
tasks (triage, todo, in_progress, deferred, blocked) per inbox and state.

Off the write path: the replica that runs the projector (the one that holds `tasks.projector`)
counts the ClickHouse projection every LOOM_TASK_QUEUE_DEPTH_INTERVAL_SECONDS and the gauge
serves the last count; the other replicas export none, so a sum over replicas counts each task
once. The label set is bounded: the LOOM_TASK_QUEUE_DEPTH_MAX_INBOXES deepest inboxes (by
unfinished tasks, then org and name) each get their own labels; every other inbox's tasks are
summed per state under `org="(other)", inbox="(other)"`. So at most (max_inboxes + 1) times 5 series.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator

from loom_core.aio import cancel_and_wait, every
from prometheus_client import REGISTRY
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from .domain import model
from .store import TaskStore

log = logging.getLogger(__name__)

OTHER = "(other)"
NAME = "loom_task_queue_depth"
#: One snapshot row: (org, inbox, state) -> tasks.
Depths = dict[tuple[str, str, str], int]


def bounded(counts: Depths, max_inboxes: int) -> Depths:
    """`counts` with only the `max_inboxes` deepest inboxes labelled; the rest summed per state
    under (other)."""
    totals: dict[tuple[str, str], int] = {}
    for (org, inbox, _state), n in counts.items():
        totals[(org, inbox)] = totals.get((org, inbox), 0) + n
    kept = {key for key, _ in sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[: max(max_inboxes, 0)]}
    out: Depths = {}
    for (org, inbox, state), n in counts.items():
        key = (org, inbox, state) if (org, inbox) in kept else (OTHER, OTHER, state)
        out[key] = out.get(key, 0) + n
    return out


class _Snapshot(Collector):
    """What /metrics serves: the last count, set by the replica counting (one per process)."""

    def __init__(self) -> None:
        self.depths: Depths = {}
        self.owner: object | None = None

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(NAME, "Unfinished tasks per inbox and state (bounded label set).", labels=["org", "inbox", "state"])
        for (org, inbox, state), n in sorted(self.depths.items()):
            family.add_metric([org, inbox, state], n)
        yield family


SNAPSHOT = _Snapshot()
REGISTRY.register(SNAPSHOT)


class QueueDepth:
    """Counts the projection while `counting()` says this replica projects."""

    def __init__(self, tasks: TaskStore, counting: Callable[[], bool], *, interval: float, max_inboxes: int) -> None:
        self.tasks = tasks
        self.counting = counting
        self.interval = interval
        self.max_inboxes = max_inboxes
        self._task: asyncio.Task[None] | None = None

    async def refresh(self) -> None:
        if not self.counting():
            if SNAPSHOT.owner is self:
                SNAPSHOT.depths, SNAPSHOT.owner = {}, None
            return
        counts = await self.tasks.open_counts(sorted(model.UNFINISHED))
        SNAPSHOT.depths, SNAPSHOT.owner = bounded(counts, self.max_inboxes), self

    async def start(self) -> None:
        if self.interval > 0 and self._task is None:
            # The gauge keeps its last count when the projection does not answer.
            counting = every(
                self.interval,
                self.refresh,
                failed="task queue depth: the projection did not answer",
                logger=log,
                at_once=True,
            )
            self._task = asyncio.create_task(counting, name="loom-task-queue-depth")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None
        if SNAPSHOT.owner is self:
            SNAPSHOT.depths, SNAPSHOT.owner = {}, None

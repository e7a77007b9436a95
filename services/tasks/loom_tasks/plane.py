"""The tasks plane: `build(runtime)` for the runner (entry point `loom.planes: tasks`).

On start it declares the LOOM_TASK_EVENTS stream and the `loom_tasks` lease-row bucket,
subscribes to pull wake-ups and config changes, starts the lease sweep
(LOOM_TASK_LEASE_SWEEP_ENABLED) and the webhook deliverer (LOOM_TASK_WEBHOOK_DELIVER_ENABLED).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Sequence
from typing import Any

from loom_core.runtime import Handler, Runtime
from loom_core.store import Migration

from .consumers.history import HistoryWriter
from .consumers.sweep import Sweeper
from .consumers.wake import WakeHub
from .directory import Directory
from .domain.model import TaskRow
from .events import EventPublisher
from .handlers import Handlers
from .keys import TaskKeys
from .schema import MIGRATIONS
from .service.access import Access
from .service.deps import Deps
from .service.engine import Engine
from .store import BatchWriter, InboxStore, TaskStore
from .store.tasks import TASKS

log = logging.getLogger(__name__)


def _webhook_migrations() -> list[Migration]:
    try:
        from .webhooks import MIGRATIONS as WEBHOOK_MIGRATIONS
    except ImportError:  # pragma: no cover - the webhook module ships with the plane
        return []
    return list(WEBHOOK_MIGRATIONS)


class TasksPlane:
    name = "tasks"

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.migrations: Sequence[Migration] = [*MIGRATIONS, *_webhook_migrations()]
        s = runtime.settings
        self.tasks = TaskStore(runtime.store)
        self.inboxes = InboxStore(runtime.store)
        self.directory = Directory(self.inboxes, runtime.bus, s.task_config_cache_ttl_seconds)
        self.writer = BatchWriter(runtime.store, TASKS, s.task_write_batch_max_rows)
        self.history = HistoryWriter(runtime.bus, runtime.store)
        self.publisher = EventPublisher(runtime.bus)
        self.hub = WakeHub(runtime.bus, self._candidates, s.task_pull_poll_seconds)
        self.keys = TaskKeys(runtime.bus)
        self.engine = Engine(self.tasks, self.writer, self.keys, self.publisher, self.hub)
        self.deps = Deps(
            runtime=runtime,
            settings=s,
            tasks=self.tasks,
            inboxes=self.inboxes,
            keys=self.keys,
            directory=self.directory,
            hub=self.hub,
            engine=self.engine,
            access=Access(runtime.auth, self.directory),
        )
        self.sweeper = Sweeper(
            self.engine,
            self.tasks,
            self.keys,
            self.directory,
            runtime.leases,
            interval=s.task_sweep_interval_seconds,
            reconcile_interval=s.task_reconcile_interval_seconds,
            grace=s.task_reconcile_grace_seconds,
            enabled=s.task_lease_sweep_enabled,
        )
        self.deliverer: Any = None
        self._handlers = Handlers(self.deps)

    async def _candidates(self, org: str, inbox: str, kinds: Sequence[str], limit: int) -> list[TaskRow]:
        # Rows hidden by not_before for another minute come along, so a waiting pull can
        # wake itself when they become visible.
        return await self.tasks.candidates(org, inbox, time.time() + 60.0, kinds, limit)

    def handlers(self) -> dict[str, Handler]:
        return self._handlers.table()

    async def start(self) -> None:
        s = self.runtime.settings
        await self.publisher.ensure_stream(float(s.task_events_max_age_seconds))
        await self.keys.ensure_bucket()
        await self.directory.start()
        await self.hub.start()
        await self.history.start()
        await self.sweeper.start()
        if s.task_webhook_deliver_enabled:
            try:
                from .webhooks import WebhookDeliverer
            except ImportError:  # pragma: no cover - the webhook module ships with the plane
                log.warning("webhook delivery is on but this build has no webhook module")
            else:
                self.deliverer = WebhookDeliverer(self.runtime, self.directory)
                await self.deliverer.start()

    async def stop(self) -> None:
        if self.deliverer is not None:
            with contextlib.suppress(Exception):
                await self.deliverer.stop()
        await self.sweeper.stop()
        await self.history.stop()
        await self.hub.stop()
        await self.directory.stop()
        await self.writer.drain()


def build(runtime: Runtime) -> TasksPlane:
    return TasksPlane(runtime)

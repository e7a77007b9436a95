"""The tasks plane: `build(runtime)` for the runner (entry point `loom.planes: tasks`).

On start it declares its JetStream streams (LOOM_TASK_STATE: the tasks' state, the truth;
LOOM_TASK_EVENTS: the events derived from it), starts the projector (state -> events, the
ClickHouse projection and task.history's table), the notes writer (task.progress notes ->
task.history's table; an earlier version's history writer is deleted), the pull wake-ups,
the sweep (LOOM_TASK_LEASE_SWEEP_ENABLED), the queue-depth gauge (depth.py) and the webhook
deliverer (LOOM_TASK_WEBHOOK_DELIVER_ENABLED).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from loom_core.plane import bind_handlers
from loom_core.runtime import Handler, Runtime
from loom_core.store import Migration

from .consumers.layout import PROJECTOR_LEASE, ensure_projector, retire_consumers
from .consumers.leased import Leased
from .consumers.notes import NotesWriter
from .consumers.projector import Projector
from .consumers.pushes import Pushes
from .consumers.sweep import Sweeper
from .consumers.tail import EventTail
from .depth import QueueDepth
from .directory import Directory
from .domain.model import TaskRow
from .events import PROJECTOR_DURABLE, READ_WAIT_SECONDS, EventPublisher, ack_floor, caught_up
from .handlers import Handlers
from .schema import MIGRATIONS
from .service.access import Access
from .service.admission import REMOTE_POSITION_SECONDS, Admission
from .service.deps import Deps
from .service.engine import Engine
from .service.wake import WakeHub
from .settings import TasksSettings
from .store import InboxStore, TaskStore, TaskTruth, truth
from .webhooks import MIGRATIONS as WEBHOOK_MIGRATIONS
from .webhooks import WebhookDeliverer


class TasksPlane:
    name = "tasks"

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.migrations: Sequence[Migration] = [*MIGRATIONS, *WEBHOOK_MIGRATIONS]
        s = runtime.settings.plane(TasksSettings)
        self.settings = s
        self.tasks = TaskStore(runtime.store)
        self.inboxes = InboxStore(runtime.store)
        self.truth = TaskTruth(runtime.bus, s.task_state_replicas)
        self.directory = Directory(self.inboxes, runtime.bus, s.task_config_cache_ttl_seconds)
        self.publisher = EventPublisher(runtime.bus, s.task_state_replicas)
        self.projector = Projector(runtime.bus, self.tasks, self.publisher, linger=s.task_projection_linger_seconds)
        self.notes = NotesWriter(runtime.bus, self.tasks)
        # One replica projects at a time, so each task's events are published in revision order.
        self.projecting = Leased(self.projector, runtime.leases, PROJECTOR_LEASE)
        self.hub = WakeHub(runtime.bus, self._candidates, s.task_pull_poll_seconds)
        self.admission = Admission(self._projected, max_behind=s.task_projection_max_behind, max_wait=s.task_projection_admit_wait_seconds)
        self._remote_position = (0.0, 0)  # (when read, the projector's ack floor)
        self.projector.on_applied = self.admission.projected
        self.engine = Engine(self.truth, self.tasks, self.hub, self.admission)
        self.pushes = Pushes(runtime.bus, self.hub, self.directory)
        self.deps = Deps(
            bus=runtime.bus,
            leases=runtime.leases,
            identity=runtime.identity,
            store=runtime.store,
            settings=s,
            tasks=self.tasks,
            inboxes=self.inboxes,
            directory=self.directory,
            hub=self.hub,
            engine=self.engine,
            access=Access(runtime.auth, self.directory),
            publisher=self.publisher,
            tail=EventTail(runtime.bus),
            projected=self._read_your_writes,
        )
        self.sweeper = Sweeper(
            self.engine,
            self.truth,
            runtime.bus,
            self.directory,
            runtime.leases,
            interval=s.task_sweep_interval_seconds,
            retention=s.task_terminal_retention_seconds,
            tombstone_ttl=s.task_idempotency_window_seconds,
            enabled=s.task_lease_sweep_enabled,
            feed=lambda: self.projecting.running,
        )
        self.projector.taps.append(self.sweeper.offer_states)
        self.depth = QueueDepth(
            self.tasks,
            lambda: self.projecting.running,
            interval=s.task_queue_depth_interval_seconds,
            max_inboxes=s.task_queue_depth_max_inboxes,
        )
        self.deliverer: WebhookDeliverer | None = None
        self._handlers = Handlers(self.deps)

    async def _candidates(self, org: str, inbox: str, kinds: Sequence[str], limit: int) -> list[TaskRow]:
        # Rows hidden by not_before for another minute come along, so a waiting pull can
        # wake itself when they become visible. The projection first applies every write made
        # before the query (read-your-writes: a pull right after a create sees it).
        await self._read_your_writes()
        return await self.tasks.candidates(org, inbox, time.time() + 60.0, kinds, limit)

    async def _read_your_writes(self) -> bool:
        """Wait (at most READ_WAIT_SECONDS) until the projector has applied every state write made
        before this call; False when it has not by then. The projector, when it runs here, inserts
        what it holds at once instead of lingering (LOOM_TASK_PROJECTION_LINGER_SECONDS)."""
        if self.projecting.running:
            self.projector.hurry()
        return await caught_up(self.runtime.bus.js, truth.STREAM, PROJECTOR_DURABLE, READ_WAIT_SECONDS)

    async def _projected(self) -> int:
        """The projector's position: its own count where it runs here, else its ack floor. Asked
        only by a write or a progress note that waits for the projector (service/admission.py),
        so a projector running here inserts at once instead of lingering."""
        if self.projecting.running:
            self.projector.hurry()
        if self.projecting.running and self.projector.applied_seq:
            return self.projector.applied_seq
        if time.monotonic() - self._remote_position[0] < REMOTE_POSITION_SECONDS:
            return self._remote_position[1]
        seq = await ack_floor(self.runtime.bus.js, truth.STREAM, PROJECTOR_DURABLE, answer_within=1.0)
        if seq:  # 0: not answering (asked again next look; the write's wait is bounded anyway)
            self._remote_position = (time.monotonic(), seq)
        return seq

    def handlers(self) -> dict[str, Handler]:
        return bind_handlers(self.runtime.catalog, self.name, self._handlers)

    async def start(self) -> None:
        s = self.settings
        await self.truth.ensure()
        await self.publisher.ensure_stream(float(s.task_events_max_age_seconds))
        await self.pushes.start()
        await ensure_projector(self.runtime.bus)
        await retire_consumers(self.runtime.bus)
        await self.projecting.start()
        await self.notes.start()
        await self.sweeper.start()
        await self.depth.start()
        if s.task_webhook_deliver_enabled:
            self.deliverer = WebhookDeliverer(self.runtime.bus, self.runtime.store, self.directory, settings=s)
            self.directory.on_change(self.deliverer.inbox_changed)
            await self.deliverer.start()

    async def stop(self) -> None:
        await self.deps.tail.stop()
        if self.deliverer is not None:
            await self.deliverer.stop()
        await self.depth.stop()
        await self.sweeper.stop()
        await self.notes.stop()
        await self.projecting.stop()
        await self.pushes.stop()
        await self.hub.stop()


def build(runtime: Runtime) -> TasksPlane:
    return TasksPlane(runtime)

"""What the op services share: one per replica, built by the plane."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from loom_core.bus import Bus, LeaseStore
from loom_core.identity.store import IdentityStore
from loom_core.store import Store

from ..consumers.tail import EventTail
from ..directory import Directory
from ..events import EventPublisher
from ..settings import TasksSettings
from ..store import InboxStore, TaskStore
from .access import Access
from .engine import Engine
from .wake import WakeHub


@dataclass(slots=True)
class Deps:
    """The narrow parts of the runtime the op services use (never the runtime itself)."""

    bus: Bus
    leases: LeaseStore
    identity: IdentityStore
    store: Store
    settings: TasksSettings
    tasks: TaskStore
    inboxes: InboxStore
    directory: Directory
    hub: WakeHub
    engine: Engine
    access: Access
    publisher: EventPublisher
    tail: EventTail
    #: Read-your-writes: waits (bounded) until the projection holds every state write made
    #: before the call; False when it does not by then (plane.py `_read_your_writes`).
    projected: Callable[[], Awaitable[bool]]

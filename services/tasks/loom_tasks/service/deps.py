"""What the op services share: one per replica, built by the plane."""

from __future__ import annotations

from dataclasses import dataclass

from loom_core.runtime import Runtime

from ..directory import Directory
from ..events import EventPublisher
from ..settings import TasksSettings
from ..store import InboxStore, TaskStore
from .access import Access
from .engine import Engine
from .wake import WakeHub


@dataclass(slots=True)
class Deps:
    runtime: Runtime
    settings: TasksSettings
    tasks: TaskStore
    inboxes: InboxStore
    directory: Directory
    hub: WakeHub
    engine: Engine
    access: Access
    publisher: EventPublisher

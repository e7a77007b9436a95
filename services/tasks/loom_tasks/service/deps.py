"""What the op services share: one per replica, built by the plane."""

from __future__ import annotations

from dataclasses import dataclass

from loom_core.runtime import Runtime
from loom_core.settings import Settings

from ..consumers.wake import WakeHub
from ..directory import Directory
from ..keys import TaskKeys
from ..store import InboxStore, TaskStore
from .access import Access
from .engine import Engine


@dataclass(slots=True)
class Deps:
    runtime: Runtime
    settings: Settings
    tasks: TaskStore
    inboxes: InboxStore
    keys: TaskKeys
    directory: Directory
    hub: WakeHub
    engine: Engine
    access: Access

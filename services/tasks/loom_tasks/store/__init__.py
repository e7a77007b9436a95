"""The task inbox's storage: the tasks' state on NATS (truth.py) and the SQL of the ClickHouse
projection and tables (one module per table family)."""

from .inboxes import InboxStore
from .tasks import TaskStore
from .truth import TaskTruth

__all__ = ["InboxStore", "TaskStore", "TaskTruth"]

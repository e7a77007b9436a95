"""The task inbox's SQL (one module per table family) and its group-commit writer."""

from .batcher import BatchWriter
from .inboxes import InboxStore
from .tasks import TaskStore

__all__ = ["BatchWriter", "InboxStore", "TaskStore"]

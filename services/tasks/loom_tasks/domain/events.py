"""A task event as it travels (JetStream, NATS subscribers, task.updates, task.history) (pure).

The event JSON:

    {"event_id", "org", "namespace", "inbox", "task_id", "kind", "poster", "status", "at",
     "version", "reason", "actor", "actor_agent", "task_kind", "title", "data"}

`seq` (the JetStream stream sequence, the updates cursor) is not in the stored body, since a
message cannot carry its own sequence: readers set it from the message metadata.
`event_id` is `<task_id>.<version>.<kind>` for a state change, so a re-published event is the
same event (JetStream drops it as a duplicate inside its window; readers keep the first).
"""

from __future__ import annotations

import json
import uuid
from typing import Any, NotRequired, TypedDict, cast

from .model import TaskRow
from .validate import format_time


class TaskEvent(TypedDict):
    """A task event as it travels (the JSON above); what a reader decodes from the wire may be
    malformed, and its readers (`handlers.event_pb`, the projector) take it defensively."""

    event_id: str
    org: str
    namespace: str
    inbox: str
    task_id: str
    kind: str
    poster: str
    status: str
    at: str
    version: int
    reason: str
    actor: str
    actor_agent: str
    task_kind: str
    title: str
    data: dict[str, Any]  # the move's own fields: free-form JSON (a note, an outcome)
    seq: NotRequired[int]


#: The event's text fields: every event carries the first group; an older or partial one may lack
#: the second. The readers that copy an event field by field (handlers.event_pb, the projector's
#: row and task.history's read back in store/tasks.py) take the names from here.
REQUIRED_TEXT = ("event_id", "org", "namespace", "inbox", "task_id", "kind", "poster", "status")
OPTIONAL_TEXT = ("reason", "actor", "actor_agent", "task_kind", "title")
TEXT_FIELDS = REQUIRED_TEXT + OPTIONAL_TEXT


def from_wire(data: bytes) -> TaskEvent | None:
    """An event as read off the stream, None unless it decodes to a JSON object; its fields are
    not checked here (its readers take them defensively)."""
    try:
        parsed = json.loads(data)
    except ValueError:
        return None
    return cast(TaskEvent, parsed) if isinstance(parsed, dict) else None


def event_id(row: TaskRow, kind: str) -> str:
    return f"{row.task_id}.{row.version}.{kind}"


def progress_event_id(row: TaskRow) -> str:
    # A progress note changes no state (no new version), so each note has an id of its own.
    return f"{row.task_id}.{row.version}.progress.{uuid.uuid4().hex[:12]}"


def build(
    row: TaskRow,
    kind: str,
    *,
    at: float,
    data: dict[str, Any] | None = None,
    actor: str = "",
    actor_agent: str = "",
    eid: str = "",
    reason: str = "",
) -> TaskEvent:
    """`reason` is this event's own (the move's, or none), never the one an earlier move left on the row."""
    return TaskEvent(
        event_id=eid or event_id(row, kind),
        org=row.org,
        namespace=row.namespace,
        inbox=row.inbox,
        task_id=row.task_id,
        kind=kind,
        poster=row.poster,
        status=row.status,
        at=format_time(at),
        version=row.version,
        reason=reason,
        actor=actor,
        actor_agent=actor_agent,
        task_kind=row.kind,
        title=row.title,
        data=data or {},
    )

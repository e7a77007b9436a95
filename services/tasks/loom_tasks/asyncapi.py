"""The tasks plane's subjects, for FastStream's AsyncAPI document (served by the gateway at
GET /asyncapi.json and /asyncapi through the `loom.asyncapi` entry point).

The task events as a subscriber sees them: one channel per event kind on
`loom.tasks.{org}.{namespace}.{inbox}.{kind}` (core's `loom_core.bus.task_subjects`), each
message's payload schema built from the proto's `loom.tasks.v1.TaskEvent`. Then what the plane
itself consumes (task state, notes, wake-ups, config changes, the webhook deliverer's events).
"""

from __future__ import annotations

from typing import Any

from faststream.nats import NatsBroker
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from loom_api.tasks.v1 import tasks_pb2 as pb
from loom_core.bus import describe
from loom_core.bus.task_subjects import event_subject
from pydantic import BaseModel, Field, create_model

from .consumers.layout import CONSUMERS
from .webhooks import WEBHOOKS

#: Every kind a task event has (the last token of its subject).
KINDS: dict[str, str] = {
    "created": "A task was posted (it lands in triage or todo).",
    "accepted": "A triage item was accepted into todo.",
    "claimed": "A worker claimed the task (pull or claim): in_progress under a lease.",
    "progress": "The holder reported progress (no state change).",
    "done": "The holder completed the task (its outcome in the task).",
    "failed": "The holder gave up on the task, with a reason.",
    "deferred": "The holder put the task aside until resume_at.",
    "blocked": "The task waits on the sender, a person or something external.",
    "wont_do": "The owner declined the task.",
    "cancelled": "The task was cancelled (its poster, or the owner).",
    "unblocked": "A blocked task went back to todo.",
    "resumed": "A deferred task went back to todo (resume_at reached, or task.resume).",
    "reopened": "A failed, wont_do or cancelled task went back to todo.",
    "updated": "The owner changed the task's fields (task.update).",
    "reassigned": "The task moved to another inbox.",
    "released": "A lease expired: the task went back to todo.",
    "escalated": "A triage item waited past its inbox's triage_escalate_after_seconds.",
}

_SCALARS: dict[int, type] = {
    FieldDescriptor.TYPE_STRING: str,
    FieldDescriptor.TYPE_BOOL: bool,
    FieldDescriptor.TYPE_INT32: int,
    FieldDescriptor.TYPE_INT64: int,
    FieldDescriptor.TYPE_UINT32: int,
    FieldDescriptor.TYPE_UINT64: int,
    FieldDescriptor.TYPE_DOUBLE: float,
    FieldDescriptor.TYPE_FLOAT: float,
}


def model_of(descriptor: Descriptor) -> type[BaseModel]:
    """A pydantic model with the message's fields (a Struct is a JSON object)."""
    fields: dict[str, Any] = {}
    for f in descriptor.fields:
        typ: Any = _SCALARS.get(f.type, dict)
        if f.message_type is not None and f.message_type.full_name != "google.protobuf.Struct":
            typ = model_of(f.message_type)
        if f.is_repeated:
            typ = list[typ]
        fields[f.name] = (typ, Field(default=None))
    return create_model(descriptor.name, **fields)


def declare(broker: NatsBroker) -> None:
    """The task-event channels on `broker` (a spec-only broker: never connected)."""
    event = model_of(pb.TaskEvent.DESCRIPTOR)
    for kind, what in KINDS.items():
        broker.publisher(
            event_subject("{org}", "{namespace}", "{inbox}", kind),
            title=f"task.{kind}",
            description=f"{what} On the LOOM_TASK_EVENTS stream; `seq` is set by readers from the stream sequence.",
            schema=event,
        )
    describe(broker, (*CONSUMERS, WEBHOOKS))

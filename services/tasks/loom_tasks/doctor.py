"""The tasks plane's `loom doctor` checks (entry point `loom.doctor`: tasks): its two JetStream
streams (task state, the truth every transition writes with compare-and-set, and task events)
and its tables."""

from __future__ import annotations

from loom_core.doctor import Check, DoctorContext, schema_check, stream_checks

from .events import STREAM as EVENTS_STREAM
from .schema import MIGRATIONS
from .store.truth import STREAM as STATE_STREAM
from .webhooks import MIGRATIONS as WEBHOOK_MIGRATIONS

STREAM_FIX = "restart a process serving the tasks plane (it creates its streams at start: `loom up`, or roll the tasks Deployment)"


async def checks(ctx: DoctorContext) -> list[Check]:
    return [
        *await stream_checks(ctx, (STATE_STREAM, EVENTS_STREAM), "tasks", STREAM_FIX),
        await schema_check(ctx, "tasks", [*MIGRATIONS, *WEBHOOK_MIGRATIONS]),
    ]

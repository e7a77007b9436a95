"""The tasks plane's settings (entry point `loom.settings`: tasks), read as
`settings.plane(TasksSettings)`; rendered into docs/configuration.md by `loom config docs`."""

from __future__ import annotations

from loom_core.settings import PlaneSettings
from pydantic import Field


class TasksSettings(PlaneSettings):
    task_lease_sweep_enabled: bool = Field(
        True,
        description="Runs the sweeper: expired leases, deferred tasks reaching resume_at, stale triage, finished tasks leaving NATS.",
    )
    task_webhook_deliver_enabled: bool = Field(True, description="Posts one signed notice per new event batch to an inbox's webhook_url.")
    task_sweep_interval_seconds: float = Field(
        1.0, description="Seconds between lease-sweep passes (expired leases, resume_at, triage escalation); one replica sweeps at a time."
    )
    task_terminal_retention_seconds: float = Field(
        900.0, description="How long a finished task stays in NATS (the truth) before it is served from the ClickHouse projection alone."
    )
    task_idempotency_window_seconds: float = Field(
        86400.0,
        description="How long a finished task's tombstone keeps its idempotency_key taken (a create with the key answers the task, not a new one).",
    )
    task_state_replicas: int = Field(
        1,
        description="JetStream replicas of the task state and event streams: 1 embedded, 3 in a cluster (see docs/operations/durability.md).",
    )
    task_pull_poll_seconds: float = Field(
        2.0,
        description="While a long poll waits, how often it re-reads the store besides the NATS wake-ups (a safety net for a lost wake-up).",
    )
    task_config_cache_ttl_seconds: float = Field(
        5.0, description="Longest a replica serves a stale inbox or trust row (changes are also pushed over NATS)."
    )
    task_events_max_age_seconds: int = Field(
        7 * 86400, description="How long task events stay in the LOOM_TASK_EVENTS stream (the task.updates cursor's reach)."
    )
    task_projection_max_behind: int = Field(
        2000,
        description="Most state writes the projector may be behind a replica's last write before that replica's writes wait for it (bounded projection lag; 0: unbounded).",
    )
    task_projection_admit_wait_seconds: float = Field(
        2.0, description="Longest a write waits for the projector to come within task_projection_max_behind; then it goes ahead."
    )
    task_projection_linger_seconds: float = Field(
        0.25,
        description="Least time between two ClickHouse projection inserts while writes trickle in (each costs about the same CPU whatever its size); a fetch of 200 writes or more and the one after it (a burst and its tail), or a read waiting on the projector's replica, go at once; 0: insert every fetch.",
        ge=0.0,
    )
    task_webhook_timeout_seconds: float = Field(5.0, description="Timeout of one webhook POST (connect is capped at 3 s).")
    task_webhook_max_attempts: int = Field(
        5, description="Attempts per webhook notice (a refused address, a redirect or a 4xx is not retried)."
    )
    task_webhook_retry_base_seconds: float = Field(1.0, description="First webhook retry delay; doubled per attempt, at most 30 s.")
    task_queue_depth_interval_seconds: float = Field(
        15.0,
        description="How often the replica running the projector counts unfinished tasks per inbox and state for /metrics (loom_task_queue_depth); 0: never.",
    )
    task_queue_depth_max_inboxes: int = Field(
        50,
        description='Inboxes labelled on loom_task_queue_depth (the deepest); the rest are summed under inbox "(other)", so the label set stays bounded.',
    )

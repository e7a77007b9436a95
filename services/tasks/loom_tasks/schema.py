"""The task inbox's tables (idempotent migrations).

- task_inboxes, task_policies: ReplacingMergeTree(version) rows, read with FINAL.
- task_state: the projection of the tasks' state on NATS (store/truth.py), written in batches by
  consumers/projector.py: the columns reads filter and sort on, and the task as one JSON `doc`.
  ReplacingMergeTree(rev): the revision of the state it was made from, so a batch applied twice
  or late never wins over a newer one; each batch's insert carries its dedup token. The sorting
  key is (org, task_id) alone, since task.reassign moves a task between inboxes.
- task_events: append-only, one row per event (task.history), written by consumers/projector.py
  with the task rows of the same batch (progress notes: consumers/notes.py); readers keep the
  first row of an event_id, so an event written twice is read once.
"""

from __future__ import annotations

from loom_core.store import Migration

MIGRATIONS: list[Migration] = [
    Migration(
        "tasks",
        "task_inboxes",
        """
        CREATE TABLE IF NOT EXISTS {db}.task_inboxes (
            org String, name String, namespace String, owner_agent String,
            posters Array(String), accept_disclosure Array(String),
            default_lease_seconds UInt32, max_attempts UInt32, max_defers UInt32,
            triage_escalate_after_seconds UInt32,
            webhook_url String, webhook_secret_ref String, description String,
            created_at DateTime64(6, 'UTC'), updated_at DateTime64(6, 'UTC'),
            version UInt64, tombstoned_at Nullable(DateTime64(6, 'UTC'))
        ) ENGINE = ReplacingMergeTree(version) ORDER BY (org, name)""",
    ),
    Migration(
        "tasks",
        "task_policies",
        """
        CREATE TABLE IF NOT EXISTS {db}.task_policies (
            org String, inbox String, poster String, kind String, mode LowCardinality(String),
            require_evidence Array(String), updated_at DateTime64(6, 'UTC'), updated_by String,
            removed UInt8, version UInt64
        ) ENGINE = ReplacingMergeTree(version) ORDER BY (org, inbox, poster, kind)""",
    ),
    Migration(
        "tasks",
        "task_state",
        """
        CREATE TABLE IF NOT EXISTS {db}.task_state (
            org String, task_id String, inbox String, namespace String, kind String,
            status LowCardinality(String), priority Int32,
            deadline Nullable(DateTime64(6, 'UTC')), not_before Nullable(DateTime64(6, 'UTC')),
            poster String, created_at DateTime64(6, 'UTC'), updated_at DateTime64(6, 'UTC'),
            version UInt64, rev UInt64, doc String
        ) ENGINE = ReplacingMergeTree(rev) ORDER BY (org, task_id)
        SETTINGS non_replicated_deduplication_window = 1000""",
    ),
    Migration(
        "tasks",
        "task_events",
        """
        CREATE TABLE IF NOT EXISTS {db}.task_events (
            org String, task_id String, event_id String, kind LowCardinality(String),
            namespace String, inbox String, status LowCardinality(String), poster String,
            actor String, actor_agent String, reason String, task_kind String, title String,
            data String, version UInt64, at DateTime64(6, 'UTC')
        ) ENGINE = MergeTree ORDER BY (org, task_id, at)""",
    ),
]

"""The task inbox's tables (idempotent migrations).

- task_inboxes, task_policies: ReplacingMergeTree(version) rows, read with FINAL.
- tasks: ReplacingMergeTree(version), one row per task version; the newest version wins. The
  sorting key is (org, task_id) alone, since task.reassign moves a task between inboxes.
  The version is the one the task's lease row (NATS KV) handed out, so it only grows.
  No skip indexes: each one roughly doubled the cost of the small inserts every change makes.
- task_events: append-only, one row per event (task.history), copied from the event stream by
  consumers/history.py; readers keep the first row of an event_id, so an event written twice
  is read once.
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
        "tasks",
        """
        CREATE TABLE IF NOT EXISTS {db}.tasks (
            org String, task_id String, inbox String, namespace String, owner_agent String,
            kind String, title String, brief String, disclosure LowCardinality(String),
            priority Int32, deadline Nullable(DateTime64(6, 'UTC')), not_before Nullable(DateTime64(6, 'UTC')),
            origin String, parent_task_id String,
            poster String, poster_agent String, poster_namespace String, idempotency_key String,
            status LowCardinality(String), reason String, blocked_on LowCardinality(String),
            resume_at Nullable(DateTime64(6, 'UTC')), outcome String,
            claimed_by String, claimed_agent String, fence UInt64,
            lease_expires_at Nullable(DateTime64(6, 'UTC')), lease_seconds UInt32,
            attempts UInt32, defers UInt32,
            escalate_at Nullable(DateTime64(6, 'UTC')), escalated_at Nullable(DateTime64(6, 'UTC')),
            created_at DateTime64(6, 'UTC'), updated_at DateTime64(6, 'UTC'), version UInt64
        ) ENGINE = ReplacingMergeTree(version) ORDER BY (org, task_id)""",
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

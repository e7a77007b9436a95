"""The assistant's tables: loom.assistant_service (one row: the service user, sealed), the org
switch for model calls, each namespace's daily model cost cap, and the ledger column its spend is recorded in."""

from __future__ import annotations

from loom_core.store import Migration

MIGRATIONS = [
    Migration(
        "assistant",
        "assistant_service",
        """
        CREATE TABLE IF NOT EXISTS {db}.assistant_service (
            id UInt8,
            email String,
            sealed String,
            has_key Bool,
            agent_id String,
            definition_version UInt32,
            definition_model String,
            updated_at DateTime64(6, 'UTC'),
            version UInt64
        ) ENGINE = ReplacingMergeTree(version)
        ORDER BY id""",
    ),
    Migration(
        "assistant",
        "assistant_model_calls",
        """
        CREATE TABLE IF NOT EXISTS {db}.assistant_model_calls (
            org String,
            enabled Bool,
            updated_at DateTime64(6, 'UTC'),
            version UInt64
        ) ENGINE = ReplacingMergeTree(version)
        ORDER BY org""",
    ),
    Migration(
        "assistant",
        "assistant_budgets",
        """
        CREATE TABLE IF NOT EXISTS {db}.assistant_budgets (
            org String,
            namespace String,
            daily_cost_cap_usd Float64,
            is_set Bool,
            updated_at DateTime64(6, 'UTC'),
            version UInt64
        ) ENGINE = ReplacingMergeTree(version)
        ORDER BY (org, namespace)""",
    ),
    Migration(
        "assistant",
        "agent_events_upstream_cost",
        "ALTER TABLE {db}.agent_events ADD COLUMN IF NOT EXISTS upstream_cost_usd Float64 DEFAULT 0",
    ),
]

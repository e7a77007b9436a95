"""The policy plane's tables (idempotent migrations)."""

from __future__ import annotations

from loom_core.store import Migration
from loom_core.store.caller import CALL_COLUMNS_DDL

MIGRATIONS = [
    Migration(
        "policy",
        "policy_rules",
        """
        CREATE TABLE IF NOT EXISTS {db}.policy_rules (
            org LowCardinality(String),
            namespace String,
            name String,
            effect LowCardinality(String),
            actions Array(String),
            condition String,
            description String,
            mode LowCardinality(String),
            leaf_count UInt16,
            updated_by String,
            updated_at DateTime64(6, 'UTC'),
            version UInt64,
            tombstoned_at Nullable(DateTime64(6, 'UTC'))
        ) ENGINE = ReplacingMergeTree(version)
        ORDER BY (org, namespace, name)""",
    ),
    Migration(
        "policy",
        "policy_decisions",
        f"""
        CREATE TABLE IF NOT EXISTS {{db}}.policy_decisions (
            {CALL_COLUMNS_DDL},
            op LowCardinality(String),
            transport LowCardinality(String),
            request_id String,
            decision LowCardinality(String),
            enforced Bool,
            mode LowCardinality(String),
            write_shaped Bool,
            determining_rules Array(String),
            rule_names Array(String),
            errors String,
            rules String,
            latency_ms Float64
        ) ENGINE = MergeTree
        PARTITION BY toYYYYMM(ts)
        ORDER BY (org, namespace, ts)
        SETTINGS non_replicated_deduplication_window = 10000""",
    ),
    # Batches arrive through JetStream and may be redelivered: the batch id dedups the insert.
    Migration(
        "policy",
        "policy_decisions_dedup_window",
        "ALTER TABLE {db}.policy_decisions MODIFY SETTING non_replicated_deduplication_window = 10000",
    ),
    Migration(
        "policy",
        "policy_audit",
        """
        CREATE TABLE IF NOT EXISTS {db}.policy_audit (
            ts DateTime64(6, 'UTC'),
            org LowCardinality(String),
            namespace String,
            kind LowCardinality(String),
            subject String,
            agent String,
            request_id String,
            rule String,
            change LowCardinality(String),
            reasons Array(String),
            before String,
            after String
        ) ENGINE = MergeTree
        PARTITION BY toYYYYMM(ts)
        ORDER BY (org, namespace, ts)""",
    ),
]

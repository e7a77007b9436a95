"""The decisions plane's tables.

- memory_rows: every version of every memory row (a key under one writer identity), with the
  embedding of its excerpt (Array(Float32)); the newest version of an identity is the row.
- memory_vectors: each row's versions for search (ReplacingMergeTree on version, so merges keep
  the newest), scanned exactly by cosineDistance (no vector index: a large namespace is searched
  through each process's vector cache, service/vector_index.py). Filled from memory_rows'
  inserts by the materialized view memory_vectors_of_rows (one insert a write round, not two).
- memory_version_deletes: versions removed by memory.delete_version.
- decision_records: every version of each key's decision record (active | tombstoned).
- decision_edges: caused_by / influenced_by edges, filed under the record that states them (its
  record_version: the version decision.record wrote, which outcome and retirement versions carry).
- memory_feedback: credits (+1) and charges (-1) a decision's outcome gave the memories its run used;
  the newest row per (key, decision_key) counts, so a later verdict corrects an earlier one (0: undone).
- memory_chunks: a value longer than the excerpt search embeds, past the excerpt, in pieces, each
  embedded; filed under the value's hash, so search reads a row's chunks while its value is that.
- decision_records.memories_used: the keys the decision says it relied on (decision.record).
- code_repos, code_namespaces, code_symbols: the code index (store/code.py).
"""

from __future__ import annotations

from loom_core.store import Migration

from .code import CODE_MIGRATIONS

# A memory row's identity: a key under one writer's scope (agent, user, session), the first
# columns of each table filed by row.
MEMORY_IDENTITY_DDL = ",\n                ".join(
    ("org LowCardinality(String)", "namespace String", "key String", "agent String", "user String", "session String")
)


def migrations() -> list[Migration]:
    """The tables."""
    return [
        Migration(
            "decisions",
            "memory_rows",
            f"""
            CREATE TABLE IF NOT EXISTS {{db}}.memory_rows (
                {MEMORY_IDENTITY_DDL},
                memory_id String,
                version UInt64,
                value String,
                value_hash String,
                memory_type LowCardinality(String),
                tags Array(String),
                pinned UInt8,
                attested_hash String,
                status LowCardinality(String),
                conflicts Array(String),
                reinforcements UInt32,
                files Array(String),
                source_resource_id String,
                source_class String,
                op LowCardinality(String),
                actor String,
                run_id String,
                ts DateTime64(6, 'UTC'),
                embedding Array(Float32)
            ) ENGINE = MergeTree
            ORDER BY (org, namespace, key, agent, user, session, version)""",
        ),
        Migration(
            "decisions",
            "memory_vectors",
            f"""
            CREATE TABLE IF NOT EXISTS {{db}}.memory_vectors (
                {MEMORY_IDENTITY_DDL},
                version UInt64,
                memory_type LowCardinality(String),
                tags Array(String),
                live UInt8,
                embedding Array(Float32)
            ) ENGINE = ReplacingMergeTree(version)
            ORDER BY (org, namespace, key, agent, user, session)""",
        ),
        Migration(
            "decisions",
            "memory_vectors.drop embedding_hnsw",
            # Tables an earlier Loom created carry ClickHouse's HNSW index (vector_similarity),
            # which every insert built for its part and every merge rebuilt for the merged one
            # (~1 ms of chDB CPU a record at 64 writers, ~20 ms one writer at a time:
            # docs/benchmarks.md); no search asks it since the vector cache serves large namespaces.
            "ALTER TABLE {db}.memory_vectors DROP INDEX IF EXISTS embedding_hnsw",
            only_if="SELECT 1 FROM system.data_skipping_indices "
            "WHERE database = '{db}' AND table = 'memory_vectors' AND name = 'embedding_hnsw'",
        ),
        Migration(
            "decisions",
            "memory_vectors_of_rows",
            # Each memory_rows insert also lands in memory_vectors within the same statement: a
            # round's statements cost ~8-13 ms of CPU each whatever they carry (benchmarks.md).
            # On a cluster it fires on the replica that took the insert; the others replicate both tables.
            """
            CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.memory_vectors_of_rows TO {db}.memory_vectors AS
            SELECT org, namespace, key, agent, user, session, version, memory_type, tags,
                toUInt8(status = 'active') AS live, embedding
            FROM {db}.memory_rows""",
        ),
        Migration(
            "decisions",
            "memory_version_deletes",
            f"""
            CREATE TABLE IF NOT EXISTS {{db}}.memory_version_deletes (
                {MEMORY_IDENTITY_DDL},
                version UInt64,
                ts DateTime64(6, 'UTC')
            ) ENGINE = MergeTree
            ORDER BY (org, namespace, key, agent, user, session, version)""",
        ),
        Migration(
            "decisions",
            "decision_records",
            """
            CREATE TABLE IF NOT EXISTS {db}.decision_records (
                org LowCardinality(String),
                namespace String,
                key String,
                version UInt64,
                record_version UInt64,
                status LowCardinality(String),
                category String,
                scenario String,
                reasoning String,
                outcome String,
                alternatives Array(String),
                confidence Nullable(Float64),
                caused_by Array(String),
                influenced_by Array(String),
                run_id String,
                agent String,
                user String,
                session String,
                realized_outcome String,
                success Nullable(UInt8),
                files Array(String),
                source_resource_id String,
                source_class String,
                tags Array(String),
                recorded_at DateTime64(6, 'UTC'),
                outcome_at Nullable(DateTime64(6, 'UTC')),
                ts DateTime64(6, 'UTC')
            ) ENGINE = MergeTree
            ORDER BY (org, namespace, key, version)""",
        ),
        Migration(
            "decisions",
            "decision_edges",
            """
            CREATE TABLE IF NOT EXISTS {db}.decision_edges (
                org LowCardinality(String),
                namespace String,
                src String,
                dst String,
                kind LowCardinality(String),
                dst_version UInt64,
                ts DateTime64(6, 'UTC')
            ) ENGINE = MergeTree
            ORDER BY (org, namespace, dst, src)""",
        ),
        Migration(
            "decisions",
            "memory_feedback",
            """
            CREATE TABLE IF NOT EXISTS {db}.memory_feedback (
                org LowCardinality(String),
                namespace String,
                key String,
                decision_key String,
                run_id String,
                delta Int8,
                ts DateTime64(6, 'UTC')
            ) ENGINE = MergeTree
            ORDER BY (org, namespace, key, ts)""",
        ),
        Migration(
            "decisions",
            "memory_chunks",
            f"""
            CREATE TABLE IF NOT EXISTS {{db}}.memory_chunks (
                {MEMORY_IDENTITY_DDL},
                value_hash String,
                idx UInt16,
                text String,
                embedding Array(Float32)
            ) ENGINE = ReplacingMergeTree
            ORDER BY (org, namespace, key, agent, user, session, value_hash, idx)""",
        ),
        Migration(
            "decisions",
            "decision_records.memories_used",
            "ALTER TABLE {db}.decision_records ADD COLUMN IF NOT EXISTS memories_used Array(String)",
        ),
        *CODE_MIGRATIONS,
    ]

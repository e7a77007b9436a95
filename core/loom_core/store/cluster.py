"""Migrations on a replicated ClickHouse cluster (LOOM_CLICKHOUSE_CLUSTER).

Each plane writes its schema once, for one server: `CREATE TABLE IF NOT EXISTS {db}.t (…)
ENGINE = ReplacingMergeTree(version) ORDER BY …`. On a cluster the same statements must create
the table on every replica and replicate its rows, so `on_cluster` rewrites a migration's DDL:

- `CREATE DATABASE|TABLE [IF NOT EXISTS] name` and `ALTER TABLE name` get `ON CLUSTER '<cluster>'`
  (distributed DDL: every server of the cluster runs it, through Keeper);
- every `*MergeTree` engine becomes its `Replicated*MergeTree` twin, with the replica path and
  name spelled out as ClickHouse's own defaults (`/clickhouse/tables/{uuid}/{shard}`,
  `{replica}`), followed by the engine's own arguments: `ReplacingMergeTree(version)` becomes
  `ReplicatedReplacingMergeTree('/clickhouse/tables/{uuid}/{shard}', '{replica}', version)`.
  `{uuid}` is the table's UUID, the same on every replica under `ON CLUSTER`, so a table dropped
  and created again gets a fresh Keeper path.

The shape is one shard with N replicas: every server holds every row, so a read on any replica
sees the table whole once replication has caught up (Loom sets no quorum itself: a deployment
that needs a read to see a write made a moment ago on another replica sets `insert_quorum` and
`select_sequential_consistency` in Loom's user's settings profile). Statements that are not DDL
pass through unchanged, as does a statement on a single server (cluster empty).
"""

from __future__ import annotations

import re

REPLICA_PATH = "/clickhouse/tables/{uuid}/{shard}"
REPLICA_NAME = "{replica}"

_CLUSTER_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
# `CREATE [OR REPLACE] DATABASE|TABLE [IF NOT EXISTS] <name>` and `ALTER TABLE <name>`; the name may
# be `{db}.t`, `db.t`, or backquoted parts.
_NAME = r"(?:`[^`]+`|\{db\}|[A-Za-z_][A-Za-z0-9_]*)(?:\.(?:`[^`]+`|[A-Za-z_][A-Za-z0-9_]*))?"
_DDL_HEAD = re.compile(
    rf"^(\s*(?:CREATE\s+(?:OR\s+REPLACE\s+)?(?:DATABASE|TABLE|MATERIALIZED\s+VIEW|VIEW|DICTIONARY)"
    rf"(?:\s+IF\s+NOT\s+EXISTS)?|ALTER\s+TABLE|DROP\s+(?:TABLE|DATABASE|VIEW|DICTIONARY)(?:\s+IF\s+EXISTS)?"
    rf"|RENAME\s+TABLE|TRUNCATE\s+TABLE(?:\s+IF\s+EXISTS)?)\s+{_NAME})",
    re.IGNORECASE,
)
_ON_CLUSTER = re.compile(r"\bON\s+CLUSTER\b", re.IGNORECASE)
# ENGINE = [Replicated]<Family>MergeTree[(args)]
_ENGINE = re.compile(r"\bENGINE\s*=\s*(Replicated)?(\w*)MergeTree\b(\s*\((\s*\))?)?", re.IGNORECASE)


def check_cluster(cluster: str) -> str:
    if not _CLUSTER_NAME.match(cluster):
        raise ValueError(f"bad ClickHouse cluster name {cluster!r}")
    return cluster


def on_cluster(sql: str, cluster: str) -> str:
    """The statement as it must run on `cluster`; unchanged when `cluster` is empty or the
    statement is not DDL."""
    if not cluster:
        return sql
    check_cluster(cluster)
    head = _DDL_HEAD.match(sql)
    if head is None:
        return sql
    out = sql
    if not _ON_CLUSTER.search(sql):
        out = f"{head.group(1)} ON CLUSTER '{cluster}'{sql[head.end() :]}"
    return _ENGINE.sub(_replicated, out)


def _replicated(m: re.Match[str]) -> str:
    if m.group(1):  # already Replicated…: the author chose its path
        return m.group(0)
    family = m.group(2)
    paths = f"'{REPLICA_PATH}', '{REPLICA_NAME}'"
    if m.group(3) and not m.group(4):  # the engine had arguments: keep them after the path and name
        return f"ENGINE = Replicated{family}MergeTree({paths}, "
    return f"ENGINE = Replicated{family}MergeTree({paths})"

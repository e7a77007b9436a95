"""LOOM_CLICKHOUSE_CLUSTER: every migration of every installed plane, rewritten for a replicated
cluster (ON CLUSTER, Replicated*MergeTree), and the server suite that runs it on a real cluster
when LOOM_TEST_CLICKHOUSE_URL names one."""

from __future__ import annotations

import importlib
import os
import pkgutil
import re
import uuid
from collections.abc import Sequence
from importlib.metadata import entry_points

import pytest
from loom_core.runtime import CORE_MIGRATIONS
from loom_core.settings import Settings
from loom_core.store import Migration, open_store, run_migrations
from loom_core.store.cluster import on_cluster

CLUSTER = "loom_cluster"
SERVER_URL = os.environ.get("LOOM_TEST_CLICKHOUSE_URL", "")
SERVER_CLUSTER = os.environ.get("LOOM_CLICKHOUSE_CLUSTER", "")


def all_migrations() -> list[Migration]:
    """The core's migrations and every `MIGRATIONS` list in every installed plane's package (a
    plane that lands later is covered without a change here)."""
    out: list[Migration] = list(CORE_MIGRATIONS)
    for ep in entry_points(group="loom.planes"):
        pkg = importlib.import_module(ep.value.split(":")[0].split(".")[0])
        for info in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
            try:
                mod = importlib.import_module(info.name)
            except Exception:  # noqa: BLE001 - a module that needs what this test lacks holds no schema list
                continue
            found = getattr(mod, "MIGRATIONS", None)
            if isinstance(found, (list, tuple)) and all(isinstance(m, Migration) for m in found):
                out.extend(found)
    seen: set[str] = set()
    unique = []
    for m in out:
        if m.sql not in seen:
            seen.add(m.sql)
            unique.append(m)
    return unique


def creates(migrations: Sequence[Migration]) -> list[str]:
    return [m.sql for m in migrations if re.match(r"\s*CREATE\s+TABLE", m.sql, re.I)]


def test_every_table_of_every_plane_is_created_on_the_cluster_with_a_replicated_engine() -> None:
    tables = creates(all_migrations())
    assert len(tables) >= 10, "the core, tasks and policy tables at least"
    for sql in tables:
        out = on_cluster(sql, CLUSTER)
        assert re.match(r"\s*CREATE TABLE IF NOT EXISTS \{db\}\.\w+ ON CLUSTER 'loom_cluster' \(", out), out[:120]
        engine = re.search(r"ENGINE\s*=\s*(\w+)\(([^)]*)\)", out)
        assert engine is not None, out
        assert engine.group(1).startswith("Replicated") and engine.group(1).endswith("MergeTree"), engine.group(0)
        assert engine.group(2).startswith("'/clickhouse/tables/{uuid}/{shard}', '{replica}'"), engine.group(0)
        assert "ENGINE = MergeTree" not in out and "ENGINE = ReplacingMergeTree" not in out


def test_engine_arguments_follow_the_replica_path_and_name() -> None:
    sql = "CREATE TABLE IF NOT EXISTS {db}.t (k String, version UInt64) ENGINE = ReplacingMergeTree(version) ORDER BY k"
    assert on_cluster(sql, CLUSTER) == (
        "CREATE TABLE IF NOT EXISTS {db}.t ON CLUSTER 'loom_cluster' (k String, version UInt64) "
        "ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{uuid}/{shard}', '{replica}', version) ORDER BY k"
    )
    plain = "CREATE TABLE IF NOT EXISTS {db}.e (k String) ENGINE = MergeTree ORDER BY k"
    assert on_cluster(plain, CLUSTER).endswith("ENGINE = ReplicatedMergeTree('/clickhouse/tables/{uuid}/{shard}', '{replica}') ORDER BY k")
    empty = "CREATE TABLE {db}.r (k String) ENGINE = ReplacingMergeTree() ORDER BY k"
    assert "ReplicatedReplacingMergeTree('/clickhouse/tables/{uuid}/{shard}', '{replica}') ORDER BY k" in on_cluster(empty, CLUSTER)


def test_database_and_alter_run_on_the_cluster_and_other_statements_pass_through() -> None:
    assert on_cluster("CREATE DATABASE IF NOT EXISTS {db}", CLUSTER) == "CREATE DATABASE IF NOT EXISTS {db} ON CLUSTER 'loom_cluster'"
    alter = "ALTER TABLE {db}.tasks ADD COLUMN IF NOT EXISTS x String"
    assert on_cluster(alter, CLUSTER) == "ALTER TABLE {db}.tasks ON CLUSTER 'loom_cluster' ADD COLUMN IF NOT EXISTS x String"
    for sql in ("SELECT 1", "INSERT INTO {db}.t FORMAT JSONEachRow", "ALTER TABLE {db}.t ON CLUSTER c DELETE WHERE 1"):
        assert on_cluster(sql, CLUSTER) == sql
    replicated = "CREATE TABLE {db}.x (k String) ENGINE = ReplicatedMergeTree('/p/{shard}', '{replica}') ORDER BY k"
    assert "ReplicatedMergeTree('/p/{shard}', '{replica}')" in on_cluster(replicated, CLUSTER)


def test_every_materialized_view_is_created_on_the_cluster() -> None:
    from loom_decisions.store.schema import migrations as decisions_migrations  # a function of the vector width, not a MIGRATIONS list

    every = [*all_migrations(), *decisions_migrations()]
    views = [m.sql for m in every if re.match(r"\s*CREATE\s+MATERIALIZED\s+VIEW", m.sql, re.I)]
    assert views, "the decisions plane's memory_vectors_of_rows at least"
    for sql in views:
        out = on_cluster(sql, CLUSTER)
        head = r"\s*CREATE MATERIALIZED VIEW IF NOT EXISTS \{db\}\.\w+ ON CLUSTER 'loom_cluster' TO \{db\}\.\w+ AS"
        assert re.match(head, out), out[:160]


def test_no_cluster_leaves_every_migration_as_written() -> None:
    for m in all_migrations():
        assert on_cluster(m.sql, "") == m.sql


def test_a_cluster_name_that_is_not_an_identifier_is_refused() -> None:
    with pytest.raises(ValueError):
        on_cluster("CREATE DATABASE {db}", "c' ; DROP")


async def test_a_cluster_without_a_clickhouse_server_is_refused(tmp_path: object) -> None:
    with pytest.raises(ValueError, match="LOOM_CLICKHOUSE_URL"):
        await open_store(Settings(clickhouse_cluster="c", data_dir=tmp_path))  # type: ignore[arg-type]


# --------------------------------------------------------------------------- on a real server

server = pytest.mark.skipif(not SERVER_URL, reason="LOOM_TEST_CLICKHOUSE_URL not set: migrations on a ClickHouse server not run")


@server
@pytest.mark.clickhouse_server
async def test_every_migration_runs_on_the_server_and_tables_are_replicated_on_its_cluster() -> None:
    db = f"loom_deploy_{uuid.uuid4().hex[:8]}"
    store = await open_store(Settings(clickhouse_url=SERVER_URL, clickhouse_database=db, clickhouse_cluster=SERVER_CLUSTER))
    try:
        await run_migrations(store, all_migrations())
        rows = await store.query("SELECT name, engine FROM system.tables WHERE database = {db:String}", {"db": db})
        engines = {r["name"]: r["engine"] for r in rows}
        assert len(engines) == len(creates(all_migrations()))
        if SERVER_CLUSTER:
            assert all(e.startswith("Replicated") for e in engines.values()), engines
    finally:
        await store.execute(f"DROP DATABASE IF EXISTS {db}" + (f" ON CLUSTER '{SERVER_CLUSTER}' SYNC" if SERVER_CLUSTER else " SYNC"))
        await store.close()

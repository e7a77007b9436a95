"""`loom ch-setup --print-analyst-sql` / `--print-sql` / plain `ch-setup`, and `loom secrets
reseal`, on the embedded store: one subprocess runs them in order over its own data dir."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from loom_insights.domain.entities import REVISION

SCRIPT = Path(__file__).parent / "cli_script.py"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    env = {**os.environ, "LOOM_DATA_DIR": str(tmp_path_factory.mktemp("cli")), "LOOM_JWT_SECRET": "first-secret-0123456789abcdef01234567"}
    env.pop("LOOM_CLICKHOUSE_URL", None)
    env.pop("LOOM_JWT_SECRET_PREVIOUS", None)
    proc = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


FIRST_SECRET = "first-secret-0123456789abcdef01234567"


def statements_of(sql: str) -> list[str]:
    return [s for s in sql.splitlines() if s and not s.startswith("--")]


def test_print_analyst_sql_on_the_embedded_store_prints_a_complete_rotation_in_the_order_of_a_write(runs: dict[str, Any]) -> None:
    r = runs["analyst1"]
    assert r["code"] == 0, r["err"]
    sql = r["out"]
    statements = statements_of(sql)
    assert statements[0] == "SET log_queries_cut_to_length = 1, log_formatted_queries = 0;"
    assert statements[1] == "ALTER TABLE loom.analysis_secrets DELETE WHERE id = 1 SETTINGS mutations_sync = 2;"
    assert any(s.startswith("CREATE USER IF NOT EXISTS loom_analyst IDENTIFIED WITH sha256_password BY '") for s in statements)
    kills = [i for i, s in enumerate(statements) if s == "KILL QUERY WHERE user = 'loom_analyst' SYNC;"]
    password_at = next(i for i, s in enumerate(statements) if s.startswith("ALTER USER loom_analyst IDENTIFIED"))
    first_policy = next(i for i, s in enumerate(statements) if s.startswith("CREATE ROW POLICY"))
    version_at = next(i for i, s in enumerate(statements) if f"SQL_loom_version = '{REVISION}." in s)
    sleeps = [i for i, s in enumerate(statements) if s == "SELECT sleep(3);"]
    assert len(kills) == 2 and password_at < kills[0] < first_policy < version_at < sleeps[0] < kills[1]
    assert len(sleeps) == 10  # the default settle time, 30 s, in ClickHouse's 3-second sleeps
    assert sleeps == list(range(sleeps[0], sleeps[0] + 10)) and kills[1] == sleeps[-1] + 1
    assert statements[-1].startswith("INSERT INTO loom.analysis_secrets (id, sealed, version, stored_at) SELECT 1, 'v1.")
    assert statements[-1].endswith(", toUInt64(toUnixTimestamp64Nano(now64(9))), now64(6);")
    task_table = "task_state" if " ON loom.task_state " in sql else "tasks"
    for table in ("agent_events", task_table, "task_events", "policy_decisions", "analysis_canary"):
        assert f"ALTER ROW POLICY loom_everyone_else ON loom.{table} AS PERMISSIVE FOR SELECT USING 1 TO ALL EXCEPT loom_analyst;" in sql
        assert f"ALTER ROW POLICY loom_analyst_scope ON loom.{table} AS RESTRICTIVE FOR SELECT USING org = " in sql
        assert re.search(rf"GRANT SELECT\([a-z_, ]+\) ON loom\.{table} TO loom_analyst;", sql)
    assert "ALTER SETTINGS PROFILE loom_analyst_caps SETTINGS max_execution_time = 30 MAX 30" in sql
    assert "REVOKE ALL" not in sql
    assert f"REVOKE SELECT ON loom.{task_table} FROM loom_analyst;" in sql
    assert "clickhouse-client --distributed_ddl_output_mode=throw --multiquery --queries-file" in sql
    assert "users_without_row_policies_can_read_rows" in sql
    assert "SELECT name FROM system.row_policies" in sql  # the admin's first check


def test_the_printed_row_opens_under_the_deployment_s_secret_to_the_printed_key_and_password(runs: dict[str, Any]) -> None:
    from loom_core.sealing import Sealer
    from loom_insights.domain.rotation import key_id, policy_key_id
    from loom_insights.service import secrets as sec

    statements = statements_of(runs["analyst1"]["out"])
    sealed = re.search(r"SELECT 1, '([^']+)'", statements[-1])
    assert sealed
    opened = sec.unseal(Sealer(sec.PURPOSE, FIRST_SECRET), sealed.group(1))
    password = re.search(r"^ALTER USER loom_analyst IDENTIFIED WITH sha256_password BY '([^']+)'", "\n".join(statements), re.M)
    assert password and password.group(1) == opened.password
    policy = next(s for s in statements if s.startswith("ALTER ROW POLICY loom_analyst_scope ON loom.analysis_canary"))
    assert policy_key_id(policy) == key_id(opened.key)


def test_print_analyst_sql_draws_afresh_each_run_and_stores_nothing(runs: dict[str, Any]) -> None:
    assert runs["analyst2"]["code"] == 0
    key = re.compile(r"unhex\('([0-9a-f]{64})'\)")
    assert set(key.findall(runs["analyst1"]["out"])).isdisjoint(key.findall(runs["analyst2"]["out"]))
    # The reseal after both printed runs finds one sealed row: the root's record, no secrets row.
    assert runs["reseal"]["code"] == 0 and "insights: 1 row(s) resealed" in runs["reseal"]["out"]
    assert "insights: 0 row(s) resealed" in runs["reseal_again"]["out"]


def test_print_analyst_sql_proves_the_root_secret_after_a_reseal_and_refuses_another_deployment_s(runs: dict[str, Any]) -> None:
    assert runs["analyst3"]["code"] == 0, runs["analyst3"]["err"]  # the new secret, once the record is resealed
    r = runs["analyst_foreign"]
    assert r["code"] not in (0, None) and r["out"] == ""
    assert "not the deployment's" in r["err"] and "root's record" in r["err"]
    assert runs["analyst4"]["code"] == 0


def test_rotate_analysis_key_needs_a_server_and_live_goes_with_it(runs: dict[str, Any]) -> None:
    assert runs["rotate"]["code"] == 1 and "needs a ClickHouse server" in runs["rotate"]["err"]
    assert runs["live_alone"]["code"] == 1 and "--live goes with --rotate-analysis-key" in runs["live_alone"]["err"]


def test_print_sql_shows_the_shape_with_placeholders(runs: dict[str, Any]) -> None:
    sql = runs["shape"]["out"]
    assert "<the analyst password from loom.analysis_secrets>" in sql
    password = re.search(r"BY '([^']+)'", runs["analyst1"]["out"])
    assert password and password.group(1) not in sql


def test_ch_setup_without_a_server_says_analysis_needs_one(runs: dict[str, Any]) -> None:
    r = runs["setup"]
    assert r["code"] == 1 and "needs a ClickHouse server" in r["err"]

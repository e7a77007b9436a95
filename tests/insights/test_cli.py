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

SCRIPT = Path(__file__).parent / "cli_script.py"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    env = {**os.environ, "LOOM_DATA_DIR": str(tmp_path_factory.mktemp("cli")), "LOOM_JWT_SECRET": "first-secret-0123456789abcdef01234567"}
    env.pop("LOOM_CLICKHOUSE_URL", None)
    env.pop("LOOM_JWT_SECRET_PREVIOUS", None)
    proc = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def test_print_analyst_sql_on_the_embedded_store_prints_the_complete_analyst_sql(runs: dict[str, Any]) -> None:
    r = runs["analyst1"]
    assert r["code"] == 0
    sql = r["out"]
    statements = [s for s in sql.splitlines() if s and not s.startswith("--")]
    assert statements[0] == "SET log_queries_cut_to_length = 1, log_formatted_queries = 0;"
    assert any(s.startswith("CREATE USER IF NOT EXISTS loom_analyst IDENTIFIED WITH sha256_password BY '") for s in statements)
    task_table = "task_state" if " ON loom.task_state " in sql else "tasks"
    for table in ("agent_events", task_table, "task_events", "policy_decisions", "analysis_canary"):
        assert f"ALTER ROW POLICY loom_everyone_else ON loom.{table} AS PERMISSIVE FOR SELECT USING 1 TO ALL EXCEPT loom_analyst;" in sql
        assert f"ALTER ROW POLICY loom_analyst_scope ON loom.{table} AS RESTRICTIVE FOR SELECT USING org = " in sql
        assert re.search(rf"GRANT SELECT\([a-z_, ]+\) ON loom\.{table} TO loom_analyst;", sql)
    assert "ALTER SETTINGS PROFILE loom_analyst_caps SETTINGS max_execution_time = 30 MAX 30" in sql
    assert sql.count("ALTER SETTINGS PROFILE loom_analyst_profile SETTINGS INHERIT 'loom_analyst_caps', readonly = 2 CONST") == 2
    assert "SQL_loom_version = '2." in statements[-1]
    assert "REVOKE ALL" not in sql
    assert f"REVOKE SELECT ON loom.{task_table} FROM loom_analyst;" in sql
    assert "users_without_row_policies_can_read_rows" in sql
    assert "SELECT name FROM system.row_policies" in sql  # the admin's first check


def test_print_analyst_sql_keeps_the_stored_secrets_across_runs_and_a_reseal(runs: dict[str, Any]) -> None:
    assert runs["analyst1"]["out"] == runs["analyst2"]["out"]
    assert runs["analyst3"]["code"] == 0 and runs["analyst3"]["out"] == runs["analyst1"]["out"]


def test_secrets_reseal_rewrites_the_row_once_under_the_new_secret(runs: dict[str, Any]) -> None:
    assert runs["reseal"]["code"] == 0 and "insights: 1 row(s) resealed" in runs["reseal"]["out"]
    assert "insights: 0 row(s) resealed" in runs["reseal_again"]["out"]


def test_print_sql_shows_the_shape_with_placeholders(runs: dict[str, Any]) -> None:
    sql = runs["shape"]["out"]
    assert "<the analyst password from loom.analysis_secrets>" in sql
    password = re.search(r"BY '([^']+)'", runs["analyst1"]["out"])
    assert password and password.group(1) not in sql


def test_ch_setup_without_a_server_says_analysis_needs_one(runs: dict[str, Any]) -> None:
    r = runs["setup"]
    assert r["code"] == 1 and "needs a ClickHouse server" in r["err"]


def test_a_secrets_row_that_does_not_open_is_refused_and_never_drawn_over(runs: dict[str, Any]) -> None:
    r = runs["analyst_foreign"]
    assert r["code"] not in (0, None) and r["out"] == ""
    assert "does not open under LOOM_JWT_SECRET" in r["err"] and "root secret" in r["err"]
    # The row is untouched: under the deployment's secret the same key and password print again.
    assert runs["analyst4"]["code"] == 0 and runs["analyst4"]["out"] == runs["analyst1"]["out"]

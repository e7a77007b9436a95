"""The key rotation's pure parts (domain/rotation.py): the statements in the order of a write,
ON CLUSTER where ClickHouse's grammar puts it, which key a policy carries, and the doctor's
verdict from its probes, the servers' policy keys and the row's age (spec 000, "Key rotation").
What needs a ClickHouse server runs in test_rotation_server.py against LOOM_TEST_CLICKHOUSE_URL."""

from __future__ import annotations

import pytest
from loom_insights.domain.allowlist import ALLOWLIST, CANARY, present_tables
from loom_insights.domain.entities import Caps, WritePlan, policy_sql, retired_policy_sql, version_of
from loom_insights.domain.printed import render_rotation
from loom_insights.domain.rotation import (
    Probe,
    access_on_cluster,
    defers_repair,
    judge,
    key_id,
    policy_key_id,
    rotation_plan,
    settle_statements,
)

KEY = bytes(range(32))
OLD_KEY = bytes(range(1, 33))
PASSWORD = "Pw-0123456789abcdefABCDEF.!"
TABLES = present_tables({})


def plan(**kw: object) -> WritePlan:
    base: dict[str, object] = {
        "db": "loom",
        "prefix": "SQL_",
        "key": KEY,
        "password": PASSWORD,
        "version": version_of(TABLES),
        "caps": Caps(),
        "tables": TABLES,
    }
    base.update(kw)
    return WritePlan(**base)  # type: ignore[arg-type]


def test_the_rotation_runs_in_the_order_of_a_write() -> None:
    steps = [s.step for s in rotation_plan(plan(), settle_s=30, sealed="v1.sealed")]
    assert steps[0] == "delete"
    assert steps[1:4] == ["profile", "profile", "user"] and steps[4] == "user"  # CREATE … IF NOT EXISTS, then the new password
    assert steps[5] == "kill"
    rest = steps[6:]
    assert (
        rest.index("policy") < rest.index("caps") < rest.index("pins") < rest.index("revoke") < rest.index("grant") < rest.index("version")
    )
    assert steps[-12:] == ["settle"] * 10 + ["kill", "store"]
    assert steps.count("kill") == 2


def test_the_new_password_comes_before_the_first_kill_and_every_policy_after_it() -> None:
    sql = [s.sql for s in rotation_plan(plan(), settle_s=3)]
    password = next(i for i, s in enumerate(sql) if s.startswith("ALTER USER loom_analyst IDENTIFIED"))
    kill = sql.index("KILL QUERY WHERE user = 'loom_analyst' SYNC")
    policies = [i for i, s in enumerate(sql) if "ROW POLICY" in s]
    assert password < kill < min(policies)


def test_only_the_secret_statements_carry_the_key_or_the_password() -> None:
    for st in rotation_plan(plan(), settle_s=3, sealed="v1.abc"):
        carries = KEY.hex() in st.sql or PASSWORD in st.sql or "v1.abc" in st.sql
        assert carries == st.secret, st.sql[:80]


def test_without_a_sealed_row_the_plan_ends_with_the_second_kill() -> None:
    assert rotation_plan(plan(), settle_s=3)[-1].step == "kill"


@pytest.mark.parametrize(("settle", "sleeps"), [(30, 10), (31, 11), (1, 1), (0, 1)])
def test_the_printed_settle_is_as_many_three_second_sleeps_as_the_settle_time_takes(settle: float, sleeps: int) -> None:
    out = settle_statements(settle)
    assert len(out) == sleeps and {s.sql for s in out} == {"SELECT sleep(3)"}


def test_on_a_cluster_every_statement_but_the_settle_and_the_insert_runs_on_cluster() -> None:
    for st in rotation_plan(plan(), cluster="loom_cluster", settle_s=3, sealed="v1.x"):
        on = "ON CLUSTER 'loom_cluster'" in st.sql
        assert on == (st.step not in ("settle", "store")), st.sql[:90]


@pytest.mark.parametrize(
    ("sql", "want"),
    [
        ("CREATE SETTINGS PROFILE IF NOT EXISTS p SETTINGS x = 1", "CREATE SETTINGS PROFILE IF NOT EXISTS p ON CLUSTER 'c' SETTINGS x = 1"),
        ("ALTER SETTINGS PROFILE p SETTINGS x = 1", "ALTER SETTINGS PROFILE p ON CLUSTER 'c' SETTINGS x = 1"),
        ("CREATE USER IF NOT EXISTS u IDENTIFIED BY 'x'", "CREATE USER IF NOT EXISTS u ON CLUSTER 'c' IDENTIFIED BY 'x'"),
        ("ALTER USER u IDENTIFIED BY 'x'", "ALTER USER u ON CLUSTER 'c' IDENTIFIED BY 'x'"),
        ("ALTER ROW POLICY r ON loom.t AS RESTRICTIVE", "ALTER ROW POLICY r ON CLUSTER 'c' ON loom.t AS RESTRICTIVE"),
        ("CREATE ROW POLICY IF NOT EXISTS r ON loom.t USING 0", "CREATE ROW POLICY IF NOT EXISTS r ON CLUSTER 'c' ON loom.t USING 0"),
        ("GRANT SELECT(a) ON loom.t TO u", "GRANT ON CLUSTER 'c' SELECT(a) ON loom.t TO u"),
        ("REVOKE ALL ON *.* FROM u", "REVOKE ON CLUSTER 'c' ALL ON *.* FROM u"),
        ("KILL QUERY WHERE user = 'u' SYNC", "KILL QUERY ON CLUSTER 'c' WHERE user = 'u' SYNC"),
        ("ALTER TABLE loom.analysis_secrets DELETE WHERE id = 1", "ALTER TABLE loom.analysis_secrets ON CLUSTER 'c' DELETE WHERE id = 1"),
    ],
)
def test_access_on_cluster_puts_on_cluster_where_clickhouse_s_grammar_does(sql: str, want: str) -> None:
    assert access_on_cluster(sql, "c") == want
    assert access_on_cluster(sql, "") == sql


def test_access_on_cluster_refuses_a_bad_name_and_a_statement_it_does_not_know() -> None:
    with pytest.raises(ValueError, match="cluster name"):
        access_on_cluster("REVOKE ALL ON *.* FROM u", "c'; DROP")
    with pytest.raises(ValueError, match="not an access statement"):
        access_on_cluster("SELECT 1", "c")


def test_the_printed_rotation_on_a_cluster_says_so_and_keeps_the_session_set_first() -> None:
    text = render_rotation(plan(version=""), sealed="v1.s", settle_s=6, cluster="loom_cluster")
    lines = [ln for ln in text.splitlines() if ln and not ln.startswith("--")]
    assert lines[0] == "SET log_queries_cut_to_length = 1, log_formatted_queries = 0;"
    assert lines[1].startswith("ALTER TABLE loom.analysis_secrets ON CLUSTER 'loom_cluster' DELETE WHERE id = 1")
    assert "ON CLUSTER 'loom_cluster': keep --distributed_ddl_output_mode=throw" in text
    assert lines.count("SELECT sleep(3);") == 2 and lines[-1].startswith("INSERT INTO loom.analysis_secrets")


def test_a_policy_s_key_is_read_from_its_condition_and_named_without_spelling_it() -> None:
    st = policy_sql("loom", CANARY, KEY, "SQL_")[-1]
    assert policy_key_id(st.sql) == key_id(KEY) != key_id(OLD_KEY)
    assert KEY.hex() not in key_id(KEY)
    assert policy_key_id(retired_policy_sql("loom", "gone").sql) is None
    for table in ALLOWLIST[:2]:
        assert policy_key_id(policy_sql("loom", table, OLD_KEY, "custom_")[-1].sql) == key_id(OLD_KEY)


# ---------------------------------------------------------------------------- the doctor's verdict

ROW, OTHER = key_id(KEY), key_id(OLD_KEY)
SETTLE = 30.0
PAST = 3 * SETTLE + 1


def probes(passing: int, failing: int, host: str = "ch-1") -> list[Probe]:
    return [Probe(True, host)] * passing + [Probe(False)] * failing


def test_every_probe_passing_is_healthy() -> None:
    assert judge(probes(24, 0), {"ch-1": ROW}, ROW, PAST, SETTLE).outcome == "ok"


def test_within_three_settle_times_any_failure_is_a_server_still_applying_and_names_a_longer_settle() -> None:
    v = judge(probes(20, 4), {"ch-1": ROW, "ch-2": OTHER}, ROW, 3 * SETTLE - 1, SETTLE)
    assert (v.outcome, v.fault) == ("settling", "analysis-rotation-settling")
    assert "LOOM_CH_ANALYSIS_ROTATION_SETTLE_S" in v.fix and "--live" not in v.fix


def test_past_that_some_passing_and_some_failing_is_the_servers_problem_named_with_the_lagging_servers() -> None:
    v = judge(probes(12, 12), {"ch-1": ROW, "ch-2": OTHER}, ROW, PAST, SETTLE)
    assert (v.outcome, v.fault) == ("lagging_servers", "analysis-servers-lagging")
    assert "ch-2" in v.summary and "ch-1" not in v.summary
    assert "--live" not in v.fix and "a new rotation would not reach them" in v.fix
    assert judge(probes(12, 12), None, ROW, PAST, SETTLE).outcome == "lagging_servers"


@pytest.mark.parametrize("servers", [{"ch-1": ROW}, {"ch-1": ROW, "ch-2": ROW, "ch-3": ROW}])
def test_every_probe_failing_with_every_server_on_the_row_s_key_names_live(servers: dict[str, str]) -> None:
    """A rotation stopped before the policies, with a row a reseal put back: on a single server
    and on a cluster."""
    v = judge(probes(0, 24), servers, ROW, PAST, SETTLE)
    assert (v.outcome, v.fault) == ("stale_row", "analysis-row-stale")
    assert "--rotate-analysis-key --live" in v.fix


def test_every_probe_failing_with_every_server_on_one_other_key_names_live() -> None:
    """A rotation stopped after the policies: every server on its new key, the row on the old."""
    v = judge(probes(0, 24), {"ch-1": OTHER, "ch-2": OTHER}, ROW, PAST, SETTLE)
    assert v.outcome == "stale_row" and "not the row's" in v.summary and "--live" in v.fix


@pytest.mark.parametrize("split", [{"ch-1": ROW, "ch-2": OTHER}, {"ch-1": ROW, "ch-2": OTHER, "ch-3": OTHER}])
def test_every_probe_failing_with_servers_on_two_keys_names_both_groups_and_asks_to_run_again(split: dict[str, str]) -> None:
    v = judge(probes(0, 24), split, ROW, PAST, SETTLE)
    assert (v.outcome, v.fault) == ("servers_disagree", "analysis-servers-disagree")
    assert "on the row key: ch-1" in v.summary and f"on key {OTHER}: ch-2" in v.summary
    assert "once they agree" in v.fix and "--live" not in v.fix


def test_a_load_balancer_pinning_every_probe_to_one_server_with_servers_on_two_keys_still_names_both_groups() -> None:
    v = judge([Probe(False)] * 24, {"ch-1": ROW, "ch-2": OTHER}, ROW, PAST, SETTLE)
    assert v.outcome == "servers_disagree"


def test_every_probe_failing_without_a_policy_read_names_both_causes() -> None:
    v = judge(probes(0, 24), None, ROW, PAST, SETTLE)
    assert (v.outcome, v.fault) == ("ambiguous", "analysis-probes-failing")
    assert "not applying access changes" in v.summary and "stale" in v.summary
    assert "--live" in v.fix


def test_without_the_row_s_stored_time_the_verdict_goes_by_the_probes_alone() -> None:
    assert judge(probes(0, 24), {"ch-1": ROW}, ROW, None, SETTLE).outcome == "stale_row"


def test_the_probe_s_canary_repair_waits_three_settle_times_after_the_row_was_stored() -> None:
    assert defers_repair(89.0, 30.0) and not defers_repair(90.0, 30.0)

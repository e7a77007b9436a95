"""What chDB can prove of the analysis boundary, proven for real.

chDB enforces grants, row filters, CONST/MAX constraints and readonly for its `default` user as
a generated users.xml declares them, so the analyst's entity set (the same signed predicate and
profile pins the server gets, generated from the allowlist) runs as that persona in a separate
process over Loom's real tables. Two subprocesses in all: one builds the fixture, one runs
every case (persona_cases.py); each test reads its case's answer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent
SCRIPT = HERE / "persona_cases.py"


@pytest.fixture(scope="module")
def answers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    where = tmp_path_factory.mktemp("persona")
    env = {**os.environ, "PYTHONPATH": str(HERE)}
    for mode in ("build", "cases"):
        proc = subprocess.run([sys.executable, str(SCRIPT), mode, str(where)], capture_output=True, text=True, timeout=120, env=env)
        assert proc.returncode == 0, proc.stderr[-2000:]
    return dict(json.loads(proc.stdout))


def rows(answers: dict[str, Any], case: str) -> list[Any]:
    got = answers[case]
    assert "rows" in got, f"{case} was refused: {got.get('error')}"
    return list(got["rows"])


def refused(answers: dict[str, Any], case: str, *codes: str) -> str:
    got = answers[case]
    assert "error" in got, f"{case} was not refused: {got.get('rows')}"
    assert got["error"].split()[0] in codes, f"{case}: {got['error']}"
    return str(got["text"])


def test_a_signed_scope_reads_its_own_rows_at_their_latest_version(answers: dict[str, Any]) -> None:
    assert rows(answers, "own_tasks") == [["t-a1", "done", 2]]
    assert rows(answers, "own_ledger") == [["org-a", "task.create"]]


@pytest.mark.parametrize(
    "case",
    ["other_org_filter", "namespace_outside_token", "join_same_table"],
)
def test_another_org_or_namespace_reads_nothing(answers: dict[str, Any], case: str) -> None:
    assert rows(answers, case) == []


def test_subquery_union_and_throwif_never_see_the_other_org(answers: dict[str, Any]) -> None:
    assert rows(answers, "subquery_same_table") == [[0]]
    assert rows(answers, "union_all") == [["t-a1"]]
    assert rows(answers, "throwif_other_org") == [[0]]
    assert rows(answers, "sleep_each_row_other_org") == []


def test_the_wrapper_ends_a_trailing_comment_and_cannot_be_left(answers: dict[str, Any]) -> None:
    assert rows(answers, "trailing_comment") == [["t-a1"]]
    for case in ("leave_wrapper", "insert_wrapped", "explain_leaving_wrapper", "kill_query"):
        refused(answers, case, "62")


def test_view_reads_through_the_policy_and_input_is_refused(answers: dict[str, Any]) -> None:
    assert rows(answers, "view_function") == [["t-a1", "org-a"]]
    refused(answers, "input_function", "477")


@pytest.mark.parametrize(
    "case",
    [
        "forged_signature",
        "expired_signature",
        "lifted_signature",
        "renamed_scope_org",
        "renamed_scope_ns",
        "statement_renames_scope",
        "scope_value_malformed",
        "unsigned",
    ],
)
def test_a_signature_that_is_not_the_scopes_reads_nothing(answers: dict[str, Any], case: str) -> None:
    assert rows(answers, case) == []


def test_a_scope_value_set_to_a_number_raises_no_error(answers: dict[str, Any]) -> None:
    # The statement's own SETTINGS apply only inside the subquery, and the policy reads every
    # setting through toString: no error, whose text would quote the policy.
    assert "rows" in answers["scope_value_number"]


@pytest.mark.parametrize(
    "case",
    [
        "column_outside_allowlist",
        "ledger_args",
        "memory_value",
        "secrets_table",
        "system_row_policies",
        "system_users",
        "show_create_table",
        "file_function",
        "url_function",
        "remote_function",
        "executable_function",
        "s3_function",
        "merge_function",
        "merge_tree_index",
        "explain_wrapped",
        "describe",
        "insert",
        "alter",
        "create_temporary_table",
        "token_grants",
        "token_revocations",
        "explain_plan",
        "explain_estimate",
        "ai_generate_named_collection",
    ],
)
def test_the_boundary_refuses(answers: dict[str, Any], case: str) -> None:
    refused(answers, case, "497", "164")


@pytest.mark.parametrize(
    "setting",
    [
        "max_threads = 64",
        "max_execution_time = 1000",
        "max_rows_to_read = 1000000000",
        "max_result_rows = 100000000",
        "max_memory_usage = 100000000000",
        "use_query_cache = 1",
        "use_query_condition_cache = 1",
        "send_logs_level = 'trace'",
        "final = 0",
        "apply_row_policy_after_final = 0",
        "readonly = 0",
        "log_queries_cut_to_length = 100000",
        "log_formatted_queries = 1",
        "format_display_secrets_in_show_and_select = 1",
        "result_overflow_mode = 'break'",
    ],
)
def test_a_widening_settings_clause_is_refused(answers: dict[str, Any], setting: str) -> None:
    refused(answers, f"top:{setting}", "452", "164")


def test_a_lower_max_threads_is_admitted(answers: dict[str, Any]) -> None:
    assert rows(answers, "top:lower_max_threads") == [["t-a1"]]


def test_settings_inside_the_wrapper_widen_nothing(answers: dict[str, Any]) -> None:
    refused(answers, "wrapped:max_rows_to_read", "158")
    assert rows(answers, "wrapped:final_off") == [["k-live", 1], ["k-superseded", 2]]
    assert rows(answers, "wrapped:query_cache_first_org") == [["t-a1"]]
    assert rows(answers, "wrapped:query_cache_second_org") == [["t-b1"]]


def test_tombstoned_erased_and_superseded_versions_stay_hidden_under_final(answers: dict[str, Any]) -> None:
    # k-deleted: latest version a tombstone; k-erased: every version tombstoned in place;
    # k-superseded: version 1 replaced by version 2. Only the latest live versions show.
    assert rows(answers, "memory_live_keys") == [["k-live", "fact", 1], ["k-superseded", "new", 2]]


def test_the_canary_reads_only_in_the_reserved_scope(answers: dict[str, Any]) -> None:
    assert rows(answers, "canary_reserved_scope") == [[1]]
    assert rows(answers, "canary_request_scope") == [[0]]
    assert rows(answers, "reserved_scope_counts_tasks") == [[0]]


def test_conditional_tables_are_generated_only_where_they_exist(answers: dict[str, Any]) -> None:
    # The fixture has a memory table but no decision_records table.
    tables = rows(answers, "_tables")
    assert "memory" in tables and "decision_records" not in tables


def test_no_error_text_names_the_key_or_its_pads(answers: dict[str, Any]) -> None:
    secrets = [s.lower() for s in rows(answers, "_secrets")]
    texts = [str(v.get("text", "")).lower() for k, v in answers.items() if isinstance(v, dict) and "error" in v]
    assert texts
    for text in texts:
        for s in secrets:
            assert s not in text
            assert s[:32] not in text


# ------------------------------------------------------------------ entities a write did not leave
# The persona's second database (loom_drift) holds the same rows under the entity set a write
# left after the ledger and memory were taken off the allowlist (the ledger's grant still there,
# as an older build left it), with the canary's policy under another key.


def test_a_table_taken_off_the_allowlist_reads_nothing_whether_or_not_its_grant_is_still_there(answers: dict[str, Any]) -> None:
    # The same signed statement reads the caller's ledger row where the table is allowlisted ...
    assert rows(answers, "own_ledger") == [["org-a", "task.create"]]
    # ... and nothing where it left the allowlist: its policy reads nothing, grant or no grant.
    assert rows(answers, "retired_with_grant") == []
    assert rows(answers, "retired_with_grant_reserved_scope") == [[0]]
    text = refused(answers, "retired_without_grant", "497")
    assert "loom_drift.memory" in text
    # The tables still on the allowlist answer as before.
    assert rows(answers, "kept_table_in_drift") == [["t-a1"]]


def test_a_table_taken_off_the_allowlist_leaves_the_catalog_and_moves_the_version(answers: dict[str, Any]) -> None:
    catalog = rows(answers, "_drift_catalog")
    assert "agent_events" not in catalog and "memory" not in catalog and catalog
    full, kept = rows(answers, "_versions")
    assert full != kept and full.split(".")[0] == kept.split(".")[0]


def test_the_probe_passes_on_the_allowlists_entity_set(answers: dict[str, Any]) -> None:
    ok, definite, codes, findings, reason, _ = rows(answers, "probe:allowlist")
    assert (ok, definite, codes, findings, reason) == (True, True, [], [], "")


def test_the_probe_catches_a_canary_under_another_key_and_a_dropped_policy_as_definite_findings_a_write_repairs(
    answers: dict[str, Any],
) -> None:
    ok, definite, codes, findings, reason, repairable = rows(answers, "probe:drift")
    assert ok is False and definite is True  # ANALYSIS_UNAVAILABLE, not OVERLOADED
    assert codes == ["canary_key", "policy_missing"]
    assert findings[0] == "the canary reads nothing: its policy is under another key"
    assert findings[1].startswith("policy_decisions admits rows in the reserved scope")
    assert repairable is True  # a replica that writes the entities writes them again
    assert "canary" in reason and "another key" in reason
    for secret in rows(answers, "_secrets"):
        assert secret not in reason


def test_a_dropped_policy_reads_every_row_until_the_probe_closes_the_window(answers: dict[str, Any]) -> None:
    # chDB's persona is the only user, so no other policy is on the table: as under the server
    # default (users_without_row_policies_can_read_rows), a signed read sees both orgs. The probe
    # above names the table (policy_missing), which turns the replica ANALYSIS_UNAVAILABLE.
    assert rows(answers, "dropped_policy_read") == [["org-a", "task.create"], ["org-b", "B-CANARY-OP"]]


def test_show_grants_names_a_grant_left_on_a_table_off_the_allowlist(answers: dict[str, Any]) -> None:
    assert rows(answers, "extra_grants:allowlist") == []
    extra = rows(answers, "extra_grants:drift")
    assert len(extra) == 1 and "loom_drift.agent_events" in extra[0]


def test_chdb_cannot_be_handed_a_query_id_so_the_persona_binds_the_id_in_log_comment(answers: dict[str, Any]) -> None:
    """Why "lifted" is proven through log_comment on chDB and through initialQueryID() only on a
    server: chDB (chdb 4.4, engine 26.9) draws a fresh random query id for every query and takes
    none from its caller (Connection.query has no query id argument, the connection string's
    query_id is ignored, and clickhouse-connect's chdb backend strips query_id). A policy over
    initialQueryID() would then admit no signed scope at all, so its "lifted reads nothing" would
    hold vacuously. If this test fails, chDB takes a query id: bind initialQueryID() instead."""
    import inspect

    from chdb.state.sqlitelike import Connection

    assert "query_id" not in inspect.signature(Connection.query).parameters
    (first_initial, first), (second_initial, second) = rows(answers, "_query_ids")
    assert first == first_initial and second == second_initial and first != second


def test_explain_cluster_and_ai_functions_without_a_grant_are_refused(answers: dict[str, Any]) -> None:
    # EXPLAIN after a comment that tries to leave the wrapper cannot parse; cluster() names no
    # cluster chDB has; aiGenerate() without a named collection has no credentials at all.
    refused(answers, "explain_after_comment", "62")
    refused(answers, "cluster_function", "701", "497")
    refused(answers, "ai_generate", "36", "497")
    assert "NAMED COLLECTION" in refused(answers, "ai_generate_named_collection", "497")


def test_system_processes_and_information_schema_are_what_chdb_cannot_close(answers: dict[str, Any]) -> None:
    """Found on chDB, asserted so a change shows: chDB applies the access_control_improvements
    code defaults (select_from_system_db_requires_grant and
    select_from_information_schema_requires_grant false) and ignores them in its config, so the
    persona reads system.processes (its own statement, whose text the profile's
    log_queries_cut_to_length = 1 cuts) and information_schema (the granted tables only). A
    ClickHouse server's shipped config.xml sets both to true; the server suite proves them refused.
    system.query_log does not exist in chDB."""
    processes = rows(answers, "system_processes")
    assert processes and all(any("removed" in str(v) and "characters" in str(v) for v in row) for row in processes)
    assert {row[2] for row in rows(answers, "information_schema")} <= {
        "agent_events",
        "analysis_canary",
        "memory",
        "policy_decisions",
        "task_events",
        "task_state",
        "tasks",
    }
    refused(answers, "system_query_log", "60")


@pytest.mark.parametrize(
    "case",
    ["cast_select", "cast_where", "cast_prewhere", "cast_prewhere_no_short_circuit", "cast_filters_moved", "cast_filters_merged"],
)
def test_an_error_on_a_value_quotes_only_the_callers_own_live_row(answers: dict[str, Any], case: str) -> None:
    # toUInt64(memory_key) fails on the first key it sees. org-0's key sorts before every org-a
    # row and k-deleted/k-erased before k-live: the error quotes k-live, so the policy (scope and
    # live predicate) ran before the cast, however the filters were moved or merged.
    text = refused(answers, case, "6")
    assert "'k-live'" in text
    for other in ("k-0-canary", "k-b-canary", "k-deleted", "k-erased", "org-0", "org-b"):
        assert other not in text

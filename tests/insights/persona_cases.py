"""Run in a subprocess of its own (chDB allows one engine per process):

    python persona_cases.py build <dir>     # Loom's real tables + fixture rows of two orgs
    python persona_cases.py cases <dir>     # the analyst persona (generated users.xml) runs every case

`cases` opens chDB on the fixture with a users.xml generated from the allowlist
(loom_insights.domain.persona), so every statement runs under the analyst's grants, signed row
filters and pinned profile, each wrapped as insights.query wraps it, and prints one JSON object:
case name -> {"rows": [...]} or {"error": "<code> <NAME>", "text": "..."}.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import chdb
from loom_core.chain.ledger import MIGRATIONS as LEDGER_MIGRATIONS
from loom_core.identity.store import MIGRATIONS as IDENTITY_MIGRATIONS
from loom_insights.domain.allowlist import ALLOWLIST, LEDGER, MEMORY, present_tables
from loom_insights.domain.catalog import build_catalog
from loom_insights.domain.entities import Caps, version_of
from loom_insights.domain.grants import grants_within
from loom_insights.domain.persona import PersonaDatabase, persona_comment, users_xml
from loom_insights.domain.scope import SCOPE_FIELDS, Scope, pads, wrap
from loom_insights.service.probe import Prober
from loom_insights.store.clickhouse import ChError, Result
from loom_insights.store.schema import MIGRATIONS as INSIGHTS_MIGRATIONS
from loom_policy.store.schema import MIGRATIONS as POLICY_MIGRATIONS
from loom_tasks.schema import MIGRATIONS as TASK_MIGRATIONS

DB = "loom"
# A second database holding the same rows under the entity set a write did not leave: the
# ledger taken off the allowlist with its grant still there, memory taken off with its grant
# gone, and the canary's policy under another key. The persona runs both sets at once.
DRIFT_DB = "loom_drift"
KEY = bytes(range(1, 33))
OTHER_KEY = bytes(range(101, 133))
CAPS = Caps(max_execution_time=20, max_rows_to_read=1_000_000, max_memory_usage=1_000_000_000, max_result_rows=10_000, max_threads=2)
ROW_CAP = 100
A, B = "org-a", "org-b"

MEMORY_DDL = f"""
CREATE TABLE IF NOT EXISTS {DB}.memory (
    org String, namespace String, memory_key String, memory_type String, value String,
    version UInt64, created_at DateTime64(6, 'UTC'), updated_at DateTime64(6, 'UTC'),
    tombstoned_at Nullable(DateTime64(6, 'UTC'))
) ENGINE = ReplacingMergeTree(version) ORDER BY (org, namespace, memory_key)"""


WIDENING = (
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
)


def build(path: Path) -> None:
    conn = chdb.connect(f"file:{path}")
    conn.query(f"CREATE DATABASE IF NOT EXISTS {DB}")
    for m in (*IDENTITY_MIGRATIONS, *LEDGER_MIGRATIONS, *TASK_MIGRATIONS, *POLICY_MIGRATIONS, *INSIGHTS_MIGRATIONS):
        conn.query(m.sql.replace("{db}", DB))
    conn.query(MEMORY_DDL)
    now = "now64(6)"
    tables = {
        r.split("\t")[0] for r in conn.query(f"SELECT name FROM system.tables WHERE database = '{DB}'", "TSV").data().split("\n") if r
    }
    task_rows = [
        (A, "t-a1", "a1", "review", "A secret title", "queued", 1),
        (A, "t-a1", "a1", "review", "A secret title", "done", 2),
        (A, "t-a2", "a2", "review", "other ns", "queued", 1),
        (B, "t-b1", "b1", "B-CANARY", "B canary title", "queued", 1),
    ]
    if "task_state" in tables:  # the tasks plane's projection (the whole task in `doc`)
        values = ", ".join(
            f"('{o}', '{t}', 'inbox', '{n}', '{k}', '{st}', 1, '{o}-poster', {now}, {now}, {v}, {v}, '{{\"title\": \"{title}\"}}')"
            for o, t, n, k, title, st, v in task_rows
        )
        conn.query(
            f"INSERT INTO {DB}.task_state (org, task_id, inbox, namespace, kind, status, priority, poster, created_at, updated_at, version, rev, doc) VALUES {values}"
        )
    else:
        values = ", ".join(
            f"('{o}', '{t}', 'inbox', '{n}', '{k}', '{title}', 'brief', '{st}', 1, {v}, {now}, {now})"
            for o, t, n, k, title, st, v in task_rows
        )
        conn.query(
            f"INSERT INTO {DB}.tasks (org, task_id, inbox, namespace, kind, title, brief, status, priority, version, created_at, updated_at) VALUES {values}"
        )
    conn.query(
        f"""INSERT INTO {DB}.agent_events (ts, org, namespace, subject, op, ok, latency_ms, args) VALUES
        ({now}, '{A}', 'a1', 'user:a', 'task.create', true, 1.5, map('title', 'A secret')),
        ({now}, '{B}', 'b1', 'user:b', 'B-CANARY-OP', true, 2.5, map('title', 'B secret'))"""
    )
    rows = [
        (A, "a1", "k-live", "fact", 1, "NULL"),
        (A, "a1", "k-deleted", "fact", 1, "NULL"),
        (A, "a1", "k-deleted", "fact", 2, now),
        (A, "a1", "k-superseded", "old", 1, "NULL"),
        (A, "a1", "k-superseded", "new", 2, "NULL"),
        (A, "a1", "k-erased", "fact", 1, "NULL"),
        (A, "a1", "k-erased", "fact", 2, "NULL"),
        (B, "b1", "k-b-canary", "fact", 1, "NULL"),
        # an org that sorts before org-a: a cast evaluated before the policy would fail on it first
        ("org-0", "z0", "k-0-canary", "fact", 1, "NULL"),
    ]
    values = ", ".join(f"('{o}', '{n}', '{k}', '{t}', 'value of {k}', {v}, {now}, {now}, {ts})" for o, n, k, t, v, ts in rows)
    conn.query(
        f"INSERT INTO {DB}.memory (org, namespace, memory_key, memory_type, value, version, created_at, updated_at, tombstoned_at) VALUES {values}"
    )
    # An erasure tombstones every version in place.
    conn.query(f"ALTER TABLE {DB}.memory UPDATE tombstoned_at = now64(6) WHERE memory_key = 'k-erased' SETTINGS mutations_sync = 1")
    conn.query(f"CREATE DATABASE IF NOT EXISTS {DRIFT_DB}")
    for m in (*LEDGER_MIGRATIONS, *TASK_MIGRATIONS, *POLICY_MIGRATIONS, *INSIGHTS_MIGRATIONS):
        conn.query(m.sql.replace("{db}", DRIFT_DB))
    conn.query(MEMORY_DDL.replace(f"{DB}.memory", f"{DRIFT_DB}.memory"))
    for table in ("agent_events", "task_state" if "task_state" in tables else "tasks", "memory"):
        conn.query(f"INSERT INTO {DRIFT_DB}.{table} SELECT * FROM {DB}.{table}")
    # policy_decisions rows of both orgs, in the drift database only (its policy is dropped there)
    conn.query(
        f"INSERT INTO {DRIFT_DB}.policy_decisions (ts, org, namespace, op, decision) VALUES"
        f" ({now}, '{A}', 'a1', 'task.create', 'allow'), ({now}, '{B}', 'b1', 'B-CANARY-OP', 'deny')"
    )
    (path / "columns.json").write_text(conn.query(f"SELECT table, name FROM system.columns WHERE database = '{DB}'", "JSONEachRow").data())
    (path / "engines.json").write_text(conn.query(f"SELECT name, engine FROM system.tables WHERE database = '{DB}'", "JSONEachRow").data())
    conn.close()


def _tables(path: Path):  # type: ignore[no-untyped-def]
    existing: dict[str, list[str]] = {}
    for line in (path / "columns.json").read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            existing.setdefault(r["table"], []).append(r["name"])
    engines = {}
    for line in (path / "engines.json").read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            engines[r["name"]] = r["engine"]
    return present_tables(existing, engines, ALLOWLIST)


def cases(path: Path) -> None:
    tables = _tables(path)
    conf = path / "persona"
    conf.mkdir(exist_ok=True)
    kept = tuple(t for t in tables if t.name not in (LEDGER.name, MEMORY.name))
    # policy_decisions stays on the allowlist but its policy was dropped by hand: a grant, no filter.
    dropped = next(t for t in kept if t.name == "policy_decisions")
    drift = PersonaDatabase(
        DRIFT_DB,
        tuple(t for t in kept if t is not dropped),
        KEY,
        retired=(LEDGER.name, MEMORY.name),
        stray_grants=(LEDGER, dropped),
        canary_key=OTHER_KEY,
    )
    (conf / "users.xml").write_text(users_xml(DB, tables, KEY, CAPS, also=(drift,)))
    # A named collection of AI credentials (pointing nowhere): aiGenerate() takes credentials only
    # from one, and the analyst has no NAMED COLLECTION grant.
    (conf / "config.xml").write_text(
        f"<clickhouse><users_config>{conf / 'users.xml'}</users_config>"
        "<named_collections><loom_ai><provider>openai</provider><api_key>sk-none</api_key>"
        "<endpoint>http://127.0.0.1:9/v1</endpoint><model>none</model></loom_ai></named_collections></clickhouse>"
    )
    conn = chdb.connect(f"file:{path}?config-file={conf / 'config.xml'}")
    out: dict[str, dict[str, object]] = {"_tables": {"rows": [t.name for t in tables]}}
    exp = int(time.time()) + 120

    def comment(scope: Scope, qid: str, **override: str) -> str:
        data = json.loads(persona_comment(KEY, scope, qid))
        data.update(override)
        return json.dumps(data)

    # The tasks plane's table: `tasks` (one row per version) or `task_state` (its projection),
    # whichever this build's migrations made; its content column: title or doc.
    task_table = "task_state" if any(t.name == "task_state" for t in tables) else "tasks"
    content = "doc" if task_table == "task_state" else "title"

    def run(name: str, sql: str, log_comment: str | None, wrapped: bool = True) -> None:
        sql = sql.replace("loom.tasks", f"loom.{task_table}").replace("SELECT title FROM", f"SELECT {content} FROM")
        text = wrap(sql, ROW_CAP) if wrapped else sql
        try:
            # The carrier is a session setting, as Loom sends the scope as query settings; a
            # statement's own SETTINGS may override it, as a real statement may.
            conn.query("SET log_comment = " + _lit(log_comment if log_comment is not None else ""))
            res = conn.query(text, "JSONCompact")
            data = json.loads(res.data()) if res.data() else {"data": []}
            out[name] = {"rows": data.get("data", [])}
        except Exception as exc:  # noqa: BLE001 - each case reports what ClickHouse said
            msg = str(exc)
            code = msg.split("Code: ", 1)[1].split(".", 1)[0] if "Code: " in msg else "?"
            tail = msg.rsplit("(", 1)[-1].rstrip(") \n") if msg.rstrip().endswith(")") else "?"
            out[name] = {"error": f"{code} {tail}", "text": msg}

    a_scope = Scope(A, ("a1",), exp)
    good = comment(a_scope, "req-1:1:n1")
    # --- the scope reads its own rows, FINAL forced
    run("own_tasks", "SELECT task_id, status, version FROM loom.tasks ORDER BY task_id", good)
    run("own_ledger", "SELECT org, op FROM loom.agent_events", good)
    run("other_org_filter", f"SELECT task_id FROM loom.tasks WHERE org = '{B}'", good)
    run("namespace_outside_token", "SELECT task_id FROM loom.tasks WHERE namespace = 'a2'", good)
    run("join_same_table", f"SELECT x.task_id, y.task_id FROM loom.tasks x CROSS JOIN loom.tasks y WHERE y.org = '{B}'", good)
    run("subquery_same_table", f"SELECT count() FROM (SELECT * FROM loom.tasks WHERE org = '{B}')", good)
    run("union_all", f"SELECT task_id FROM loom.tasks UNION ALL SELECT task_id FROM loom.tasks WHERE org = '{B}'", good)
    run("trailing_comment", "SELECT task_id FROM loom.tasks -- trailing comment", good)
    run("leave_wrapper", "SELECT 1) UNION ALL (SELECT title FROM loom.tasks", good)
    run("throwif_other_org", "SELECT throwIf(kind = 'B-CANARY') FROM loom.tasks", good)
    run("sleep_each_row_other_org", f"SELECT sleepEachRow(0.01), task_id FROM loom.tasks WHERE org = '{B}'", good)
    # --- signatures that must read nothing
    run("forged_signature", "SELECT task_id FROM loom.tasks", comment(a_scope, "req-1:1:n1", loom_sig="0" * 64))
    run("expired_signature", "SELECT task_id FROM loom.tasks", comment(Scope(A, ("a1",), int(time.time()) - 5), "req-1:1:n1"))
    run("lifted_signature", "SELECT task_id FROM loom.tasks", comment(a_scope, "req-1:1:n1", loom_qid="req-2:1:n2"))
    run("renamed_scope_org", "SELECT task_id FROM loom.tasks", comment(a_scope, "req-1:1:n1", loom_org=B, loom_ns="b1"))
    run("renamed_scope_ns", "SELECT task_id FROM loom.tasks", comment(a_scope, "req-1:1:n1", loom_ns="a1,a2"))
    renamed = comment(a_scope, "req-1:1:n1", loom_org=B, loom_ns="b1")
    run("statement_renames_scope", f"SELECT task_id FROM loom.tasks SETTINGS log_comment = {_lit(renamed)}", good)
    run("scope_value_number", "SELECT task_id FROM loom.tasks SETTINGS log_comment = 5", good)
    run("scope_value_malformed", "SELECT task_id FROM loom.tasks SETTINGS log_comment = '{\"loom_org\": [1,2]'", good)
    run("unsigned", "SELECT task_id FROM loom.tasks", None)
    # --- the boundary refuses
    run("column_outside_allowlist", "SELECT title FROM loom.tasks", good)
    run("ledger_args", "SELECT args FROM loom.agent_events", good)
    run("secrets_table", "SELECT * FROM loom.analysis_secrets", good)
    run("system_row_policies", "SELECT * FROM system.row_policies", good)
    run("system_users", "SELECT * FROM system.users", good)
    run("system_query_log", "SELECT * FROM system.query_log", good)
    run("system_processes", "SELECT * FROM system.processes", good)
    run("information_schema", "SELECT * FROM information_schema.tables", good)
    run("token_grants", "SELECT * FROM loom.grants", good)
    run("token_revocations", "SELECT * FROM loom.revocations", good)
    run("explain_plan", "EXPLAIN PLAN SELECT * FROM loom.tasks", good)
    run("explain_estimate", "EXPLAIN ESTIMATE SELECT * FROM loom.tasks", good)
    run("explain_after_comment", "SELECT 1 /* ) */ ) EXPLAIN SELECT 1 --", good)
    run("cluster_function", "SELECT * FROM cluster('default', loom.tasks)", good)
    run("ai_generate", "SELECT aiGenerate('x')", good)
    run("ai_generate_named_collection", "SELECT aiGenerate('x', map('credentials', 'loom_ai'))", good)
    # --- an error on another org's value: toUInt64(memory_key) fails on a key's text, so it must
    # never be evaluated on a row the policy drops, however the filters are moved or merged.
    cast = "SELECT memory_key FROM loom.memory"
    run("cast_select", "SELECT toUInt64(memory_key) FROM loom.memory", good)
    run("cast_where", f"{cast} WHERE toUInt64(memory_key) > 0", good)
    run("cast_prewhere", f"{cast} PREWHERE toUInt64(memory_key) > 0", good)
    run(
        "cast_prewhere_no_short_circuit",
        f"{cast} PREWHERE toUInt64(memory_key) > 0 SETTINGS short_circuit_function_evaluation = 'disable'",
        good,
    )
    run(
        "cast_filters_moved",
        f"{cast} WHERE toUInt64(memory_key) > 0 SETTINGS optimize_move_to_prewhere = 1, move_all_conditions_to_prewhere = 1,"
        " allow_reorder_prewhere_conditions = 1",
        good,
    )
    run(
        "cast_filters_merged",
        f"SELECT * FROM ({cast} WHERE toUInt64(memory_key) > 0) WHERE memory_key != ''"
        " SETTINGS query_plan_merge_filters = 1, query_plan_filter_push_down = 1",
        good,
    )
    run("show_create_table", "SHOW CREATE TABLE loom.tasks", good, wrapped=False)
    run("file_function", "SELECT * FROM file('/etc/passwd', 'LineAsString')", good)
    run("url_function", "SELECT * FROM url('http://127.0.0.1:9/x', 'CSV', 'a String')", good)
    run("remote_function", "SELECT * FROM remote('127.0.0.1', loom.tasks)", good)
    run("executable_function", "SELECT * FROM executable('id', 'TSV', 'a String')", good)
    run("insert", "INSERT INTO loom.tasks (org, task_id) VALUES ('x', 'y')", good, wrapped=False)
    run("view_function", "SELECT * FROM view(SELECT task_id, org FROM loom.tasks)", good)
    run("merge_function", "SELECT org, op FROM merge('loom', '^agent_events$')", good)
    run("merge_tree_index", "SELECT * FROM mergeTreeIndex('loom', 'agent_events')", good)
    run("s3_function", "SELECT * FROM s3('http://127.0.0.1:9/loom-bucket/k.csv', 'CSV', 'a String')", good)
    run("input_function", "SELECT * FROM input('a String')", good)
    run("explain_wrapped", "EXPLAIN SELECT * FROM loom.tasks", good)
    run("explain_leaving_wrapper", "SELECT 1) UNION ALL (EXPLAIN SELECT * FROM loom.tasks", good)
    run("describe", "DESCRIBE TABLE loom.tasks", good, wrapped=False)
    run("kill_query", "KILL QUERY WHERE 1 TEST", good)
    run("insert_wrapped", "INSERT INTO loom.tasks (org, task_id) VALUES ('x', 'y')", good)
    run("alter", "ALTER TABLE loom.tasks DELETE WHERE 1", good, wrapped=False)
    run("create_temporary_table", "CREATE TEMPORARY TABLE t (a Int8)", good, wrapped=False)
    for setting in WIDENING:
        # At the top level the profile's CONST and MAX constraints refuse them.
        run(f"top:{setting}", f"SELECT task_id FROM loom.tasks SETTINGS {setting}", good, wrapped=False)
    run("top:lower_max_threads", "SELECT task_id FROM loom.tasks SETTINGS max_threads = 1", good, wrapped=False)
    # Inside the wrapper chDB 26.9 neither refuses nor applies them: the caps and FINAL still hold.
    run("wrapped:max_rows_to_read", "SELECT count() FROM numbers(2000000) SETTINGS max_rows_to_read = 1000000000", good)
    run("wrapped:final_off", "SELECT memory_key, version FROM loom.memory SETTINGS final = 0, apply_row_policy_after_final = 0", good)
    cached = "SELECT task_id FROM loom.tasks SETTINGS use_query_cache = 1, query_cache_min_query_runs = 0, query_cache_ttl = 300"
    run("wrapped:query_cache_first_org", cached, good)
    run("wrapped:query_cache_second_org", cached, comment(Scope(B, ("b1",), exp), "req-7:1:n7"))
    # --- tombstoned and superseded versions under FINAL
    run("memory_live_keys", "SELECT memory_key, memory_type, version FROM loom.memory ORDER BY memory_key", good)
    run("memory_value", "SELECT value FROM loom.memory", good)
    # --- the canary: the reserved scope reads it; a request's scope does not
    run("canary_reserved_scope", "SELECT count() FROM loom.analysis_canary", comment(Scope("", ("",), exp), "probe:1"))
    run("canary_request_scope", "SELECT count() FROM loom.analysis_canary", good)
    run("reserved_scope_counts_tasks", "SELECT count() FROM loom.tasks", comment(Scope("", ("",), exp), "probe:2"))
    # --- a table taken off the allowlist reads nothing, whether or not its grant is still there
    run("retired_with_grant", "SELECT org, op FROM loom_drift.agent_events", good)
    run("retired_with_grant_reserved_scope", "SELECT count() FROM loom_drift.agent_events", comment(Scope("", ("",), exp), "probe:3"))
    run("retired_without_grant", "SELECT memory_key FROM loom_drift.memory", good)
    run("kept_table_in_drift", f"SELECT task_id FROM {DRIFT_DB}.{task_table} ORDER BY task_id", good)
    # --- a table whose policy was dropped by hand: the window until the probe catches it
    run("dropped_policy_read", f"SELECT org, op FROM {DRIFT_DB}.policy_decisions ORDER BY org", good)
    catalog = build_catalog(kept, CAPS, ROW_CAP, version_of(kept), True)
    out["_drift_catalog"] = {"rows": [t.name for t in catalog.tables]}
    out["_versions"] = {"rows": [version_of(tables), version_of(kept)]}
    # --- the probe itself (service/probe.py), run as the persona on both entity sets
    analyst = PersonaAnalyst(conn)
    for name, db, probe_tables in (("probe:allowlist", DB, tables), ("probe:drift", DRIFT_DB, kept)):
        # own_version_current=False: the persona skips the unsigned reads (an unset log_comment
        # reads as '' where a server's unset custom setting raises) and SHOW GRANTS (below).
        result = asyncio.run(Prober(analyst, db).run(KEY, "SQL_", probe_tables, False))
        out[name] = {"rows": [result.ok, result.definite, result.codes, result.findings, result.reason, result.repairable]}
    shown = asyncio.run(analyst.run("SHOW GRANTS")).rows
    out["show_grants"] = {"rows": [str(r[0]) for r in shown]}
    out["extra_grants:allowlist"] = {"rows": grants_within([str(r[0]) for r in shown if f" {DB}." in str(r[0])], DB, tables)}
    out["extra_grants:drift"] = {"rows": grants_within([str(r[0]) for r in shown if f" {DRIFT_DB}." in str(r[0])], DRIFT_DB, kept)}
    # --- can chDB be handed a query id, so the persona could bind initialQueryID() as a server does?
    ids = [conn.query("SELECT initialQueryID(), queryID()", "JSONCompact") for _ in range(2)]
    out["_query_ids"] = {"rows": [json.loads(r.data())["data"][0] for r in ids]}
    conn.close()
    ipad, opad = pads(KEY)
    out["_secrets"] = {"rows": [KEY.hex(), ipad.hex(), opad.hex()]}
    print(json.dumps(out))


class PersonaAnalyst:
    """The probe's analyst connection (service/probe.AnalystConnection) on the persona: the
    scope settings a server takes under its prefix travel in log_comment with the query id,
    as persona_comment carries them; an error becomes ChError with ClickHouse's code and name."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    async def run(self, sql: str, settings: Mapping[str, Any] | None = None, *, query_id: str = "", wait_s: float = 60.0) -> Result:
        scope = {f: str(v) for k, v in (settings or {}).items() for f in SCOPE_FIELDS if k.endswith(f)}
        self.conn.query("SET log_comment = " + _lit(json.dumps({**scope, "loom_qid": query_id}) if scope else ""))
        try:
            res = self.conn.query(sql, "JSONCompact")
        except Exception as exc:  # noqa: BLE001 - translated as the server client translates
            msg = str(exc)
            code = msg.split("Code: ", 1)[1].split(".", 1)[0] if "Code: " in msg else ""
            name = msg.rsplit("(", 1)[-1].rstrip(") \n") if msg.rstrip().endswith(")") else type(exc).__name__
            raise ChError(int(code) if code.isdigit() else None, name, msg) from None
        data = json.loads(res.data()) if res.data() else {}
        return Result([(c["name"], c["type"]) for c in data.get("meta", [])], data.get("data", []))


def _lit(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


if __name__ == "__main__":
    mode, where = sys.argv[1], Path(sys.argv[2])
    build(where) if mode == "build" else cases(where)

"""Unit tests of the analysis boundary's pure rules: the allowlist, the entities generated from
it, the signed scope and the wrapper, the answers and the catalog."""

from __future__ import annotations

import hashlib
import hmac
import re

import pytest
from loom_insights.domain.allowlist import (
    ALLOWLIST,
    CANARY,
    DECISION_RECORDS,
    MEMORY,
    MEMORY_VECTORS,
    NEVER,
    TASK_STATE,
    TASKS,
    present_tables,
)
from loom_insights.domain.answers import classify, health_text, safe_message
from loom_insights.domain.catalog import build_catalog
from loom_insights.domain.entities import (
    ANALYST,
    LOG_TEXT_CUT,
    PINS,
    REVISION,
    Caps,
    WritePlan,
    full_version,
    may_write,
    policy_predicate,
    setting_reader,
    version_of,
    write_plan,
    writes_caps,
)
from loom_insights.domain.grants import grants_within
from loom_insights.domain.scope import Scope, length_prefixed, pads, query_id, scope_settings, sign, statement_digest, wrap

KEY = bytes(range(32))
BASE = present_tables({})


# ------------------------------------------------------------------ the allowlist


def test_generated_entity_set_is_pinned_to_its_version_digest() -> None:
    # A change to any grant, policy or pin changes these digests: bump REVISION with it.
    assert REVISION == 2
    assert version_of(BASE) == "2.e14058198387bbe2"
    assert full_version() == "2.0799d3edb1056ade"


def test_allowlist_holds_metadata_never_content() -> None:
    content = {
        "title",
        "brief",
        "outcome",
        "reason",
        "args",
        "data",
        "value",
        "statement",
        "errors",
        "rules",
        "description",
        "doc",
        "embedding",
    }
    for t in ALLOWLIST:
        assert not content & set(t.column_names), t.name
        assert t.name not in NEVER
        assert {"org", "namespace"} <= set(t.column_names)


def test_conditional_tables_are_generated_only_when_they_exist_with_their_columns_and_engine() -> None:
    assert [t.name for t in BASE] == ["agent_events", "task_events", "policy_decisions"]
    full = {t.name: [*t.column_names, "tombstoned_at", "live"] for t in ALLOWLIST}
    replacing = {t.name: "ReplacingMergeTree" for t in ALLOWLIST}
    assert present_tables(full, replacing) == ALLOWLIST
    # a table the plane has not created, or created without a declared column: left out
    assert TASKS not in present_tables({k: v for k, v in full.items() if k != "tasks"}, replacing)
    missing_col = {**full, "memory": [c for c in full["memory"] if c != "memory_type"]}
    assert MEMORY not in present_tables(missing_col, replacing)
    no_tombstone = {**full, "memory": list(MEMORY.column_names)}
    assert MEMORY not in present_tables(no_tombstone, replacing)
    # a live table of plain MergeTree keeps every version: no policy could hide a deleted key's
    # earlier versions, so it is left out
    assert MEMORY_VECTORS not in present_tables(full, {**replacing, "memory_vectors": "MergeTree"})
    assert DECISION_RECORDS not in present_tables(full, {**replacing, "decision_records": "MergeTree"})
    # the tasks plane's projection is generated in place of `tasks` where it exists
    only_state = {k: v for k, v in full.items() if k != "tasks"}
    assert [t.name for t in present_tables(only_state, replacing) if t.plane == "tasks"] == ["task_state", "task_events"]
    assert "doc" not in TASK_STATE.column_names


# ------------------------------------------------------------------ the entities


def _plan(**kw: object) -> list[str]:
    args: dict[str, object] = {
        "db": "loom",
        "prefix": "SQL_",
        "key": KEY,
        "password": "pw'Aa1!",
        "version": version_of(BASE),
        "caps": Caps(),
        "tables": BASE,
    }
    args.update(kw)
    return [s.sql for s in write_plan(WritePlan(**args))]  # type: ignore[arg-type]


def test_write_order_policies_then_pins_then_grants_then_version() -> None:
    sql = _plan()
    idx = lambda pred: [i for i, s in enumerate(sql) if pred(s)]  # noqa: E731
    policies = idx(lambda s: "ROW POLICY" in s)
    pins = idx(lambda s: s.startswith("ALTER SETTINGS PROFILE loom_analyst_profile"))
    grants = idx(lambda s: s.startswith("GRANT "))
    revoke = idx(lambda s: s.startswith("REVOKE SELECT ON loom."))
    assert not idx(lambda s: s.startswith("REVOKE ALL"))
    # exactly what the write grants is revoked first
    assert sorted(sql[i].split(" ON ")[1].split(" ")[0] for i in revoke) == sorted(sql[i].split(" ON ")[1].split(" ")[0] for i in grants)
    user = idx(lambda s: "USER loom_analyst" in s)
    assert max(user) < min(policies)
    assert max(policies) < pins[0] < revoke[0] < min(grants)
    assert pins[-1] == len(sql) - 1 and version_of(BASE) in sql[-1]  # the version is the last entity
    assert version_of(BASE) not in sql[pins[0]]
    # every other user's policy before the analyst's on each table
    for t in (*BASE, CANARY):
        on = f" ON loom.{t.name} "
        others = [i for i in policies if on in sql[i] and "loom_everyone_else" in sql[i]]
        scope = [i for i in policies if on in sql[i] and "loom_analyst_scope" in sql[i]]
        assert others and scope and max(others) < min(scope)


def test_grants_are_column_grants_of_the_allowlist_and_the_canary_only() -> None:
    grants = [s for s in _plan() if s.startswith("GRANT ")]
    assert len(grants) == len(BASE) + 1
    for g in grants:
        m = re.match(r"GRANT SELECT\(([^)]*)\) ON loom\.(\w+) TO loom_analyst$", g)
        assert m, g
        table = next(t for t in (*BASE, CANARY) if t.name == m.group(2))
        assert m.group(1).split(", ") == list(table.column_names)


def test_profile_pins_are_const_and_caps_max() -> None:
    sql = _plan()
    pins = next(s for s in sql if s.startswith("ALTER SETTINGS PROFILE loom_analyst_profile"))
    for name, value in PINS:
        assert f"{name} = {value} CONST" in pins
    assert "readonly = 2 CONST" in pins and "final = 1 CONST" in pins and "apply_row_policy_after_final = 1 CONST" in pins
    assert "log_queries_cut_to_length = 1 CONST" in pins and "log_formatted_queries = 0 CONST" in pins
    caps = next(s for s in sql if s.startswith("ALTER SETTINGS PROFILE loom_analyst_caps"))
    for name, value in Caps().items():
        if name != "max_concurrent_queries_for_user":
            assert f"{name} = {value} MAX {value}" in caps
    assert LOG_TEXT_CUT == {"log_queries_cut_to_length": 1, "log_formatted_queries": 0}


def test_policy_holds_the_key_only_as_hidden_pads_and_reads_settings_through_tostring() -> None:
    pred = policy_predicate(TASKS, KEY, setting_reader("SQL_"))
    ipad, opad = pads(KEY)
    assert pred.count("decrypt('aes-256-ecb', encrypt('aes-256-ecb', unhex(") == 2
    assert ipad.hex() in pred and opad.hex() in pred
    for name in ("loom_org", "loom_ns", "loom_exp", "loom_sig"):
        assert f"toString(getSetting('SQL_{name}'))" in pred
    assert "getSetting('SQL_" not in pred.replace("toString(getSetting('SQL_", "")
    assert "initialQueryID()" in pred
    memory = policy_predicate(MEMORY, KEY, setting_reader("custom_"))
    assert memory.endswith("(tombstoned_at IS NULL)") and "custom_loom_sig" in memory


def test_a_retired_table_keeps_a_policy_that_reads_nothing() -> None:
    sql = _plan(retired_tables=["old_table"])
    assert "ALTER ROW POLICY loom_analyst_scope ON loom.old_table AS RESTRICTIVE FOR SELECT USING 0 TO loom_analyst" in sql
    assert not any(s.startswith("DROP") for s in sql)


def test_a_table_taken_off_the_allowlist_loses_its_grant_keeps_a_policy_reading_nothing_and_leaves_the_catalog() -> None:
    from loom_insights.domain.allowlist import POLICY_DECISIONS

    kept = tuple(t for t in BASE if t.name != POLICY_DECISIONS.name)
    sql = _plan(tables=kept, retired_tables=[POLICY_DECISIONS.name], version=version_of(kept))
    on = f" ON loom.{POLICY_DECISIONS.name} "
    assert [s for s in sql if on in s] == [
        f"ALTER ROW POLICY loom_analyst_scope ON loom.{POLICY_DECISIONS.name} AS RESTRICTIVE FOR SELECT USING 0 TO loom_analyst",
        f"REVOKE SELECT ON loom.{POLICY_DECISIONS.name} FROM loom_analyst",
    ]
    # The retired table's grant is revoked with the write, before the grants.
    assert sql.index(f"REVOKE SELECT ON loom.{POLICY_DECISIONS.name} FROM loom_analyst") < min(
        i for i, s in enumerate(sql) if s.startswith("GRANT ")
    )
    assert version_of(kept) != version_of(BASE)
    catalog = build_catalog(kept, Caps(), 100, version_of(kept), True)
    assert POLICY_DECISIONS.name not in [t.name for t in catalog.tables]


def test_a_boot_writes_the_caps_when_they_differ_a_repair_never_does() -> None:
    ours, theirs = Caps(max_execution_time=17), Caps(max_execution_time=19)
    assert writes_caps("boot", theirs.stamp(), ours)
    assert not writes_caps("boot", ours.stamp(), ours)
    assert writes_caps("setup", ours.stamp(), ours)
    assert not writes_caps("repair", theirs.stamp(), ours)  # another replica's boot stands
    assert writes_caps("repair", "", ours)  # none stored yet
    # The caps are not part of the version.
    plans = [_plan(caps=c) for c in (ours, theirs)]
    assert plans[0][-1] == plans[1][-1]


def test_the_persona_declares_retired_tables_stray_grants_and_another_canary_key() -> None:
    from loom_insights.domain.persona import PersonaDatabase, users_xml

    other = bytes(range(100, 132))
    drift = PersonaDatabase("drift", BASE[1:], KEY, retired=(BASE[0].name,), stray_grants=(BASE[0],), canary_key=other)
    xml = users_xml("loom", BASE, KEY, Caps(), also=(drift,))
    assert f"<{BASE[0].name}><filter>0</filter></{BASE[0].name}>" in xml
    assert f"ON drift.{BASE[0].name}</query>" in xml  # the stray grant
    canaries = re.findall(r"<analysis_canary><filter>(.*?)</filter>", xml)
    assert len(canaries) == 2
    assert pads(KEY)[0].hex() in canaries[0] and pads(other)[0].hex() in canaries[1]


def test_password_is_quoted_and_the_user_has_no_grant_beyond_the_plan() -> None:
    sql = _plan()
    assert any("IDENTIFIED WITH sha256_password BY 'pw\\'Aa1!'" in s for s in sql)
    assert not any("GRANT" in s and ANALYST in s and "SELECT(" not in s for s in sql)


def test_never_over_a_newer_build() -> None:
    assert may_write("", "1.abc")
    assert may_write("1.abc", "1.def")
    assert may_write("1.abc", "2.abc")
    assert not may_write("2.abc", "1.abc")


# ------------------------------------------------------------------ the signed scope


def test_signature_is_hmac_sha256_over_the_length_prefixed_scope_and_query_id() -> None:
    scope = Scope("acme", ("a", "b"), 1_700_000_000)
    qid = query_id("req", 1, "nonce")
    assert qid == "req:1:nonce"
    msg = b"4:acme3:a,b10:170000000011:req:1:nonce"
    assert length_prefixed("acme", "a,b", "1700000000", qid) == msg
    assert sign(KEY, scope, qid) == hmac.new(KEY, msg, hashlib.sha256).hexdigest()
    # the policy's formula: SHA256(opad || SHA256(ipad || msg))
    ipad, opad = pads(KEY)
    assert sign(KEY, scope, qid) == hashlib.sha256(opad + hashlib.sha256(ipad + msg).digest()).hexdigest()
    s = scope_settings("SQL_", KEY, scope, qid)
    assert s == {"SQL_loom_org": "acme", "SQL_loom_ns": "a,b", "SQL_loom_exp": "1700000000", "SQL_loom_sig": sign(KEY, scope, qid)}
    assert all(isinstance(v, str) for v in s.values())


def test_length_prefix_keeps_two_scopes_apart() -> None:
    assert length_prefixed("ab", "c") != length_prefixed("a", "bc")


def test_wrapper_puts_the_statement_on_lines_of_its_own_less_one_semicolon() -> None:
    assert wrap("SELECT 1 -- hi;\n ;", 10) == "SELECT * FROM (\nSELECT 1 -- hi;\n)\nLIMIT 11"
    assert statement_digest("SELECT 1").startswith("sha256:") and len(statement_digest("x")) == 39


# ------------------------------------------------------------------ answers and catalog


@pytest.mark.parametrize(
    ("code", "text", "cap"),
    [
        (159, "Timeout exceeded: elapsed 31 seconds, maximum: 30", "max_execution_time"),
        (158, "Limit for rows (controlled by 'max_rows_to_read' setting) exceeded", "max_rows_to_read"),
        (396, "Limit for result exceeded, max rows: 10 (controlled by 'max_result_rows')", "max_result_rows"),
        (241, "Memory limit (for query) exceeded", "max_memory_usage"),
        (452, "Setting max_threads shouldn't be greater than 4", "max_threads"),
    ],
)
def test_a_cap_error_names_the_cap_and_how_to_narrow(code: int, text: str, cap: str) -> None:
    a = classify(code, text)
    assert a.kind == "cap" and a.cap == cap and a.narrow and cap in a.message


def test_no_message_naming_the_scope_or_the_key_reaches_a_caller() -> None:
    for text in (
        "Unknown setting SQL_loom_org",
        "in getSetting('custom_loom_sig')",
        "decrypt('aes-256-ecb', '[HIDDEN]')",
        "initialQueryID() mismatch",
    ):
        assert safe_message(text) == ""
    assert safe_message("Syntax error: failed at position 10") == "Syntax error: failed at position 10"


def test_catalog_names_only_readable_columns_and_leaves_the_canary_out() -> None:
    cat = build_catalog((*BASE, CANARY), Caps(), 1000, version_of(BASE), True)
    names = [t.name for t in cat.tables]
    assert CANARY.name not in names and names == [t.name for t in BASE]
    for t, spec in zip(cat.tables, BASE, strict=True):
        assert [c.name for c in t.columns] == list(spec.column_names)
        assert all(c.comment for c in t.columns)
    shapes = {t.name: t.shape for t in cat.tables}
    assert shapes["task_events"] == "events" and shapes["agent_events"] == "events"
    full = build_catalog(ALLOWLIST, Caps(), 1000, version_of(ALLOWLIST), True)
    assert {t.name: t.shape for t in full.tables}["tasks"] == "live"
    assert {c.setting for c in cat.caps} >= {"max_execution_time", "max_rows_to_read", "row_cap"}


def test_probe_flags_a_grant_outside_the_allowlist() -> None:
    ok = [f"GRANT SELECT({', '.join(t.column_names)}) ON loom.{t.name} TO loom_analyst" for t in (*BASE, CANARY)]
    assert grants_within(ok, "loom", BASE) == []
    assert grants_within([*ok, "GRANT SELECT ON loom.* TO loom_analyst"], "loom", BASE) == ["GRANT SELECT ON loom.* TO loom_analyst"]
    assert grants_within(["GRANT SELECT(org, title) ON loom.tasks TO loom_analyst"], "loom", BASE)


def test_health_shows_a_clickhouse_error_as_its_code_name_and_known_meaning() -> None:
    assert (
        health_text(497, "ACCESS_DENIED")
        == "ClickHouse error 497 ACCESS_DENIED: a missing privilege (run loom ch-setup as a user with access management)"
    )
    assert health_text(516, "AUTHENTICATION_FAILED").endswith("(run loom ch-setup)")
    assert health_text(999, "SOMETHING") == "ClickHouse error 999 SOMETHING"
    assert health_text(None, "OSError") == "ClickHouse error (OSError)"

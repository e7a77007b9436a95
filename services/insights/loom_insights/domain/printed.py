"""The printed analyst SQL (`loom ch-setup --print-analyst-sql`, `--print-sql`): the statements
of a write, in its order, headed by the command that runs them in one session and by the two
checks an admin runs first."""

from __future__ import annotations

from dataclasses import replace

from .entities import ANALYST, OTHERS_POLICY, SCOPE_POLICY, WritePlan, quote, version_of, write_plan

_HEADER = """-- Loom analysis: the analyst user, its two settings profiles, column grants and signed row policies.
-- Generated from the allowlist in services/insights/loom_insights/domain/allowlist.py (version {version}).
--
-- Run it in ONE session, as a user with access management:
--   clickhouse-client --distributed_ddl_output_mode=throw --multiquery --queries-file <this file>
-- The first statement sets log_queries_cut_to_length = 1 and log_formatted_queries = 0 for the
-- session, so the statements that carry the key or the password are logged only as the number of
-- characters ClickHouse cut. Do not paste them one by one into a console.
--
-- First run these two checks; each must return no rows, or Loom would widen what the analyst reads:
--   1. permissive row policies Loom did not write on the allowlisted tables:
--      SELECT name FROM system.row_policies WHERE database = {db} AND has({tables}, table)
--        AND is_restrictive = 0 AND short_name != {others};
--   2. the analyst's scope policy in another database (one Loom per ClickHouse service):
--      SELECT DISTINCT database FROM system.row_policies WHERE short_name = {scope} AND database != {db};
--
-- The ClickHouse server should set access_control_improvements.users_without_row_policies_can_read_rows
-- to false, and select_from_system_db_requires_grant / select_from_information_schema_requires_grant to true.
"""


def _whole(plan: WritePlan, version: str) -> WritePlan:
    """A printed script writes everything (the caps, the user) at the allowlist's version, as if
    nothing were there before: it is run by hand, against a server Loom may never have written."""
    return replace(plan, version=version, previous_version="", write_caps=True, create_user=True)


def render_script(plan: WritePlan, *, placeholder_key: bool = False) -> str:
    version = version_of(plan.tables)
    full = _whole(plan, version)
    names = "[" + ", ".join(quote(t.name) for t in plan.tables) + "]"
    lines = [
        _HEADER.format(version=version, db=quote(plan.db), tables=names, others=quote(OTHERS_POLICY), scope=quote(SCOPE_POLICY)),
    ]
    if placeholder_key:
        lines.append("-- --print-sql: the key is all zeros and the password a placeholder; this shows the shape only.\n")
    lines.append("SET log_queries_cut_to_length = 1, log_formatted_queries = 0;\n")
    step = ""
    for st in write_plan(full):
        if st.step != step:
            step = st.step
            lines.append(f"\n-- {step}")
            if step == "revoke":
                lines.append(f"-- every grant {ANALYST}'s SHOW GRANTS lists goes before the allowlist is granted")
        lines.append(st.sql + ";")
    return "\n".join(lines) + "\n"


_ROTATION_NOTE = """--
-- This is a complete rotation, in the order of a write: it deletes the secrets row, sets a new
-- password, ends the analyst's statements, writes the entity set under a new key, waits the
-- settle time ({settle:.0f} s, ch_analysis_rotation_settle_s), ends the analyst's statements again
-- and last stores the new sealed row. Run in full, it starts analysis on a first install, recovers
-- it after a lost row and rotates a healthy key alike; analysis answers ANALYSIS_UNAVAILABLE while
-- it runs. Run only in part, it leaves analysis unavailable: run the whole file again (or
-- `loom ch-setup --rotate-analysis-key`). Print it afresh for each run: it is run, not kept.{cluster}
"""


def render_rotation(plan: WritePlan, *, sealed: str, settle_s: float, cluster: str = "") -> str:
    """`--print-analyst-sql` (part 2): the complete rotation under the plan's fresh key and
    password, with the new row sealed as `sealed`, the header and the session's first SET."""
    from .rotation import rotation_plan

    version = version_of(plan.tables)
    on = f"\n-- Every access statement runs ON CLUSTER {quote(cluster)}: keep --distributed_ddl_output_mode=throw." if cluster else ""
    names = "[" + ", ".join(quote(t.name) for t in plan.tables) + "]"
    lines = [
        _HEADER.format(version=version, db=quote(plan.db), tables=names, others=quote(OTHERS_POLICY), scope=quote(SCOPE_POLICY)).rstrip(
            "\n"
        ),
        _ROTATION_NOTE.format(settle=settle_s, cluster=on),
        "SET log_queries_cut_to_length = 1, log_formatted_queries = 0;\n",
    ]
    full = _whole(plan, version)
    step = ""
    for st in rotation_plan(full, cluster=cluster, settle_s=settle_s, sealed=sealed):
        if st.step != step:
            step = st.step
            lines.append(f"\n-- {step}")
        lines.append(st.sql + ";")
    return "\n".join(lines) + "\n"

"""Every statement Loom generates for the analyst parses in ClickHouse's own parser (chDB's
formatQuery, the engine version the platform notes name): the write plan, with conditional
tables, retired tables and roles to revoke, and the printed script."""

from __future__ import annotations

from loom_core.store.embedded import EmbeddedStore
from loom_insights.domain.allowlist import ALLOWLIST, present_tables
from loom_insights.domain.entities import Caps, WritePlan, version_of, write_plan
from loom_insights.domain.printed import render_script

KEY = bytes(range(32))


async def _parses(store: EmbeddedStore, sql: str) -> str:
    rows = await store.query("SELECT formatQuery({q:String}) AS f", {"q": sql})
    return str(rows[0]["f"])


async def test_every_statement_of_a_write_parses_in_clickhouse(store: EmbeddedStore) -> None:
    for prefix, tables in (("SQL_", present_tables({})), ("custom_", ALLOWLIST)):
        plan = WritePlan(
            db="loom",
            prefix=prefix,
            key=KEY,
            password="p'w\\Aa1!",
            version=version_of(tables),
            caps=Caps(),
            tables=tables,
            previous_version="1.0000",
            retired_tables=["old_table"],
            revoke_roles=["some_role"],
        )
        statements = write_plan(plan)
        assert statements
        for st in statements:
            formatted = await _parses(store, st.sql)
            assert formatted.split()[0] == st.sql.split()[0]


async def test_the_printed_script_is_statements_clickhouse_parses(store: EmbeddedStore) -> None:
    script = render_script(WritePlan("loom", "SQL_", KEY, "pw", "", Caps(), present_tables({})))
    statements = [line for line in script.splitlines() if line and not line.startswith("--")]
    assert statements[0].startswith("SET log_queries_cut_to_length = 1")
    for line in statements:
        assert line.endswith(";")
        await _parses(store, line[:-1])

"""What Loom's database holds: each table's columns and engine (for the allowlist's conditional entries)."""

from __future__ import annotations

from collections.abc import Sequence

from loom_core.store import Store

from ..domain.allowlist import ALLOWLIST, Table, present_tables


async def read_tables(store: Store) -> tuple[dict[str, list[str]], dict[str, str]]:
    columns: dict[str, list[str]] = {}
    for r in await store.query("SELECT table, name FROM system.columns WHERE database = {db:String}", {"db": store.database}):
        columns.setdefault(str(r["table"]), []).append(str(r["name"]))
    engines = {
        str(r["name"]): str(r["engine"])
        for r in await store.query("SELECT name, engine FROM system.tables WHERE database = {db:String}", {"db": store.database})
    }
    return columns, engines


async def present(store: Store, allowlist: Sequence[Table] = ALLOWLIST) -> tuple[Table, ...]:
    """The allowlist's entries for the tables this database holds."""
    columns, engines = await read_tables(store)
    return present_tables(columns, engines, allowlist)

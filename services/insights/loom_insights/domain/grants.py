"""Reading the analyst's SHOW GRANTS against the allowlist (the probe's last check)."""

from __future__ import annotations

import re

from .allowlist import CANARY, Table

_GRANT = re.compile(r"^GRANT SELECT\((?P<cols>[^)]*)\) ON (?P<db>[^.\s]+)\.(?P<table>\S+) TO ")


def grants_within(lines: list[str], db: str, tables: tuple[Table, ...]) -> list[str]:
    """SHOW GRANTS lines that name more than the allowlist and the canary."""
    allowed = {t.name: set(t.column_names) for t in (*tables, CANARY)}
    extra: list[str] = []
    for line in lines:
        m = _GRANT.match(line.strip())
        if not m or m.group("db").strip("`") != db:
            extra.append(line)
            continue
        table = m.group("table").strip("`")
        cols = {c.strip().strip("`") for c in m.group("cols").split(",")}
        if table not in allowed or not cols <= allowed[table]:
            extra.append(line)
    return extra

"""What the analyst boundary costs a statement: the signed row policy and the pinned profile
(forced FINAL, policy after FINAL) against Loom's own user reading the same rows with the same
filter written by hand, on chDB (the analyst persona from a generated users.xml).

    .venv/bin/python bench/insights.py [--rows 1000000] [--repeat 15]

Three processes (chDB allows one engine per process): one builds the tasks table (the real
migration) with `--rows` rows over 1000 orgs, one times the baseline, one times the persona.
Prints medians, the ratio persona/baseline, and rows read by each.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

DB = "loom"
KEY = bytes(range(1, 33))
ORG, NS = "o-7", "n-3"
QUERY = "SELECT count(), avg(priority), max(attempts) FROM {db}.tasks{final}{where}"


def build(where: Path, rows: int) -> None:
    import chdb
    from loom_tasks.schema import MIGRATIONS

    conn = chdb.connect(f"file:{where}")
    conn.query(f"CREATE DATABASE IF NOT EXISTS {DB}")
    for m in MIGRATIONS:
        conn.query(m.sql.replace("{db}", DB))
    conn.query(
        f"INSERT INTO {DB}.tasks (org, task_id, inbox, namespace, kind, status, priority, attempts, version, created_at, updated_at) "
        f"SELECT concat('o-', toString(number % 1000)), toString(number), 'inbox', concat('n-', toString(intDiv(number, 1000) % 10)), "
        f"'k', 'queued', number % 7, number % 3, 1 + number % 2, now64(6), now64(6) FROM numbers({rows})"
    )
    conn.query(f"OPTIMIZE TABLE {DB}.tasks FINAL")
    conn.close()


def _time(conn: object, sql: str, repeat: int) -> tuple[float, int, list[object]]:
    times: list[float] = []
    rows_read = 0
    data: list[object] = []
    for _ in range(repeat):
        start = time.perf_counter()
        res = conn.query(sql, "JSONCompact")  # type: ignore[attr-defined]
        times.append((time.perf_counter() - start) * 1000.0)
        body = json.loads(res.data())
        rows_read = int(body["statistics"]["rows_read"])
        data = body["data"]
    return statistics.median(times), rows_read, data


def baseline(where: Path, repeat: int) -> dict[str, object]:
    import chdb

    conn = chdb.connect(f"file:{where}")
    sql = QUERY.format(db=DB, final=" FINAL", where=f" WHERE org = '{ORG}' AND namespace = '{NS}'")
    ms, read, data = _time(conn, sql, repeat)
    return {"ms": ms, "rows_read": read, "data": data}


def persona(where: Path, repeat: int) -> dict[str, object]:
    import chdb
    from loom_insights.domain.allowlist import TASKS
    from loom_insights.domain.entities import Caps
    from loom_insights.domain.persona import persona_comment, users_xml
    from loom_insights.domain.scope import Scope, wrap

    conf = where / "persona"
    conf.mkdir(exist_ok=True)
    (conf / "users.xml").write_text(users_xml(DB, [TASKS], KEY, Caps(max_rows_to_read=10**10)))
    (conf / "config.xml").write_text(f"<clickhouse><users_config>{conf / 'users.xml'}</users_config></clickhouse>")
    conn = chdb.connect(f"file:{where}?config-file={conf / 'config.xml'}")
    comment = persona_comment(KEY, Scope(ORG, (NS,), int(time.time()) + 3600), "bench:1:n")
    conn.query("SET log_comment = '" + comment.replace("\\", "\\\\").replace("'", "\\'") + "'")
    sql = wrap(QUERY.format(db=DB, final="", where=""), 1000)
    ms, read, data = _time(conn, sql, repeat)
    return {"ms": ms, "rows_read": read, "data": data}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--mode", default="")
    ap.add_argument("--dir", default="")
    args = ap.parse_args()
    if args.mode:
        where = Path(args.dir)
        if args.mode == "build":
            build(where, args.rows)
            return 0
        out = baseline(where, args.repeat) if args.mode == "baseline" else persona(where, args.repeat)
        print(json.dumps(out))
        return 0
    from _machine import machine

    with tempfile.TemporaryDirectory() as tmp:
        me = [sys.executable, __file__, "--dir", tmp, "--rows", str(args.rows), "--repeat", str(args.repeat)]
        subprocess.run([*me, "--mode", "build"], check=True)
        base = json.loads(subprocess.run([*me, "--mode", "baseline"], check=True, capture_output=True, text=True).stdout)
        pers = json.loads(subprocess.run([*me, "--mode", "persona"], check=True, capture_output=True, text=True).stdout)
    assert base["data"] == pers["data"], (base["data"], pers["data"])
    print(f"machine: {machine()}")
    print(f"tasks rows: {args.rows}, one org of 1000 and one namespace of 10; median of {args.repeat}")
    print(f"baseline (Loom's user, FINAL, hand-written filter): {base['ms']:.2f} ms, rows read {base['rows_read']}")
    print(f"analyst persona (signed row policy, forced FINAL):   {pers['ms']:.2f} ms, rows read {pers['rows_read']}")
    print(f"ratio persona/baseline: {pers['ms'] / base['ms']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())

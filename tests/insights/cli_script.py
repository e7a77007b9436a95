"""Run in its own process (chDB allows one engine per process): the analysis CLI commands in
order, over one embedded data dir; prints each one's exit code and output as JSON."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os

from loom_runner.cli import main

out: dict[str, dict[str, int | str | None]] = {}


async def _loom_tables() -> None:
    """The tables a first `loom up` creates: the printed SQL covers what Loom's database holds."""
    from loom_core.runtime import CORE_MIGRATIONS
    from loom_core.settings import Settings
    from loom_core.store import open_store, run_migrations
    from loom_policy.store.schema import MIGRATIONS as POLICY
    from loom_tasks.schema import MIGRATIONS as TASKS

    store = await open_store(Settings())
    await run_migrations(store, [*CORE_MIGRATIONS, *TASKS, *POLICY])
    await store.close()


asyncio.run(_loom_tables())


def run(name: str, *argv: str) -> None:
    buf, err = io.StringIO(), io.StringIO()
    code: int | None = None
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
            err.write(str(e.code))
    out[name] = {"code": code, "out": buf.getvalue(), "err": err.getvalue()}


run("analyst1", "ch-setup", "--print-analyst-sql")
run("analyst2", "ch-setup", "--print-analyst-sql")
run("shape", "ch-setup", "--print-sql")
run("setup", "ch-setup")
run("rotate", "ch-setup", "--rotate-analysis-key")
run("live_alone", "ch-setup", "--live")
os.environ["LOOM_JWT_SECRET_PREVIOUS"] = os.environ["LOOM_JWT_SECRET"]
os.environ["LOOM_JWT_SECRET"] = "a-new-root-secret-0123456789abcdef0123"
run("reseal", "secrets", "reseal")
run("reseal_again", "secrets", "reseal")
del os.environ["LOOM_JWT_SECRET_PREVIOUS"]
run("analyst3", "ch-setup", "--print-analyst-sql")
# Another deployment's root secret: it does not open the root's record, so nothing is printed.
resealed_secret = os.environ["LOOM_JWT_SECRET"]
os.environ["LOOM_JWT_SECRET"] = "another-deployments-secret-0123456789ab"
run("analyst_foreign", "ch-setup", "--print-analyst-sql")
os.environ["LOOM_JWT_SECRET"] = resealed_secret
run("analyst4", "ch-setup", "--print-analyst-sql")
print(json.dumps(out))

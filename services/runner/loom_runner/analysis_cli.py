"""`loom ch-setup [--print-sql | --print-analyst-sql]` and `loom secrets reseal`.

- `loom ch-setup`, run with a ClickHouse user that has access management, writes the analyst's
  entities under the `analysis.entities` lease (the repair too), unless the stored version is
  newer than this build's.
- `--print-analyst-sql` prints the complete analyst SQL for an admin to run by hand (it needs no
  access management, and works on the embedded store so the SQL can be reviewed before pointing
  Loom at a server): it draws and stores the secrets row on a first install, otherwise prints the
  stored key's entity set.
- `--print-sql` prints the statements `loom ch-setup` would run, with the key and the password as
  placeholders: the shape, for review; nothing is drawn or stored.
- `loom secrets reseal` rewrites every sealed secrets row under LOOM_JWT_SECRET, through the
  resealers the `loom.reseal` entry points name.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from importlib.metadata import entry_points
from typing import Any

from loom_core.local_secrets import WeakSecret, with_local_secrets
from loom_core.settings import Settings

COMMANDS = ("ch-setup", "secrets")


def add_commands(sub: Any) -> None:
    ch = sub.add_parser("ch-setup", help="write (or print) the analysis user, its profiles, grants and signed row policies")
    mode = ch.add_mutually_exclusive_group()
    mode.add_argument("--print-sql", action="store_true", help="print what ch-setup would run, with the key and password as placeholders")
    mode.add_argument("--print-analyst-sql", action="store_true", help="print the complete analyst SQL for an admin to run in one session")
    ch.add_argument(
        "--prefix", choices=["SQL_", "custom_"], default=None, help="custom settings prefix for printed SQL (default: probe, else SQL_)"
    )
    secrets = sub.add_parser("secrets", help="sealed secrets at rest")
    secrets_sub = secrets.add_subparsers(dest="secrets_cmd", required=True)
    secrets_sub.add_parser("reseal", help="reseal every sealed secrets row under LOOM_JWT_SECRET")


def _owned_secrets(settings: Settings) -> Settings:
    """On the embedded store this process owns LOOM_DATA_DIR, as `loom up` does: unset secrets
    come from the data dir's secrets file where this build keeps one (loom_core.local_secrets),
    so the row is sealed under the same LOOM_JWT_SECRET the server uses."""
    if settings.clickhouse_url:
        return settings
    try:
        owned: Settings = with_local_secrets(settings)
    except WeakSecret as exc:  # say how to set one
        raise SystemExit(f"loom: {exc}") from None
    return owned


def run_command(args: argparse.Namespace, settings: Settings) -> int:
    settings = _owned_secrets(settings)
    if args.cmd == "secrets":
        return asyncio.run(_reseal(settings))
    if args.print_sql or args.print_analyst_sql:
        text = asyncio.run(_print(settings, analyst=args.print_analyst_sql, prefix=args.prefix))
        sys.stdout.write(text)
        return 0
    return asyncio.run(_setup(settings))


async def _reseal(settings: Settings) -> int:
    from loom_core.store import open_store

    store = await open_store(settings)
    total = 0
    try:
        for ep in sorted(entry_points(group="loom.reseal"), key=lambda e: e.name):
            n = int(await ep.load()(store, settings))
            print(f"loom: {ep.name}: {n} row(s) resealed", flush=True)
            total += n
    finally:
        await store.close()
    print(f"loom: {total} row(s) resealed in all", flush=True)
    return 0


async def _open(settings: Settings) -> Any:
    from loom_core.store import open_store, run_migrations
    from loom_insights.store.schema import MIGRATIONS

    store = await open_store(settings)
    await run_migrations(store, MIGRATIONS)
    return store


async def _print(settings: Settings, *, analyst: bool, prefix: str | None) -> str:
    from loom_insights.domain.entities import Caps, WritePlan
    from loom_insights.domain.printed import render_script
    from loom_insights.service import secrets as sec
    from loom_insights.service.analysis import caps_from
    from loom_insights.settings import InsightsSettings
    from loom_insights.store.tables import present as present_in

    store = await _open(settings)
    try:
        tables = await present_in(store)
        caps: Caps = caps_from(settings.plane(InsightsSettings))
        if prefix is None:
            prefix = await _probe_prefix(settings) or "SQL_"
        if analyst:
            sealer = sec.sealer_for(settings)
            try:
                loaded = await sec.load(store, sealer)
            except sec.SecretsUnreadable as exc:  # never drawn over
                raise SystemExit(
                    f"loom: {exc}: set LOOM_JWT_SECRET (or LOOM_JWT_SECRET_PREVIOUS) to the deployment's root secret"
                ) from None
            if loaded is None:
                if await _analyst_exists(store):
                    raise SystemExit(
                        "loom: the analysis secrets row is gone while the analyst user exists: drop the user loom_analyst and run again"
                    )
                secrets = sec.draw()
                await sec.store_new(store, sealer, secrets)
            else:
                secrets = loaded[0]
            key, password = secrets.key, secrets.password
        else:
            key, password = bytes(32), "<the analyst password from loom.analysis_secrets>"
        plan = WritePlan(db=store.database, prefix=prefix, key=key, password=password, version="", caps=caps, tables=tables)
        return render_script(plan, placeholder_key=not analyst)
    finally:
        await store.close()


async def _probe_prefix(settings: Settings) -> str:
    if not settings.clickhouse_url:
        return ""
    from loom_insights.service.provisioning import detect_prefix
    from loom_insights.store.clickhouse import ChClient

    admin = ChClient(settings.clickhouse_url, max_size=1)
    try:
        return await detect_prefix(admin)
    except Exception:  # noqa: BLE001 - printing falls back to ClickHouse's default prefix
        return ""
    finally:
        await admin.close()


async def _analyst_exists(store: Any) -> bool:
    if store.engine != "clickhouse":
        return False
    try:
        rows = await store.query("SELECT count() AS n FROM system.users WHERE name = 'loom_analyst'")
    except Exception:  # noqa: BLE001 - a user that cannot list users cannot see it
        return False
    return bool(rows and int(rows[0]["n"]))


async def _setup(settings: Settings) -> int:
    if not settings.clickhouse_url:
        raise SystemExit(
            "loom: analysis needs a ClickHouse server (LOOM_CLICKHOUSE_URL); on the embedded store use --print-analyst-sql to review the SQL"
        )
    from loom_core.bus import LeaseStore, connect_bus
    from loom_core.errors import LoomError
    from loom_insights.service import secrets as sec
    from loom_insights.service.analysis import caps_from
    from loom_insights.service.provisioning import Provisioner, ProvisionRefused
    from loom_insights.settings import InsightsSettings
    from loom_insights.store.clickhouse import ChClient, ChError, NoAnswer

    own = settings.plane(InsightsSettings)
    store = await _open(settings)
    admin = ChClient(settings.clickhouse_url, max_size=1)
    bus = None
    try:
        leases = None
        if settings.nats_url:
            creds = (
                {"user": settings.nats_internal_user, "password": settings.nats_internal_password} if settings.nats_internal_user else {}
            )
            bus = await connect_bus(settings.nats_url, name="loom-ch-setup", **creds)
            leases = await LeaseStore.open(bus)
        prov = Provisioner(store, admin, leases, sec.sealer_for(settings), caps_from(own), own.ch_analysis_lease_wait_s)
        try:
            report = await prov.write("setup", holder="ch-setup")
        except ProvisionRefused as exc:
            print(f"loom: ch-setup refused: {exc.reason}", file=sys.stderr)
            return 1
        except ChError as exc:
            print(
                f"loom: ch-setup failed: ClickHouse error {exc.code} {exc.name} (does this user have access management?)", file=sys.stderr
            )
            return 1
        except (NoAnswer, LoomError) as exc:
            print(f"loom: ch-setup failed: {exc} (is ClickHouse reachable, and may this user read system.row_policies?)", file=sys.stderr)
            return 1
        if report.skipped:
            print(f"loom: ch-setup wrote nothing: {report.skipped}")
        else:
            drew = " (drew new secrets)" if report.drew_secrets else ""
            print(f"loom: wrote the analyst's entities at version {report.version}{drew}: {report.statements} statements")
        return 0
    finally:
        await admin.close()
        if bus is not None:
            await bus.close()
        await store.close()

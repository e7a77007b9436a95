"""`loom ch-setup [--print-sql | --print-analyst-sql | --rotate-analysis-key [--live]]`: the
insights plane's command, reached by the runner through the `loom.commands` entry point (the
runner imports no plane).

- `loom ch-setup`, run with a ClickHouse user that has access management, writes the analyst's
  entities under the `analysis.entities` lease (the repair too), unless the stored version is
  newer than this build's.
- `--rotate-analysis-key` rotates the analysis key (service/rotation.py): the recovery from a
  lost secrets row; with `--live`, a rotation on purpose of a row that opens.
- `--print-analyst-sql` prints a complete rotation for an admin to run by hand in one session
  (domain/rotation.py): it proves LOOM_JWT_SECRET against the root's record, draws a fresh key
  and password, and stores nothing (the printed SQL stores the row); it needs no access
  management, and works on the embedded store so the SQL can be reviewed.
- `--print-sql` prints the statements `loom ch-setup` would run, with the key and the password as
  placeholders: the shape, for review; nothing is drawn or stored.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from loom_core.data_dir import served_by, socket_path
from loom_core.local_secrets import owned_secrets
from loom_core.settings import Settings

if TYPE_CHECKING:
    from .store.clickhouse import ChClient

COMMANDS = ("ch-setup",)


def add_commands(sub: Any) -> None:
    ch = sub.add_parser("ch-setup", help="write (or print) the analysis user, its profiles, grants and signed row policies")
    mode = ch.add_mutually_exclusive_group()
    mode.add_argument("--print-sql", action="store_true", help="print what ch-setup would run, with the key and password as placeholders")
    mode.add_argument("--print-analyst-sql", action="store_true", help="print a complete key rotation for an admin to run in one session")
    mode.add_argument("--rotate-analysis-key", action="store_true", help="rotate the analysis key (the recovery from a lost secrets row)")
    ch.add_argument("--live", action="store_true", help="with --rotate-analysis-key: rotate a secrets row that still opens")
    ch.add_argument(
        "--prefix", choices=["SQL_", "custom_"], default=None, help="custom settings prefix for printed SQL (default: probe, else SQL_)"
    )


def run_command(args: argparse.Namespace, settings: Settings) -> int:
    printing = args.print_sql or args.print_analyst_sql
    if printing and not settings.clickhouse_url and served_by(settings.data_dir) is not None:
        # `loom up` holds the embedded store: it renders the SQL (ADMIN_COMMANDS) over its admin socket.
        sys.stdout.write(asyncio.run(_print_through_server(settings, analyst=args.print_analyst_sql, prefix=args.prefix)))
        return 0
    settings = owned_secrets(settings)
    if args.live and not args.rotate_analysis_key:
        raise SystemExit("loom: --live goes with --rotate-analysis-key")
    if args.rotate_analysis_key:
        return asyncio.run(_rotate(settings, live=args.live))
    if printing:
        text = asyncio.run(_print(settings, analyst=args.print_analyst_sql, prefix=args.prefix))
        sys.stdout.write(text)
        return 0
    return asyncio.run(_setup(settings))


async def _print_through_server(settings: Settings, *, analyst: bool, prefix: str | None) -> str:
    import httpx

    sock = socket_path(settings.data_dir)
    try:
        async with httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(uds=str(sock)), base_url="http://loom") as client:
            r = await client.post(f"/command/{PRINT_COMMAND}", json={"analyst": analyst, "prefix": prefix}, timeout=120)
    except httpx.TransportError:
        raise SystemExit(f"loom: the running Loom on {settings.data_dir} does not answer on {sock}; try again once it is up") from None
    if r.status_code != 200:
        raise SystemExit(f"loom: {r.json().get('error', {}).get('message', r.text)}")
    return str(r.json()["text"])


async def _print_in_server(runtime: Any, args: dict[str, Any]) -> str:
    """--print-sql / --print-analyst-sql run by the `loom up` that holds the store."""
    prefix = args.get("prefix")
    return await _render(runtime.store, runtime.settings, analyst=bool(args.get("analyst")), prefix=str(prefix) if prefix else None)


PRINT_COMMAND = "ch-setup-print"
# Commands the admin socket of a running `loom up` serves for this plane (loom_runner.embedded).
ADMIN_COMMANDS = {PRINT_COMMAND: _print_in_server}


async def _open(settings: Settings) -> Any:
    from loom_core.store import open_store, run_migrations

    from .store.schema import MIGRATIONS

    store = await open_store(settings)
    await run_migrations(store, MIGRATIONS)
    return store


async def _print(settings: Settings, *, analyst: bool, prefix: str | None) -> str:
    store = await _open(settings)
    try:
        return await _render(store, settings, analyst=analyst, prefix=prefix)
    finally:
        await store.close()


async def _render(store: Any, settings: Settings, *, analyst: bool, prefix: str | None) -> str:
    from .domain.entities import Caps, WritePlan
    from .domain.printed import render_rotation, render_script
    from .service import root
    from .service import secrets as sec
    from .service.analysis import caps_from
    from .settings import InsightsSettings
    from .store.tables import present as present_in

    tables = await present_in(store)
    caps: Caps = caps_from(settings.plane(InsightsSettings))
    if prefix is None:
        prefix = await _probe_prefix(settings) or "SQL_"
    if not analyst:
        plan = WritePlan(
            db=store.database,
            prefix=prefix,
            key=bytes(32),
            password="<the analyst password from loom.analysis_secrets>",
            version="",
            caps=caps,
            tables=tables,
        )
        return render_script(plan, placeholder_key=True)
    if store.engine != "clickhouse":
        await root.record(store, settings)  # the embedded data dir's owner records the root, as `loom up` does
    problem = await root.prove(store, settings)
    if problem:
        raise SystemExit(f"loom: {problem}")
    own = settings.plane(InsightsSettings)
    fresh = sec.draw()
    plan = WritePlan(db=store.database, prefix=prefix, key=fresh.key, password=fresh.password, version="", caps=caps, tables=tables)
    sealed = sec.seal(sec.sealer_for(settings), fresh)
    return render_rotation(plan, sealed=sealed, settle_s=own.ch_analysis_rotation_settle_s, cluster=settings.clickhouse_cluster)


async def _probe_prefix(settings: Settings) -> str:
    if not settings.clickhouse_url:
        return ""
    from loom_core.errors import Unavailable

    from .service.provisioning import detect_prefix
    from .store.clickhouse import ChClient, NoAnswer

    admin = ChClient(settings.clickhouse_url, max_size=1)
    try:
        return await detect_prefix(admin)
    except (NoAnswer, Unavailable):  # no answer, or neither prefix taken: printing uses ClickHouse's default prefix
        return ""
    finally:
        await admin.close()


async def _setup(settings: Settings) -> int:
    if not settings.clickhouse_url:
        raise SystemExit(
            "loom: analysis needs a ClickHouse server (LOOM_CLICKHOUSE_URL); on the embedded store use --print-analyst-sql to review the SQL"
        )
    from loom_core.errors import LoomError

    from .service import secrets as sec
    from .service.analysis import caps_from
    from .service.provisioning import Provisioner, ProvisionRefused
    from .settings import InsightsSettings
    from .store.clickhouse import ChError, NoAnswer

    own = settings.plane(InsightsSettings)
    async with _writer(settings, "loom-ch-setup") as (store, admin, leases):
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


@asynccontextmanager
async def _writer(settings: Settings, name: str) -> AsyncIterator[tuple[Any, ChClient, Any]]:
    """What `ch-setup` and `rotate` write the analyst's entities with: the store, an admin
    ClickHouse client and the analysis lease store (None without NATS); all closed on exit."""
    from .store.clickhouse import ChClient

    store = await _open(settings)
    admin = ChClient(settings.clickhouse_url, max_size=1)
    bus: Any = None
    try:
        bus, leases = await _lease_store(settings, name)
        yield store, admin, leases
    finally:
        await admin.close()
        if bus is not None:
            await bus.close()
        await store.close()


async def _lease_store(settings: Settings, name: str) -> tuple[Any, Any]:
    """The bus connection (or None) and the analysis lease store over it, when NATS is configured."""
    if not settings.nats_url:
        return None, None
    from loom_core.bus import LeaseStore, connect_bus

    user = settings.nats_internal_user
    bus = await connect_bus(settings.nats_url, name=name, user=user, password=settings.nats_internal_password if user else "")
    try:
        return bus, await LeaseStore.open(bus)
    except BaseException:  # whatever stops the open (a cancellation too) closes the connection, then propagates
        await bus.close()
        raise


async def _rotate(settings: Settings, *, live: bool) -> int:
    if not settings.clickhouse_url:
        raise SystemExit("loom: analysis needs a ClickHouse server (LOOM_CLICKHOUSE_URL): there is no key to rotate on the embedded store")

    from .service.analysis import caps_from
    from .service.rotation import RotationRefused, Rotator
    from .settings import InsightsSettings
    from .store.clickhouse import ChError, NoAnswer

    own = settings.plane(InsightsSettings)
    async with _writer(settings, "loom-rotate") as (store, admin, leases):
        rotator = Rotator(store, admin, leases, settings, caps_from(own), own.ch_analysis_rotation_settle_s, own.ch_analysis_lease_wait_s)
        try:
            report = await rotator.rotate(live)
        except RotationRefused as exc:
            print(f"loom: rotation refused: {exc.reason}", file=sys.stderr)
            return 1
        except ChError as exc:
            print(
                f"loom: the rotation stopped: ClickHouse error {exc.code} {exc.name}; analysis stays unavailable until a rerun"
                " finishes it (loom doctor: analysis.boundary)",
                file=sys.stderr,
            )
            return 1
        except NoAnswer:
            print(
                "loom: the rotation stopped: ClickHouse did not answer; analysis stays unavailable until a rerun finishes it"
                " (loom doctor: analysis.boundary)",
                file=sys.stderr,
            )
            return 1
        how = (
            "every server's policy carries it"
            if report.confirmed == "policies"
            else f"waited the settle time, {own.ch_analysis_rotation_settle_s:.0f} s"
        )
        print(f"loom: rotated the analysis key to {report.key} at version {report.version} ({how}): {report.statements} statements")
        return 0

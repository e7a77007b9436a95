"""`loom up`, `loom admin bootstrap`, `loom config docs`."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
import time
from importlib.metadata import entry_points
from pathlib import Path

from loom_core.process import exit_process, exit_status
from loom_core.settings import Settings

# httpx, uvloop, the bus, the store and the planes are imported by the commands that use them, not
# here: every CLI process (`loom --help`, `loom admin bootstrap`, `loom token`) imports this module
# and the command modules below, and importing them all cost each ~2 CPU-s.
from . import doctor_cli, secrets_cli, session_cli

# A plane's own commands: each entry point names a module with COMMANDS, add_commands(sub) and
# run_command(args, settings) (loom_insights.cli: `loom ch-setup`), and optionally ADMIN_COMMANDS
# a running `loom up` serves on its admin socket (embedded.admin_app).
COMMANDS_ENTRY_POINTS = "loom.commands"


def console() -> None:
    """The `loom` command: `main`, then the process ends (past chDB's native teardown when a
    command ran the embedded engine: loom_core/process.py), on a SystemExit too: uvicorn's on a
    port in use comes after the engine started."""
    try:
        code = main()
    except SystemExit as ended:
        code = exit_status(ended)
    exit_process(code)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="loom", description="Loom: coordination for AI agents.")
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("up", help="run Loom embedded: chDB, a nats-server child, every plane, the gateway")
    serve = sub.add_parser(
        "serve", help="cluster mode: serve some planes (and/or the gateway) against LOOM_CLICKHOUSE_URL and LOOM_NATS_URL"
    )
    serve.add_argument("--planes", default="", help="comma-separated planes this process serves (e.g. tasks); empty: none")
    serve.add_argument(
        "--gateway", action="store_true", help="also serve the HTTP gateway, relaying to LOOM_PLANE_ADDRESSES for planes served elsewhere"
    )
    admin = sub.add_parser("admin", help="operator commands")
    admin_sub = admin.add_subparsers(dest="admin_cmd", required=True)
    boot = admin_sub.add_parser("bootstrap", help="create an org and namespace; print the first admin token")
    boot.add_argument("--org", required=True)
    boot.add_argument("--namespace", required=True)
    boot.add_argument("--subject", default="user:admin")
    boot.add_argument("--json", action="store_true", help="print a JSON object instead of the bare token")
    boot.add_argument("--new-token", action="store_true", help="the org exists already: mint another org-wide admin token for it anyway")
    ops = sub.add_parser("ops", help="list the ops Loom serves, as a table")
    ops.add_argument("--group", default=None, help="only this group's ops (task, memory, policy, ...)")
    session_cli.add_admin_commands(admin_sub)  # `loom admin login-link`
    config = sub.add_parser("config", help="settings")
    config_sub = config.add_subparsers(dest="config_cmd", required=True)
    docs = config_sub.add_parser("docs", help="render docs/configuration.md from the settings definition")
    docs.add_argument("--output", type=Path, default=None)
    # `loom secrets reseal`, `loom doctor`, the session commands, and each plane's own commands (`loom ch-setup`) through entry points.
    commands = [
        secrets_cli,
        session_cli,
        doctor_cli,
        *(ep.load() for ep in sorted(entry_points(group=COMMANDS_ENTRY_POINTS), key=lambda e: e.name)),
    ]
    for command in commands:
        command.add_commands(sub)
    args = parser.parse_args(argv)
    settings = Settings()
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    for command in commands:
        if args.cmd in command.COMMANDS:
            return int(command.run_command(args, settings))
    if args.cmd in ("up", "serve"):
        from loom_core.process import tune_gc

        tune_gc()
        import uvloop

        from .http import ListenFailed

        try:
            if args.cmd == "up":
                return uvloop.run(_up(settings))  # uvloop: about twice the HTTP and gRPC throughput of asyncio's loop (docs/benchmarks.md)
            return uvloop.run(_serve(settings, {p for p in args.planes.split(",") if p}, args.gateway))
        except ListenFailed as exc:  # what had started is stopped
            print(f"loom {args.cmd}: {exc}", file=sys.stderr, flush=True)
            return 1
    if args.cmd == "admin" and args.admin_cmd in session_cli.ADMIN_COMMANDS:
        return session_cli.run_login_link(args, settings)
    if args.cmd == "admin" and args.admin_cmd == "bootstrap":
        out = asyncio.run(_bootstrap(settings, args.org, args.namespace, args.subject, again=args.new_token))
        print(json.dumps(out) if args.json else out["token"])
        return 0
    if args.cmd == "ops":
        return _ops(args.group)
    if args.cmd == "config" and args.config_cmd == "docs":
        from loom_core.settings import render_markdown

        text = render_markdown()
        if args.output:
            args.output.write_text(text)
        else:
            sys.stdout.write(text)
        return 0
    return 2


def _owned_secrets(settings: Settings) -> Settings:
    """A process that owns LOOM_DATA_DIR: unset secrets from (or generated into) its secrets file."""
    from loom_core.local_secrets import WeakSecret, with_local_secrets

    try:
        return with_local_secrets(settings)
    except WeakSecret as exc:
        raise SystemExit(f"loom: {exc}") from None


async def _up(settings: Settings) -> int:
    from .embedded import run_embedded

    settings = _owned_secrets(settings)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return await run_embedded(settings, stop)


async def _serve(settings: Settings, planes: set[str], gateway: bool) -> int:
    from loom_core.local_secrets import WeakSecret, check_jwt_secret
    from loom_core.process import freeze_startup_heap

    from .cluster import plane_addresses, serve_problem, start_relay_gateway
    from .embedded import start_instance

    # Without LOOM_CLICKHOUSE_URL the planes process owns the embedded store; a gateway with no
    # planes holds no store or bus and relays to LOOM_PLANE_ADDRESSES (cluster.py).
    problem = serve_problem(settings, planes, gateway)
    if problem:
        raise SystemExit(problem)
    if planes:  # a relay-only gateway verifies no token: the planes it relays to do
        try:
            check_jwt_secret(settings.jwt_secret)
        except WeakSecret as exc:
            raise SystemExit(f"loom serve: {exc}") from None
    remote = plane_addresses(settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    if not planes:
        relay = await start_relay_gateway(settings, remote)
        print(f"loom: gateway http {relay.base_url} relaying {','.join(sorted(remote))}", flush=True)
        await stop.wait()
        await relay.stop()
        return 0
    inst = await start_instance(
        settings,
        nats_url=settings.nats_url,
        http=gateway,
        only_planes=planes,
        remote_planes=remote,
        name=f"loom-{'-'.join(sorted(planes)) or 'gateway'}",
    )
    for plane, addr in inst.addresses.items():
        print(f"loom: plane {plane} grpc {addr}", flush=True)
    freeze_startup_heap()
    await stop.wait()
    await inst.stop()
    return 0


# Longest `loom admin bootstrap` waits for a starting server's admin socket.
BOOTSTRAP_WAIT_SECONDS = 120.0


def _server_starting(data_dir: Path) -> bool:
    """A `loom up` process on this data dir is alive (its pid file names a running process)."""
    from loom_core.data_dir import PID_FILE

    try:
        pid = int((data_dir / PID_FILE).read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return False
    return True


def _ops(group: str | None) -> int:
    """Every op this installation serves (the catalog `loom up` serves), one row each: GET /v1/ops
    of a running server lists the same, with schemas."""
    from loom_core.catalog import load_catalog

    ops = [op for op in load_catalog().ops.values() if group is None or op.group == group]
    if not ops:
        groups = sorted({op.group for op in load_catalog().ops.values()})
        print(f"loom: no op in group {group!r}; groups: {', '.join(groups)}", file=sys.stderr)
        return 2
    rows = [("OP", "ROLE", "WRITES", "LISTING", "SUMMARY")]
    for op in ops:
        listing = "experimental" if op.experimental else "unlisted" if op.unlisted else "listed"
        rows.append((op.name, op.min_role.label, "yes" if op.write_shaped else "no", listing, op.summary))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(r[:4], widths, strict=True)) + "  " + r[4])
    return 0


async def _bootstrap(settings: Settings, org: str, namespace: str, subject: str, *, again: bool = False) -> dict[str, str]:
    """Through the running server's admin socket when one holds the data dir; else directly.
    An org that exists already is refused unless `again` (--new-token)."""
    import httpx
    from loom_core.data_dir import server_lock, socket_path
    from loom_core.errors import LoomError

    if not settings.clickhouse_url:
        settings = _owned_secrets(settings)  # sign with the key `loom up` on this data dir uses
    sock = socket_path(settings.data_dir)
    lock = None
    if not settings.clickhouse_url and not sock.exists():
        # `./loom up &` then `loom admin bootstrap` at once: a starting server says so in its
        # pid file (the `loom` script writes it first thing) and holds the data dir's lock (and
        # chDB's) before its admin socket exists. Wait for the socket of a server that is
        # starting; else take the lock and open the store directly.
        lock = None if _server_starting(settings.data_dir) else server_lock(settings.data_dir, wait=False)
        if lock is None:
            print(
                f"loom: waiting for the server starting on {settings.data_dir} to open its admin socket "
                f"(up to {BOOTSTRAP_WAIT_SECONDS:.0f} s)",
                file=sys.stderr,
                flush=True,
            )
            deadline = time.monotonic() + BOOTSTRAP_WAIT_SECONDS
            while not sock.exists() and time.monotonic() < deadline:  # noqa: ASYNC110 - another process creates the socket
                await asyncio.sleep(0.1)
            if not sock.exists():
                raise SystemExit(
                    f"loom: the server on {settings.data_dir} did not open its admin socket within {BOOTSTRAP_WAIT_SECONDS:.0f} s"
                )
    if not settings.clickhouse_url and sock.exists():
        try:
            async with httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(uds=str(sock)), base_url="http://loom") as client:
                r = await client.post(
                    "/bootstrap", json={"org": org, "namespace": namespace, "subject": subject, "again": again}, timeout=30
                )
        except httpx.TransportError:
            sock.unlink(missing_ok=True)  # a server that died left it behind
        else:
            if r.status_code != 200:
                raise SystemExit(f"loom: bootstrap refused: {r.json().get('error', {}).get('message')}")
            return dict(r.json())
    from loom_core.identity.store import IdentityStore
    from loom_core.identity.tokens import TokenCodec
    from loom_core.runtime import CORE_MIGRATIONS
    from loom_core.store import open_store, run_migrations
    from loom_gateway import bootstrap_org

    if lock is None and not settings.clickhouse_url:
        lock = server_lock(settings.data_dir, wait=False)
        if lock is None:  # a dead server's socket was left behind, and another command holds the dir
            print(f"loom: waiting for another loom command that holds {settings.data_dir}", file=sys.stderr, flush=True)
            lock = server_lock(settings.data_dir, wait=True)
    store = await open_store(settings)
    try:
        await run_migrations(store, CORE_MIGRATIONS)
        token, p = await bootstrap_org(
            IdentityStore(store),
            TokenCodec(settings.jwt_secret, settings.jwt_secret_previous),
            org,
            namespace,
            settings.bootstrap_token_ttl_seconds,
            subject,
            again=again,
        )
    except LoomError as exc:
        raise SystemExit(f"loom: bootstrap refused: {exc.message}") from None
    finally:
        await store.close()
    return {"token": token, "token_id": p.jti, "subject": p.sub, "org": p.org}


if __name__ == "__main__":
    sys.exit(main())

"""`loom doctor [--json]`: checks a deployment and names each fault with the command that fixes
it and its page under docs/operations/doctor/. Exit code 0 healthy, 1 faults, 2 could not check
(something the checks need did not answer, and nothing checked was a fault).

The runner's own checks are the parts every process shares: NATS reachable, JetStream on,
cluster quorum, core's streams (the ledger, the leases bucket); ClickHouse reachable and core's
schema; the root secret strong (and, on a single host, the data dir's secrets file private);
clock skew between this process, NATS and ClickHouse; free disk under the data dir. Each plane
adds its own through the `loom.doctor` entry points (loom_core.doctor): its streams and tables,
the policy mode, the analyst boundary, LibreChat.

Where it runs: on the embedded store chDB opens one process per data dir, so while `loom up`
runs the doctor asks that process, over LOOM_DATA_DIR/admin.sock, to run the checks with its own
store and bus; with no server on the data dir it opens the store itself and says NATS (the
server's child) could not be checked. Against a cluster (LOOM_CLICKHOUSE_URL, LOOM_NATS_URL, as
the Helm chart's `helm test` hook runs it) it connects to both itself.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import stat
import sys
import time
import uuid
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import httpx
from loom_core.bus.leases import BUCKET as LEASES_BUCKET
from loom_core.bus.nats import NATS_REQUEST_TIMEOUT_SECONDS
from loom_core.bus.replicas import jetstream
from loom_core.chain.ledger import STREAM as LEDGER_STREAM
from loom_core.doctor import (
    DOCTOR_ENTRY_POINTS,
    NATS_DOWN_FIX,
    Check,
    DoctorContext,
    Verdict,
    fault,
    not_applicable,
    ok,
    schema_check,
    stream_checks,
    stream_health,
    unchecked,
)
from loom_core.local_secrets import FILE_NAME as SECRETS_FILE
from loom_core.local_secrets import WeakSecret, check_jwt_secret, with_local_secrets
from loom_core.runtime import CORE_MIGRATIONS
from loom_core.settings import Settings
from nats.errors import NoRespondersError
from nats.js.errors import NotFoundError

EXIT_HEALTHY, EXIT_FAULTS, EXIT_UNCHECKED = 0, 1, 2
CONNECT_TIMEOUT_S = 5.0
# Beyond this, leases (TTLs on NATS), token expiries and the analysis scope's expiry disagree
# between the parts that judge them.
CLOCK_SKEW_MAX_S = 2.0
DISK_MIN_FREE_BYTES = 1 << 30
DISK_MIN_FREE_SHARE = 0.05
LEASES_STREAM = f"KV_{LEASES_BUCKET}"
JS_UNAVAILABLE = 10008  # JetStream's "system temporarily unavailable": no meta leader
CORE_STREAM_FIX = "restart a Loom process (each declares the ledger stream and the leases bucket at start)"
DOCTOR_PATH = "/doctor"


def run_command(args: argparse.Namespace, settings: Settings) -> int:
    checks = asyncio.run(diagnose(settings))
    code = exit_code(checks)
    if args.json:
        print(json.dumps(report(checks), indent=2))
    else:
        sys.stdout.write(render(checks))
    return code


# ---------------------------------------------------------------------------- outcome


def exit_code(checks: list[Check]) -> int:
    verdicts = {c.verdict for c in checks}
    if Verdict.FAULT in verdicts:
        return EXIT_FAULTS
    if Verdict.UNCHECKED in verdicts:
        return EXIT_UNCHECKED
    return EXIT_HEALTHY


def report(checks: list[Check]) -> dict[str, Any]:
    code = exit_code(checks)
    status = {EXIT_HEALTHY: "healthy", EXIT_FAULTS: "faults", EXIT_UNCHECKED: "unchecked"}[code]
    return {"status": status, "exit_code": code, "checks": [c.to_json() for c in checks]}


_LABEL = {Verdict.OK: "ok", Verdict.FAULT: "FAULT", Verdict.NOT_APPLICABLE: "n/a", Verdict.UNCHECKED: "??"}


def render(checks: list[Check]) -> str:
    faults = sum(c.verdict == Verdict.FAULT for c in checks)
    unknown = sum(c.verdict == Verdict.UNCHECKED for c in checks)
    head = "healthy" if not faults and not unknown else f"{faults} fault(s), {unknown} not checked"
    width = max((len(c.name) for c in checks), default=0)
    lines = [f"loom doctor: {head}"]
    for c in checks:
        lines.append(f"  {_LABEL[c.verdict]:<5} {c.name:<{width}}  {c.summary}")
        if c.fix:
            lines.append(f"        {'':<{width}}  fix: {c.fix}")
        if c.doc:
            lines.append(f"        {'':<{width}}  see: {c.doc}")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------- the checks


async def run_checks(ctx: DoctorContext) -> list[Check]:
    """Every check: the runner's own, then each plane's (`loom.doctor` entry points)."""
    out = await core_checks(ctx)
    for ep in sorted(entry_points(group=DOCTOR_ENTRY_POINTS), key=lambda e: e.name):
        try:
            out += await ep.load()(ctx)
        except Exception as exc:  # noqa: BLE001 - one plane's checks failing is a check that could not run
            out.append(unchecked(f"{ep.name}.checks", f"the {ep.name} plane's checks failed ({type(exc).__name__})"))
    return out


async def core_checks(ctx: DoctorContext) -> list[Check]:
    return [
        *await nats_checks(ctx),
        *await stream_checks(ctx, (LEASES_STREAM,), "core", CORE_STREAM_FIX),
        *await ledger_stream_check(ctx),
        await clickhouse_reachable(ctx),
        await schema_check(ctx, "core", CORE_MIGRATIONS),
        root_secret_check(ctx.settings),
        secrets_file_check(ctx),
        await clock_check(ctx),
        disk_check(ctx),
    ]


async def nats_checks(ctx: DoctorContext) -> list[Check]:
    if ctx.bus is None and not ctx.settings.nats_url:
        why = "no `loom up` runs on LOOM_DATA_DIR (the embedded NATS is its child)"
        return [
            unchecked(n, why, "start Loom (`loom up`), then run `loom doctor` again")
            for n in ("nats.reachable", "nats.jetstream", "nats.quorum")
        ]
    if ctx.bus is None:
        return [
            fault("nats.reachable", "nats-unreachable", f"NATS did not answer ({ctx.bus_problem or 'not reachable'})", NATS_DOWN_FIX),
            unchecked("nats.jetstream", "NATS did not answer"),
            unchecked("nats.quorum", "NATS did not answer"),
        ]
    try:
        await ctx.bus.nc.flush(timeout=CONNECT_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001 - any failure is "not reachable"
        return [
            fault("nats.reachable", "nats-unreachable", f"NATS did not answer a ping ({type(exc).__name__})", NATS_DOWN_FIX),
            unchecked("nats.jetstream", "NATS did not answer"),
            unchecked("nats.quorum", "NATS did not answer"),
        ]
    out = [ok("nats.reachable", "NATS answers")]
    js_problem, js_off = "", False
    try:
        await ctx.bus.js.account_info()
    except Exception as exc:  # noqa: BLE001 - JetStream off, or a cluster without its leader
        js_problem = type(exc).__name__
        # No responder at all: JetStream is off. A timeout or "temporarily unavailable" (10008)
        # is a JetStream that is on but has no leader: a cluster that lost quorum.
        js_off = isinstance(exc, NoRespondersError) or (getattr(exc, "err_code", None) not in (None, JS_UNAVAILABLE))
    stream_problem = ""
    try:
        info = await ctx.bus.js.stream_info(LEASES_STREAM)
    except NotFoundError:  # the stream check names a missing leases bucket
        info = None
    except Exception as exc:  # noqa: BLE001 - a stream whose replicas lost their leader does not answer
        info, stream_problem = None, type(exc).__name__
    cluster = info.cluster if info is not None and info.cluster is not None and info.cluster.name else None
    problem = stream_health(cluster) if cluster is not None else ""
    if (js_problem and not js_off and info is None) or (stream_problem and not js_problem):
        problem = f"JetStream does not answer ({js_problem or stream_problem}) for {LEASES_STREAM}: no leader"
        out.append(
            unchecked("nats.jetstream", f"JetStream does not answer ({js_problem})")
            if js_problem
            else ok("nats.jetstream", "JetStream answers")
        )
        out.append(
            fault(
                "nats.quorum",
                "nats-quorum",
                f"{problem} (a NATS cluster that lost quorum, or one still electing)",
                "bring the NATS cluster's servers back (JetStream needs a majority of them), then run `loom doctor` again",
            )
        )
        return out
    if js_problem and not problem:
        out.append(
            fault(
                "nats.jetstream",
                "nats-jetstream-off",
                f"JetStream does not answer ({js_problem})",
                "run nats-server with JetStream on (-js, or `jetstream {}` in its configuration); on a cluster, bring its servers back",
            )
        )
    elif js_problem:
        out.append(unchecked("nats.jetstream", f"JetStream does not answer ({js_problem}) while its cluster has no quorum"))
    else:
        out.append(ok("nats.jetstream", "JetStream answers"))
    if cluster is None:
        out.append(
            not_applicable("nats.quorum", "a single NATS server (no cluster)")
            if info is not None
            else unchecked("nats.quorum", f"the {LEASES_STREAM} stream could not be read")
        )
    elif problem:
        out.append(
            fault(
                "nats.quorum",
                "nats-quorum",
                f"the NATS cluster {cluster.name} has no quorum for Loom's streams: {problem}",
                "bring the NATS cluster's servers back (each stream needs a majority of its replicas)",
            )
        )
    else:
        out.append(ok("nats.quorum", f"NATS cluster {cluster.name}: leader {cluster.leader}, replicas current"))
    return out


async def ledger_stream_check(ctx: DoctorContext) -> list[Check]:
    """The ledger's stream: on the embedded store the ledger goes straight into chDB (one engine,
    this process's), so there is none to check."""
    if ctx.embedded:
        return [not_applicable(f"nats.stream.{LEDGER_STREAM}", "the embedded store takes the ledger directly (no stream)")]
    return await stream_checks(ctx, (LEDGER_STREAM,), "core", CORE_STREAM_FIX)


async def clickhouse_reachable(ctx: DoctorContext) -> Check:
    where = "ClickHouse" if ctx.settings.clickhouse_url else "the embedded store (chDB)"
    if ctx.store is None:
        return fault(
            "clickhouse.reachable",
            "clickhouse-unreachable",
            f"{where} did not answer ({ctx.store_problem or 'not reachable'})",
            "fix LOOM_CLICKHOUSE_URL or bring ClickHouse back, then run `loom doctor` again",
        )
    try:
        rows = await ctx.store.query("SELECT version() AS v")
    except Exception as exc:  # noqa: BLE001 - the store's own errors carry no driver text
        return fault(
            "clickhouse.reachable",
            "clickhouse-unreachable",
            f"{where} did not answer ({type(exc).__name__})",
            "fix LOOM_CLICKHOUSE_URL or bring ClickHouse back, then run `loom doctor` again",
        )
    return ok("clickhouse.reachable", f"{where} answers (ClickHouse {rows[0]['v']})")


def root_secret_check(settings: Settings) -> Check:
    try:
        check_jwt_secret(settings.jwt_secret)
    except WeakSecret as exc:
        return fault("secrets.root", "weak-root-secret", str(exc).split(":", 1)[0], str(exc).split(": ", 1)[-1])
    if settings.jwt_secret_previous and settings.jwt_secret_previous == settings.jwt_secret:
        return fault(
            "secrets.root",
            "weak-root-secret",
            "LOOM_JWT_SECRET_PREVIOUS equals LOOM_JWT_SECRET",
            "unset LOOM_JWT_SECRET_PREVIOUS once `loom secrets reseal` has run",
        )
    return ok("secrets.root", "LOOM_JWT_SECRET is set and at least 32 bytes")


def secrets_file_check(ctx: DoctorContext) -> Check:
    """On a single host the data dir's secrets file holds the root secret in clear: it must be
    readable by its owner alone."""
    if not ctx.embedded:
        return not_applicable("secrets.file", "a cluster keeps its secrets in the deployment's secret store")
    path = ctx.settings.data_dir.resolve() / SECRETS_FILE
    if not path.exists():
        return not_applicable("secrets.file", "LOOM_JWT_SECRET comes from the environment (no secrets file)")
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        return fault(
            "secrets.file",
            "secrets-file-open",
            f"{SECRETS_FILE} under LOOM_DATA_DIR has mode {mode:04o}: other users can read the root secret",
            f"chmod 600 LOOM_DATA_DIR/{SECRETS_FILE}",
        )
    return ok("secrets.file", f"{SECRETS_FILE} is readable by its owner alone")


async def clock_check(ctx: DoctorContext) -> Check:
    """This process's clock against ClickHouse's and NATS's (each read corrected by half its
    round trip)."""
    skews: dict[str, float] = {}
    if ctx.store is not None:
        try:
            t0 = time.time()
            rows = await ctx.store.query("SELECT toUnixTimestamp64Micro(now64(6)) AS us")
            t1 = time.time()
            skews["ClickHouse"] = int(rows[0]["us"]) / 1e6 - (t0 + t1) / 2
        except Exception:  # noqa: BLE001 - clickhouse.reachable names it
            pass
    if ctx.bus is not None:
        try:
            skews["NATS"] = await _nats_skew(ctx.bus)
        except Exception:  # noqa: BLE001 - nats.reachable names it
            pass
    if not skews:
        return unchecked("clock.skew", "neither ClickHouse nor NATS answered")
    return judge_skew(skews)


def judge_skew(skews: dict[str, float]) -> Check:
    """A fault when any two of this process, NATS and ClickHouse disagree by more than
    CLOCK_SKEW_MAX_S."""
    clocks = {"this process": 0.0, **skews}
    spread = max(clocks.values()) - min(clocks.values())
    shown = ", ".join(f"{k} {v:+.3f} s" for k, v in skews.items())
    if spread > CLOCK_SKEW_MAX_S:
        return fault(
            "clock.skew",
            "clock-skew",
            f"clocks disagree by {spread:.1f} s (against this process: {shown})",
            "synchronise the hosts' clocks (chrony or systemd-timesyncd against the same NTP servers)",
        )
    return ok("clock.skew", f"clocks agree within {spread:.3f} s ({shown})")


async def _nats_skew(bus: Any) -> float:
    """NATS's clock: a JetStream message's server-side timestamp, written as a key of the leases
    bucket that expires by itself."""
    key = f"doctor-clock-{uuid.uuid4().hex}"
    kv = await bus.js.key_value(LEASES_BUCKET)
    t0 = time.time()
    seq = await kv.create(key, b"", msg_ttl=5)
    t1 = time.time()
    msg = await bus.js.get_msg(f"KV_{LEASES_BUCKET}", seq=seq)
    assert msg.time is not None
    return float(msg.time.timestamp()) - (t0 + t1) / 2


def disk_check(ctx: DoctorContext) -> Check:
    if not ctx.embedded and ctx.settings.nats_url:
        return not_applicable("disk.free", "the data lives on ClickHouse's and NATS's own volumes")
    data = ctx.settings.data_dir.resolve()
    if not data.exists():
        return unchecked("disk.free", "LOOM_DATA_DIR does not exist yet")
    usage = shutil.disk_usage(data)
    return judge_disk(usage.free, usage.total)


def judge_disk(free: int, total: int) -> Check:
    gib = free / (1 << 30)
    if free < DISK_MIN_FREE_BYTES or (total and free / total < DISK_MIN_FREE_SHARE):
        return fault(
            "disk.free",
            "disk-low",
            f"{gib:.2f} GiB free under LOOM_DATA_DIR ({free / total:.0%} of the disk): chDB and JetStream stop writing when it is full",
            "free space on LOOM_DATA_DIR's disk or move the data dir to a larger one (docs/operations/backups.md)",
        )
    return ok("disk.free", f"{gib:.1f} GiB free under LOOM_DATA_DIR ({free / total:.0%} of the disk)")


# ---------------------------------------------------------------------------- where it runs


@dataclass(slots=True)
class _DoctorBus:
    """The doctor's own NATS connection: a plain client (no broker, no consumers)."""

    nc: Any
    js: Any


async def _connect_nats(settings: Settings) -> tuple[_DoctorBus | None, str]:
    import nats

    servers = [u.strip() for u in settings.nats_url.split(",") if u.strip()]
    creds = {"user": settings.nats_internal_user, "password": settings.nats_internal_password} if settings.nats_internal_user else {}
    try:
        # nats-py reads max_reconnect_attempts=0 as "no limit" and retries a first connect to a
        # closed port until the wait_for below expires; 1 tries each server twice, 0.1 s apart,
        # so a NATS that refuses connections is named at once.
        nc = await asyncio.wait_for(
            nats.connect(
                servers,
                name="loom-doctor",
                connect_timeout=2,
                allow_reconnect=False,
                max_reconnect_attempts=1,
                reconnect_time_wait=0.1,
                **creds,
            ),
            CONNECT_TIMEOUT_S * 2,
        )
    except Exception as exc:  # noqa: BLE001 - any failure is "not reachable"
        return None, type(exc).__name__
    return _DoctorBus(nc, jetstream(nc, 1, NATS_REQUEST_TIMEOUT_SECONDS)), ""


async def _open_store(settings: Settings) -> tuple[Any | None, str]:
    from loom_core.store import open_store

    try:
        return await asyncio.wait_for(open_store(settings), CONNECT_TIMEOUT_S * 2), ""
    except Exception as exc:  # noqa: BLE001 - any failure is "not reachable"
        return None, type(exc).__name__


async def diagnose(settings: Settings) -> list[Check]:
    if not settings.clickhouse_url:
        return await _diagnose_embedded(settings)
    return await _diagnose_direct(settings)


async def _diagnose_direct(settings: Settings, store: Any | None = None, store_problem: str = "") -> list[Check]:
    """Connect to the store (unless given) and NATS from this process, and run every check."""
    owns_store = store is None and not store_problem
    if owns_store:
        store, store_problem = await _open_store(settings)
    bus, bus_problem = (None, "no LOOM_NATS_URL, and no `loom up` runs on LOOM_DATA_DIR (NATS is its child)")
    if settings.nats_url:
        bus, bus_problem = await _connect_nats(settings)
    try:
        ctx = DoctorContext(settings, store, bus, store_problem=store_problem, bus_problem=bus_problem)
        return await run_checks(ctx)
    finally:
        if bus is not None:
            await bus.nc.close()
        if owns_store and store is not None:
            await store.close()


async def _diagnose_embedded(settings: Settings) -> list[Check]:
    from loom_core.data_dir import server_lock, socket_path

    data = settings.data_dir.resolve()
    if (data / SECRETS_FILE).exists():
        try:
            settings = with_local_secrets(settings)  # the secrets `loom up` on this data dir uses
        except WeakSecret:
            pass  # secrets.root names it
    sock = socket_path(data)
    if sock.exists():
        answered = await _ask_server(sock)
        if answered is not None:
            return answered
    lock = server_lock(data, wait=False)
    if lock is None:  # a `loom up` is starting: ask it once its admin socket is open
        deadline = time.monotonic() + 120.0
        while not sock.exists() and time.monotonic() < deadline:  # noqa: ASYNC110 - another process creates the socket
            await asyncio.sleep(0.1)
        answered = await _ask_server(sock) if sock.exists() else None
        if answered is not None:
            return answered
        return [unchecked("loom.server", "a `loom up` holds LOOM_DATA_DIR but did not open its admin socket", "run `loom doctor` again")]
    try:
        return await _diagnose_direct(settings)
    finally:
        lock.close()


async def _ask_server(sock: Path) -> list[Check] | None:
    """The running server's checks over its admin socket; None when no server answers there."""
    try:
        async with httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(uds=str(sock)), base_url="http://loom") as client:
            r = await client.post(DOCTOR_PATH, timeout=300)
    except httpx.TransportError:
        return None
    if r.status_code != 200:
        return [
            unchecked(
                "loom.server", f"the `loom up` on LOOM_DATA_DIR answered HTTP {r.status_code}: see its log", "run `loom doctor` again"
            )
        ]
    return [Check(c["name"], Verdict(c["verdict"]), c["summary"], c.get("fix", ""), c.get("fault", "")) for c in r.json()["checks"]]


async def serve_checks(settings: Settings, store: Any, bus: Any) -> dict[str, Any]:
    """The admin socket's `/doctor`: every check, run inside the serving process."""
    return report(await run_checks(DoctorContext(settings, store, bus)))


__all__ = ["exit_code", "render", "report", "run_checks", "run_command", "serve_checks"]

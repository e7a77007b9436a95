"""Embedded Loom: a nats-server child, chDB, every plane's gRPC server and the gateway, in one
process. Also the admin socket `loom admin` uses while this process holds the chDB engine."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import IO, Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from loom_core.bus import NatsServer
from loom_core.bus.auth_callout import NatsAuthCallout, embedded_nats_auth
from loom_core.data_dir import PID_FILE, URL_FILE, served_by, server_lock, socket_path
from loom_core.errors import ErrorCode, LoomError, Unavailable
from loom_core.process import freeze_startup_heap
from loom_core.runtime import Plane, PlaneServer, Runtime
from loom_core.settings import Settings
from loom_core.store import Store, run_migrations
from loom_gateway import GatewaySettings, Relay, bootstrap_org, create_app, error_response, issue_login_code, open_sessions

from .cli import COMMANDS_ENTRY_POINTS
from .doctor import DOCTOR_PATH, serve_checks
from .http import HttpServer
from .planes import build_planes, start_gate, stop_gate

log = logging.getLogger(__name__)


@dataclass
class Instance:
    """One Loom replica: a runtime, its planes' gRPC servers, and (optionally) the gateway."""

    runtime: Runtime
    planes: list[Plane]
    servers: dict[str, PlaneServer] = field(default_factory=dict)
    relay: Relay | None = None
    http: HttpServer | None = None
    nats_auth: NatsAuthCallout | None = None  # the NATS auth callout service, when this replica answers it

    @property
    def addresses(self) -> dict[str, str]:
        return {name: f"127.0.0.1:{s.port}" for name, s in self.servers.items()}

    @property
    def base_url(self) -> str:
        assert self.http is not None
        return f"http://127.0.0.1:{self.http.port}"

    def grpc_address(self, plane: str) -> str:
        return f"127.0.0.1:{self.servers[plane].port}"

    async def stop(self) -> None:
        if self.relay is not None:
            self.relay.drain()  # open long polls end now with a retryable 503, not at the grace's end
        if self.http is not None:
            await self.http.stop()
        if self.relay is not None:
            await self.relay.close()
        for s in self.servers.values():
            await s.stop(0.5)
        for p in reversed(self.planes):
            await p.stop()
        if self.nats_auth is not None:
            await self.nats_auth.stop()
        await stop_gate(self.runtime)
        await self.runtime.stop()


async def start_instance(
    settings: Settings,
    *,
    store: Store | None = None,
    nats_url: str,
    http: bool = True,
    http_port: int | None = None,
    name: str = "loom",
    only_planes: set[str] | None = None,
    remote_planes: dict[str, str] | None = None,
    transport: str | None = None,
    extra_checks: dict[str, Callable[[], Awaitable[None]]] | None = None,
) -> Instance:
    """Start one replica. `only_planes` serves a subset (cluster mode: one plane per process);
    `remote_planes` are plane=host:port addresses the gateway relays to instead. `transport`
    is how the gateway reaches the planes of this process: `inproc` (the chain called in
    process) or `grpc` (over loopback, as a cluster's gateway does); LOOM_GATEWAY_TRANSPORT
    when not given."""
    runtime = await Runtime.start(settings, store=store, nats_url=nats_url, name=name)
    # Every runtime (each plane's process, in a cluster) builds its own history-policy gate.
    await start_gate(runtime)
    planes = [p for p in build_planes(runtime, only_planes) if only_planes is None or p.name in only_planes]
    for plane in planes:
        await run_migrations(runtime.store, plane.migrations)
    inst = Instance(runtime, planes)
    if settings.nats_auth_callout_issuer_seed:
        # Agents subscribe to task events with their Loom token (nats-server auth callout, core's).
        inst.nats_auth = NatsAuthCallout(runtime.bus, runtime.auth, runtime.identity, runtime.settings)
        await inst.nats_auth.start()
    for i, plane in enumerate(planes):
        server = PlaneServer(runtime, plane.name, plane.handlers())
        port = settings.grpc_port_base + i if settings.grpc_port_base else 0
        await server.start(settings.grpc_host, port)
        inst.servers[plane.name] = server
    for plane in planes:
        await plane.start()
    if http:
        local = dict(inst.servers) if (transport or settings.plane(GatewaySettings).gateway_transport) == "inproc" else {}
        inst.relay = Relay(
            runtime.catalog, {**inst.addresses, **(remote_planes or {})}, local=local, recorder=runtime.interceptor(), replica=runtime.bus
        )
        for plane in planes:
            # A plane whose op composes other ops (search.unified) calls them through this relay.
            attach = getattr(plane, "attach_op_caller", None)
            if attach is not None:
                attach(inst.relay.call)
        checks = {"store": runtime.store.ping, "bus": runtime.bus.ping, **(extra_checks or {})}
        # The optional plane health hook (common agreement): `async def health() -> {name: check}`.
        plane_health = {p.name: hook for p in planes if callable(hook := getattr(p, "health", None))}
        gateway = settings.plane(GatewaySettings)
        sessions = await open_sessions(runtime, gateway)
        app = create_app(
            inst.relay,
            checks,
            plane_health=plane_health,
            verify=runtime.auth.verify,
            nats_url=nats_url,
            sessions=sessions,
            gateway=gateway,
        )
        inst.http = HttpServer(app, host=settings.http_host, port=settings.http_port if http_port is None else http_port)
        try:
            await inst.http.start()
        except BaseException:
            await inst.stop()  # the replica it would have served stops; the failure goes on
            raise
    return inst


def admin_app(runtime: Runtime, planes: Sequence[Plane] = ()) -> FastAPI:
    """Served on LOOM_DATA_DIR/admin.sock (mode 0600): whoever can open the data dir is the operator.
    A plane's operator commands add theirs (`admin_routes`: path -> async JSON body -> JSON answer)."""
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    for plane in planes:
        for path, route in getattr(plane, "admin_routes", {}).items():
            app.add_api_route(path, _json_route(route), methods=["POST"])

    @app.post("/bootstrap")
    async def bootstrap(request: Request) -> Response:
        body: dict[str, Any] = await request.json()
        try:
            token, p = await bootstrap_org(
                runtime.identity,
                runtime.codec,
                str(body["org"]),
                str(body["namespace"]),
                runtime.settings.bootstrap_token_ttl_seconds,
                str(body.get("subject") or "user:admin"),
                again=bool(body.get("again")),
            )
        except LoomError as exc:
            return error_response(exc)
        await runtime.auth.publish_grant_change(p.org, p.sub)
        return JSONResponse({"token": token, "token_id": p.jti, "subject": p.sub, "org": p.org})

    @app.post("/login-link")
    async def login_link(request: Request) -> Response:
        body: dict[str, Any] = await request.json()
        ttl = runtime.settings.plane(GatewaySettings).login_link_ttl_seconds
        try:
            return JSONResponse(
                await issue_login_code(runtime.identity, runtime.settings.jwt_secret, str(body["org"]), str(body["subject"]), ttl)
            )
        except LoomError as exc:
            return error_response(exc)

    @app.post(DOCTOR_PATH)
    async def doctor() -> JSONResponse:  # `loom doctor` while this process holds the chDB engine
        return JSONResponse(await serve_checks(runtime.settings, runtime.store, runtime.bus))

    # A plane command that needs the store this process holds (`loom ch-setup --print-analyst-sql`):
    # each `loom.commands` module may name some in ADMIN_COMMANDS, `async (runtime, args) -> text`.
    commands: dict[str, Callable[[Runtime, dict[str, Any]], Awaitable[str]]] = {}
    for ep in entry_points(group=COMMANDS_ENTRY_POINTS):
        commands.update(getattr(ep.load(), "ADMIN_COMMANDS", {}))

    @app.post("/command/{name}")
    async def command(name: str, request: Request) -> JSONResponse:
        handler = commands.get(name)
        if handler is None:
            return JSONResponse({"error": {"message": f"no admin command {name!r}"}}, status_code=404)
        try:
            text = await handler(runtime, dict(await request.json()))
        except SystemExit as exc:  # the command's own one-line refusal
            return JSONResponse({"error": {"message": str(exc.code).removeprefix("loom: ")}}, status_code=409)
        return JSONResponse({"text": text})

    return app


def _json_route(route: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]) -> Callable[[Request], Awaitable[JSONResponse]]:
    async def serve(request: Request) -> JSONResponse:
        return JSONResponse(await route(await request.json()))

    return serve


class _OneLine(logging.Filter):
    """nats-py logs every failed reconnect with a traceback: while the nats-server child is down
    that is a flood. Keep one line per distinct message, no traceback."""

    def __init__(self) -> None:
        super().__init__()
        self._seen: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        record.exc_info = None
        record.exc_text = None
        text = record.getMessage()
        if text in self._seen:
            return False
        self._seen.add(text)
        if len(self._seen) > 100:
            self._seen.clear()
        return True


NATS_RESTARTS = 5


class NatsChild:
    """Embedded mode's nats-server child under supervision: if it dies, it is started again on
    the same port and store (JetStream recovers its streams from the store; Loom's connections
    reconnect by themselves). Until it is back, `check` fails, so /v1/health says degraded. If
    it cannot be restarted, Loom says so in one line and stops, exiting non-zero."""

    def __init__(self, nats: NatsServer, poll: float = 0.2) -> None:
        self.nats = nats
        self.poll = poll
        self.failed = ""
        self.restarts = 0

    async def check(self) -> None:
        proc = self.nats.proc
        if proc is None or proc.poll() is not None:  # poll() also reaps a dead child: no zombie
            raise Unavailable(ErrorCode.BACKEND_UNAVAILABLE, "the nats-server child is not running")

    async def restart(self) -> bool:
        proc = self.nats.proc
        print(f"loom: the nats-server child exited with {proc.returncode if proc else '?'}; restarting it", file=sys.stderr, flush=True)
        for attempt in range(1, NATS_RESTARTS + 1):
            try:
                await asyncio.to_thread(self.nats.start)
            except Exception:  # noqa: BLE001 - reported in one line below
                await asyncio.sleep(min(2.0, 0.2 * attempt))
                continue
            self.restarts += 1
            print("loom: nats-server is back", file=sys.stderr, flush=True)
            return True
        self.failed = f"loom: the nats-server child could not be restarted (see {self.nats.store_dir}/nats-server.log); stopping"
        print(self.failed, file=sys.stderr, flush=True)
        return False

    async def supervise(self, stop: asyncio.Event) -> None:
        one_line = _OneLine()
        for name in ("nats.aio.client", "nats"):
            logging.getLogger(name).addFilter(one_line)
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), self.poll)
                return
            except TimeoutError:
                pass
            try:
                await self.check()
            except Unavailable:
                if not await self.restart():
                    stop.set()
                    return


async def run_embedded(settings: Settings, stop: asyncio.Event) -> int:
    """Run until `stop` is set; the process's exit code (non-zero when Loom had to stop itself,
    or another `loom up` already serves this data dir). `stop` is honoured in every phase:
    waiting for the data dir, starting, serving."""
    data = settings.data_dir.resolve()
    data.mkdir(parents=True, exist_ok=True)
    # The data dir's lock, held for the server's life: `loom admin bootstrap` run meanwhile
    # goes through the admin socket instead of opening chDB itself. Another `loom up` holding
    # it is refused at once; another command holding it briefly is waited for.
    try:
        lock = await _data_dir_lock(data, stop)
    except AlreadyRunning as exc:
        print(f"loom: {exc}", file=sys.stderr, flush=True)
        return 1
    if lock is None:
        return 0  # stopped while waiting
    pid_file = data / PID_FILE
    pid_file.write_text(str(os.getpid()))
    url_file = data / URL_FILE
    nats: NatsServer | None = None
    nats_url = settings.nats_url
    inst: Instance | None = None
    admin: HttpServer | None = None
    sock = socket_path(data)
    child: NatsChild | None = None
    supervisor: asyncio.Task[None] | None = None
    try:
        if not nats_url:
            config, settings = embedded_nats_auth(settings)
            nats = NatsServer(data / "nats", port=settings.nats_port, config=config, sync_interval=settings.nats_sync_interval)
            await nats.__aenter__()
            nats_url = nats.url
            child = NatsChild(nats)
        inst = await _unless_stopped(
            start_instance(settings, nats_url=nats_url, extra_checks={"nats_server": child.check} if child else None), stop
        )
        if inst is None:
            print("loom: stopped while starting", flush=True)
            return 0
        # Named as soon as it serves, so a second `loom up` says where this one answers.
        url = f"http://{settings.http_host}:{inst.http.port if inst.http else '-'}"
        url_file.write_text(url)
        if sock.exists():
            sock.unlink()
        admin = HttpServer(admin_app(inst.runtime, inst.planes), uds=str(sock))
        await admin.start()
        os.chmod(sock, 0o600)
        freeze_startup_heap()
        print(f"loom: up. gateway {url}  data {data}", flush=True)
        if inst.http is not None:
            public = settings.plane(GatewaySettings).public_url or f"http://localhost:{inst.http.port}"
            print(
                f"loom:   dashboard        {public.rstrip('/')}/  (sign in: loom admin login-link --org ORG --subject user:NAME)",
                flush=True,
            )
        for name, addr in inst.addresses.items():
            print(f"loom:   plane {name:<10} grpc {addr}", flush=True)
        if inst.nats_auth is not None:
            print(f"loom:   task events      {nats_url} (subscribe with your Loom token)", flush=True)
        print(f"loom:   policy mode      {policy_mode_line(inst.runtime)}", flush=True)
        if child is not None:
            supervisor = asyncio.create_task(child.supervise(stop))
        await stop.wait()
        print("loom: stopping", flush=True)
    finally:
        url_file.unlink(missing_ok=True)
        if pid_file.exists() and pid_file.read_text().strip() == str(os.getpid()):
            pid_file.unlink(missing_ok=True)
        if supervisor is not None:
            supervisor.cancel()
            await asyncio.gather(supervisor, return_exceptions=True)
        if admin is not None:
            await admin.stop()
        if sock.exists():
            sock.unlink()
        if inst is not None:
            await inst.stop()
        if nats is not None:
            await nats.__aexit__(None, None, None)
        lock.close()  # last: the store is closed, another process may open it now
    return 1 if child is not None and child.failed else 0


def policy_mode_line(runtime: Runtime) -> str:
    """The banner's policy line: the history-policy gate's mode (LOOM_POLICY_MODE) and what it
    means for the rules policy.set stores. The gate is a plane's (entry point `loom.gate`)."""
    mode = str(getattr(runtime.gate, "mode", "off"))
    meaning = {
        "off": "rules are stored but not evaluated (LOOM_POLICY_MODE=shadow logs, enforce denies)",
        "shadow": "rules log what they would deny and refuse nothing (LOOM_POLICY_MODE=enforce denies)",
        "enforce": "rules deny",
    }.get(mode, "")
    return f"{mode}: {meaning}" if meaning else mode


class AlreadyRunning(Exception):
    """Another `loom up` serves this data dir."""


async def _data_dir_lock(data: Path, stop: asyncio.Event) -> IO[bytes] | None:
    """The data dir's lock; None when `stop` was set while another command held it. Raises
    AlreadyRunning, saying how to reach and stop it, when the holder is another `loom up`."""
    waiting_said = False
    while True:
        lock = server_lock(data, wait=False)
        if lock is not None:
            return lock
        serving = served_by(data)
        if serving is not None:
            raise AlreadyRunning(
                f"{serving.replace('Loom is running', 'Loom is already running', 1)}, or give this one another LOOM_DATA_DIR"
            )
        if not waiting_said:
            print(f"loom: waiting for another loom command that holds {data}", file=sys.stderr, flush=True)
            waiting_said = True
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.1)
        if stop.is_set():
            return None


async def _unless_stopped(start: Awaitable[Instance], stop: asyncio.Event) -> Instance | None:
    """`start`'s result, or None (it cancelled) when `stop` is set first."""
    task = asyncio.ensure_future(start)
    waiter = asyncio.ensure_future(stop.wait())
    await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    if task.done():
        return task.result()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return None

"""Embedded Loom: a nats-server child, chDB, every plane's gRPC server and the gateway, in one
process. Also the admin socket `loom admin` uses while this process holds the chDB engine."""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from loom_core.bus import NatsServer
from loom_core.errors import LoomError
from loom_core.runtime import Plane, PlaneServer, Runtime
from loom_core.settings import Settings
from loom_core.store import Store, run_migrations
from loom_gateway.app import create_app, error_response
from loom_gateway.identity import bootstrap_org
from loom_gateway.relay import Relay

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
    nats_auth: Any = None  # the NATS auth callout service, when this replica answers it

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
) -> Instance:
    """Start one replica. `only_planes` serves a subset (cluster mode: one plane per process);
    `remote_planes` are plane=host:port addresses the gateway relays to instead."""
    runtime = await Runtime.start(settings, store=store, nats_url=nats_url, name=name)
    # Every runtime (each plane's process, in a cluster) builds its own history-policy gate.
    await start_gate(runtime)
    planes = [p for p in build_planes(runtime, only_planes) if only_planes is None or p.name in only_planes]
    for plane in planes:
        await run_migrations(runtime.store, plane.migrations)
    inst = Instance(runtime, planes)
    if settings.nats_auth_callout_issuer_seed:
        # Agents subscribe to task events with their Loom token (nats-server auth callout).
        from loom_tasks.nats_auth import NatsAuthCallout

        inst.nats_auth = NatsAuthCallout(runtime)
        await inst.nats_auth.start()
    for i, plane in enumerate(planes):
        server = PlaneServer(runtime, plane.name, plane.handlers())
        port = settings.grpc_port_base + i if settings.grpc_port_base else 0
        await server.start(settings.grpc_host, port)
        inst.servers[plane.name] = server
    for plane in planes:
        await plane.start()
    if http:
        inst.relay = Relay(runtime.catalog, {**inst.addresses, **(remote_planes or {})})
        checks = {"store": runtime.store.ping, "bus": runtime.bus.ping}
        app = create_app(inst.relay, checks)
        inst.http = HttpServer(app, host=settings.http_host, port=settings.http_port if http_port is None else http_port)
        await inst.http.start()
    return inst


def admin_app(runtime: Runtime) -> FastAPI:
    """Served on LOOM_DATA_DIR/admin.sock (mode 0600): whoever can open the data dir is the operator."""
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)

    @app.post("/bootstrap")
    async def bootstrap(request: Request) -> JSONResponse:
        body: dict[str, Any] = await request.json()
        try:
            token, p = await bootstrap_org(
                runtime.identity,
                runtime.codec,
                str(body["org"]),
                str(body["namespace"]),
                runtime.settings.bootstrap_token_ttl_seconds,
                str(body.get("subject") or "user:admin"),
            )
        except LoomError as exc:
            return error_response(exc)
        await runtime.auth.publish_grant_change(p.org, p.sub)
        return JSONResponse({"token": token, "token_id": p.jti, "subject": p.sub, "org": p.org})

    return app


async def run_embedded(settings: Settings, stop: asyncio.Event) -> None:
    data = settings.data_dir.resolve()
    data.mkdir(parents=True, exist_ok=True)
    nats: NatsServer | None = None
    nats_url = settings.nats_url
    if not nats_url:
        config = None
        try:
            from loom_tasks.nats_auth import embedded_nats_auth
        except ImportError:  # no tasks plane installed: no token-authenticated subscribers either
            embedded_nats_auth = None  # type: ignore[assignment]
        if embedded_nats_auth is not None:
            config, settings = embedded_nats_auth(settings)
        config = (config or "") + f"\njetstream {{ sync_interval: {settings.nats_sync_interval} }}\n"  # docs/operations/durability.md
        nats = NatsServer(data / "nats", port=settings.nats_port, config=config)
        await nats.__aenter__()
        nats_url = nats.url
    inst: Instance | None = None
    admin: HttpServer | None = None
    sock = data / "admin.sock"
    try:
        inst = await start_instance(settings, nats_url=nats_url)
        if sock.exists():
            sock.unlink()
        admin = HttpServer(admin_app(inst.runtime), uds=str(sock))
        await admin.start()
        os.chmod(sock, 0o600)
        print(f"loom: up. gateway http://{settings.http_host}:{inst.http.port if inst.http else '-'}  data {data}", flush=True)
        for name, addr in inst.addresses.items():
            print(f"loom:   plane {name:<10} grpc {addr}", flush=True)
        if inst.nats_auth is not None:
            print(f"loom:   task events      {nats_url} (subscribe with your Loom token)", flush=True)
        await stop.wait()
        print("loom: stopping", flush=True)
    finally:
        if admin is not None:
            await admin.stop()
        if sock.exists():
            sock.unlink()
        if inst is not None:
            await inst.stop()
        if nats is not None:
            await nats.__aexit__(None, None, None)


def socket_path(data_dir: Path) -> Path:
    return data_dir.resolve() / "admin.sock"

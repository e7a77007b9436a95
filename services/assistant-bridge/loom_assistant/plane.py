"""The assistant plane: assistant.ask, the chat endpoint the gateway hands its route to, the
service-user setup at boot, and the `assistant` health check (never required)."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Generator, Sequence
from pathlib import Path
from typing import Any

import uvicorn
import yaml
from loom_core.op_caller import HttpOpCaller, OpCaller
from loom_core.plane import HealthCheck, bind_handlers
from loom_core.runtime import Handler, Runtime
from loom_core.settings import Settings, plane_settings_classes, setting_names
from loom_core.store import Migration

from . import local
from .domain import definition as definition_mod
from .handlers import AssistantHandlers
from .http import ChatEndpoint, chat_op
from .service.bridge import Bridge, TokenLimits
from .service.checks import Checker
from .service.controls import Controls
from .service.librechat import LibreChatClient
from .service.setup import ServiceSetup, Status
from .settings import AssistantSettings
from .store.schema import MIGRATIONS
from .store.service_row import ServiceRowStore, sealer

NAME = "assistant"
REPO = Path(__file__).resolve().parents[3]
AGENT_YAML = REPO / "librechat" / "agent.yaml"
DOCS_DIR = REPO / "docs"


def load_definition(path: Path = AGENT_YAML) -> definition_mod.Definition:
    return definition_mod.parse(yaml.safe_load(path.read_text()))


def docs_text(path: Path = DOCS_DIR) -> str | None:
    """The build's docs, for unknown_names (None: no docs, so no name is reported)."""
    if not path.is_dir():
        return None
    parts = [p.read_text(errors="replace") for p in sorted(path.rglob("*.md"))]
    return "\n".join(parts) if parts else None


def memory_reads_recorded(core: Settings) -> bool:
    """LOOM_MEMORY_EXPOSURE_LEDGER_ENABLED, the decisions plane's setting, read through the
    settings class that plane registers (no import of the plane); True when none is installed."""
    cls = plane_settings_classes().get("decisions")
    if cls is None or "memory_exposure_ledger_enabled" not in cls.model_fields:
        return True
    return bool(core.plane(cls).model_dump()["memory_exposure_ledger_enabled"])


class _QuietServer(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield  # the process's runner owns SIGINT/SIGTERM


class AssistantPlane:
    name = NAME
    migrations: Sequence[Migration] = MIGRATIONS

    def __init__(self, runtime: Runtime, *, transport: Any = None) -> None:
        core = runtime.settings
        s = core.plane(AssistantSettings)
        self.settings = s
        self.catalog = runtime.catalog
        self.replica = runtime.bus
        self.definition = load_definition().with_model(s.assistant_model)
        self.rows = ServiceRowStore(runtime.store, sealer(core.jwt_secret, core.jwt_secret_previous))
        self.client: LibreChatClient | None = None
        self.setup: ServiceSetup | None = None
        if s.assistant_librechat_url:
            self.client = LibreChatClient(s.assistant_librechat_url, timeout=s.assistant_upstream_timeout_s, transport=transport)
            self.setup = ServiceSetup(
                rows=self.rows,
                client=self.client,
                leases=runtime.leases,
                definition=self.definition,
                email=s.assistant_service_email,
                retry_s=s.assistant_setup_retry_s,
                holder=f"{runtime.bus.nc.client_id}-{os.getpid()}-{id(self)}",
            )
        self.checker = Checker(
            runtime.store,
            flush=runtime.ledger.flush,
            ledger_wait_s=core.ledger_flush_interval_seconds + 0.25,
            op_names=list(runtime.catalog.ops),
            setting_names=setting_names(),
            docs_text=docs_text(),
            memory_reads_recorded=memory_reads_recorded(core),
        )
        self._http_ops: HttpOpCaller | None = None
        if s.assistant_loom_url:
            self._http_ops = HttpOpCaller(s.assistant_loom_url, timeout=10.0)
            self.checker.ops = self._http_ops
        self.bridge = Bridge(
            settings=s,
            token_limits=TokenLimits(core.token_max_ttl_seconds, core.token_max_chain_depth),
            store=runtime.store,
            auth=runtime.auth,
            codec=runtime.codec,
            ledger=runtime.ledger,
            setup=self.setup,
            client=self.client,
            checker=self.checker,
            model=self.definition.model,
        )
        # The chat route's own pass through the op chain (the same limiter, gate and ledger).
        self._chat = ChatEndpoint(self.bridge, runtime.interceptor(), chat_op(runtime.catalog), self.health)
        self.controls = Controls(
            store=runtime.store, auth=runtime.auth, default_cap_usd=s.default_daily_cost_cap_usd, share=s.assistant_budget_share
        )
        self._handlers = AssistantHandlers(self.bridge, self.controls)
        self._server: _QuietServer | None = None
        self._serve_task: asyncio.Task[None] | None = None

    def handlers(self) -> dict[str, Handler]:
        return bind_handlers(self.catalog, NAME, self._handlers)

    def attach_ops(self, ops: OpCaller) -> None:
        """How citation checks call Loom's ops (help.verify, with the answer's token): this
        replica's relay, handed over by its gateway."""
        self.checker.ops = ops

    def chat_app(self) -> ChatEndpoint:
        """The ASGI app the gateway hands the chat and models routes to."""
        return self._chat

    async def serve_chat(self, host: str, port: int) -> int:
        """Serve the chat route over HTTP (a cluster's gateway relays to it); the bound port."""
        # Idle connections outlive the gateway client's 5 s expiry, so the client always closes
        # first (equal timeouts race: a request sent as the server closes fails mid-read).
        config = uvicorn.Config(
            self.chat_app(), host=host, port=port, log_level="warning", access_log=False, lifespan="off", timeout_keep_alive=75
        )
        self._server = _QuietServer(config)
        self._serve_task = asyncio.create_task(self._server.serve())
        while not self._server.started:
            if self._serve_task.done():
                self._serve_task.result()
            await asyncio.sleep(0.01)
        return int(self._server.servers[0].sockets[0].getsockname()[1])

    async def start(self) -> None:
        local.register(self.replica, self)
        if self.settings.assistant_bridge_listen:
            host, _, port = self.settings.assistant_bridge_listen.rpartition(":")
            await self.serve_chat(host or "0.0.0.0", int(port))
        if self.setup is not None:
            self.setup.start()

    async def stop(self) -> None:
        local.unregister(self.replica)
        if self._server is not None:
            self._server.should_exit = True
            if self._serve_task is not None:
                await asyncio.gather(self._serve_task, return_exceptions=True)
            self._server = None
        if self.setup is not None:
            await self.setup.stop()
        if self.client is not None:
            await self.client.close()
        if self._http_ops is not None:
            await self._http_ops.close()

    async def health(self) -> dict[str, HealthCheck]:
        """`assistant` when LibreChat is configured; never required."""
        status, kind = self.bridge.status()
        if status == Status.NOT_CONFIGURED:
            return {}
        check = HealthCheck(ok=status == Status.READY, required=False)
        if status != Status.READY:
            check["reason"] = status.value
        if status == Status.FAILING and kind:
            check["failure"] = "assistant_service_failing"
        return {NAME: check}


def build(runtime: Runtime) -> AssistantPlane:
    return AssistantPlane(runtime)

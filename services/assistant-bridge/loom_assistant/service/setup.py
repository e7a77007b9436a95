"""The service user and agent, set up at boot under the cluster lease `assistant.service`
(spec 000 "The bridge", "Deployment"): four steps, each stored before the next, a repair of a
lost key (401) or agent (404), retried with a doubling wait up to 16 times the first."""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from dataclasses import dataclass, field
from enum import StrEnum

from loom_core.bus import LeaseStore
from loom_core.bus.leases import LeaseHeld
from loom_core.sealing import SealError

from ..domain.definition import Definition, should_write
from ..store.service_row import ServiceRow, ServiceRowStore
from .librechat import EMAIL_UNKNOWN, LibreChatClient, LibreChatError

log = logging.getLogger(__name__)

LEASE = "assistant.service"
LEASE_TTL_S = 120.0
SERVICE_USER_NAME = "loom-assistant"
MAX_BACKOFF_FACTOR = 16


class Status(StrEnum):
    NOT_CONFIGURED = "not_configured"
    STARTING = "starting"
    FAILING = "failing"
    AUTH_OFF = "auth_off"
    READY = "ready"


class NeedsOperator(Exception):
    """A failure the setup cannot repair by trying again (sealed value, refused sign-in)."""


@dataclass(slots=True)
class SetupState:
    status: Status = Status.STARTING
    failure_kind: str = ""
    failures: int = 0
    sign_ins: int = 0
    row: ServiceRow | None = None


class _Session:
    """One try's sign-in, made at most once (twice when it registers), at the first step
    that needs LibreChat."""

    def __init__(self, client: LibreChatClient, row: ServiceRow, state: SetupState) -> None:
        self.client = client
        self.row = row
        self.state = state
        self.jwt: str | None = None
        self.registered = False

    async def token(self) -> str:
        if self.jwt is not None:
            return self.jwt
        try:
            self.jwt = await self._login()
        except LibreChatError as exc:
            if exc.status == 404 and exc.message == EMAIL_UNKNOWN:
                # Register only after LibreChat said the email does not exist.
                await self.client.register(SERVICE_USER_NAME, self.row.email, self.row.password)
                self.registered = True
                self.jwt = await self._login()
            else:
                raise
        return self.jwt

    async def _login(self) -> str:
        self.state.sign_ins += 1
        try:
            return await self.client.login(self.row.email, self.row.password)
        except LibreChatError as exc:
            if exc.status == 429:
                exc.kind = "sign_in_rate_limited"
            elif 400 <= exc.status < 500 and exc.message != EMAIL_UNKNOWN:
                raise NeedsOperator(f"LibreChat refused the sign-in ({exc.status}): truncate loom.assistant_service") from exc
            raise


@dataclass(eq=False, slots=True, kw_only=True)
class ServiceSetup:
    rows: ServiceRowStore
    client: LibreChatClient
    leases: LeaseStore
    definition: Definition
    email: str
    retry_s: float
    holder: str
    lease_key: str = LEASE
    state: SetupState = field(default_factory=SetupState, init=False)
    _task: asyncio.Task[None] | None = field(default=None, init=False)
    _ready: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    _failed: asyncio.Event = field(default_factory=asyncio.Event, init=False)

    @property
    def row(self) -> ServiceRow | None:
        return self.state.row if self.state.status == Status.READY else None

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def wait_ready(self) -> None:
        """Until the row has its key and agent (wrap in `asyncio.timeout` to bound it)."""
        await self._ready.wait()

    async def wait_failure(self) -> None:
        """Until a try fails (tests and operators' tools watch the setup with it)."""
        await self._failed.wait()

    def backoff(self, failures: int) -> float:
        """The wait after the n-th failure in a row: doubling, at most 16 times the first."""
        return self.retry_s * min(2.0 ** max(failures - 1, 0), MAX_BACKOFF_FACTOR)

    async def _loop(self) -> None:
        while True:
            try:
                await self.run_once()
                return
            except asyncio.CancelledError:
                raise
            except LeaseHeld:
                # Another boot is setting the service up; read its result after a short wait.
                await asyncio.sleep(min(self.retry_s, 1.0))
                continue
            except Exception as exc:  # noqa: BLE001 - every failure is retried; its kind is shown
                self.state.failures += 1
                self.state.status = Status.FAILING
                self.state.failure_kind = _kind(exc)
                self._failed.set()
                log.warning("assistant: service setup failed (%s): %s", self.state.failure_kind, exc)
            await asyncio.sleep(self.backoff(self.state.failures))

    async def run_once(self) -> ServiceRow:
        """One try: under the lease, do only what is missing; mark ready on success."""
        lease = await self.leases.acquire(self.lease_key, self.holder, LEASE_TTL_S)
        try:
            row = await self._steps()
        finally:
            await self.leases.release(lease)
        self.state.row = row
        self.state.status = Status.READY
        self.state.failures = 0
        self.state.failure_kind = ""
        self._ready.set()
        return row

    async def _steps(self) -> ServiceRow:
        try:
            row = await self.rows.read()
        except SealError as exc:
            raise NeedsOperator("the sealed value opens with neither LOOM_JWT_SECRET nor LOOM_JWT_SECRET_PREVIOUS") from exc
        # 1. No row: the email and a random password.
        if row is None:
            row = ServiceRow(self.email, secrets.token_urlsafe(24), "", "", 0, "")
            await self.rows.write(row)
        elif row.api_key and row.agent_id:
            # A complete row: does LibreChat still hold the key and the agent?
            try:
                if not await self.client.agent_exists(row.api_key, row.agent_id):
                    row = row.but(agent_id="")
                    await self.rows.write(row)
            except LibreChatError as exc:
                if exc.status != 401:
                    raise
                row = row.but(api_key="")
                await self.rows.write(row)
        session = _Session(self.client, row, self.state)
        # 2. No key: sign in (registering first if the email is unknown), drop leftovers, create.
        if not row.api_key:
            jwt = await session.token()
            for key in await self.client.list_keys(jwt):
                if key.name == self.definition.name:
                    await self.client.delete_key(jwt, key.id)
            created = await self.client.create_key(jwt, self.definition.name)
            row = row.but(api_key=created.key)
            await self.rows.write(row)
        # 3. No agent id: keep the oldest agent of the definition's name, or create one.
        if not row.agent_id or session.registered:
            jwt = await session.token()
            agents = await self.client.list_agents(jwt, self.definition.name)
            agents.sort(key=lambda a: str(a.get("createdAt") or a.get("created_at") or ""))
            if agents:
                keep = str(agents[0]["id"])
                for extra in agents[1:]:
                    await self.client.delete_agent(jwt, str(extra["id"]))
            else:
                keep = await self.client.create_agent(jwt, self.definition.agent_body())
                row = row.but(definition_version=self.definition.version, definition_model=self.definition.model)
            row = row.but(agent_id=keep)
            await self.rows.write(row)
        # 4. A stored definition older than this build's, or the same with another model.
        if should_write(row.definition_version, row.definition_model, self.definition):
            jwt = await session.token()
            await self.client.update_agent(jwt, row.agent_id, self.definition.agent_body())
            row = row.but(definition_version=self.definition.version, definition_model=self.definition.model)
            await self.rows.write(row)
        return row

    async def repair(self) -> None:
        """An answer found the key or agent gone: set up again (the next try repairs it)."""
        self.state.status = Status.STARTING
        self._ready.clear()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._loop())


def _kind(exc: BaseException) -> str:
    if isinstance(exc, NeedsOperator):
        return "needs_operator"
    if isinstance(exc, LibreChatError):
        if exc.kind:
            return exc.kind
        return "librechat_unavailable" if exc.status >= 500 else f"librechat_{exc.status}"
    return type(exc).__name__


def now() -> float:
    return time.time()

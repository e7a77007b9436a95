"""The parts one service instance holds (store, bus, leases, identity, ledger, gate) and the
gRPC server each plane runs. Two Runtimes in one process are two replicas: they share only
what they are handed (the store engine, in embedded mode and tests)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import grpc
from faststream.nats import NatsBroker
from google.protobuf.message import Message

from . import exposures as exposures_mod
from .bus import Bus, LeaseStore, connect_bus
from .catalog import Catalog, OpSpec, load_catalog
from .chain import CallContext, Ledger, NoopGate, OpChainInterceptor, PolicyGate, current_call
from .chain import ledger as ledger_mod
from .chain.interceptor import Context, MethodHandler
from .chain.ratelimit import RateLimiter
from .errors import ErrorCode, NotFound, Unavailable
from .grpc_errors import to_rpc_status
from .identity import Authenticator, TokenCodec
from .identity import store as identity_store
from .identity.pruning import RevocationPruner, revocation_horizon
from .identity.store import IdentityStore
from .relay_stream import RelayStreamServer
from .settings import Settings
from .store import Migration, Store, open_store, run_migrations

log = logging.getLogger(__name__)

Handler = Callable[[Any, CallContext], Awaitable[Message]]
CORE_MIGRATIONS: list[Migration] = [*identity_store.MIGRATIONS, *ledger_mod.MIGRATIONS, *exposures_mod.MIGRATIONS]


class Plane(Protocol):
    """What a plane package hands the runner: its ops' handlers, its tables, its consumers."""

    name: str
    migrations: Sequence[Migration]

    def handlers(self) -> dict[str, Handler]: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


@dataclass
class Runtime:
    settings: Settings
    store: Store
    bus: Bus
    leases: LeaseStore
    catalog: Catalog
    identity: IdentityStore
    codec: TokenCodec
    auth: Authenticator
    ledger: Ledger
    limiter: RateLimiter
    gate: PolicyGate = field(default_factory=NoopGate)
    pruner: RevocationPruner | None = None
    owns_store: bool = False

    @property
    def broker(self) -> NatsBroker:
        """The runtime's FastStream NATS broker (started and stopped with the runtime)."""
        return self.bus.broker

    @classmethod
    async def start(cls, settings: Settings, *, store: Store | None = None, nats_url: str | None = None, name: str = "loom") -> Runtime:
        owns = store is None
        store = store or await open_store(settings)
        await run_migrations(store, CORE_MIGRATIONS)
        # Under the NATS auth callout Loom's own connections are an `auth_users` entry.
        # The runtime's FastStream broker owns its one NATS connection (see bus.nats).
        bus = await connect_bus(
            nats_url or settings.nats_url,
            name=name,
            user=settings.nats_internal_user,
            password=settings.nats_internal_password,
            replicas=settings.nats_replicas,
            request_timeout=settings.nats_request_timeout_seconds,
            graceful_stop=settings.nats_graceful_stop_seconds,
        )
        leases = await _first_answer(lambda: LeaseStore.open(bus), settings.nats_startup_seconds)
        identity = IdentityStore(store)
        codec = TokenCodec(settings.jwt_secret, settings.jwt_secret_previous)
        auth = Authenticator(identity, codec, bus, settings.grant_cache_ttl_seconds)
        await auth.start()
        ledger = Ledger(store, bus, settings.ledger_flush_interval_seconds, settings.ledger_batch_max_rows)
        await ledger.start()
        pruner = RevocationPruner(
            identity,
            leases,
            auth,
            horizon_seconds=revocation_horizon(settings.token_max_ttl_seconds, settings.bootstrap_token_ttl_seconds),
            interval_seconds=settings.revocation_prune_interval_seconds,
        )
        await pruner.start()
        return cls(
            settings=settings,
            store=store,
            bus=bus,
            leases=leases,
            catalog=load_catalog(),
            identity=identity,
            codec=codec,
            auth=auth,
            ledger=ledger,
            limiter=RateLimiter(settings),
            pruner=pruner,
            owns_store=owns,
        )

    def interceptor(self) -> OpChainInterceptor:
        # The gate is read per call through this proxy, so a gate wired in after the servers
        # start (the policy plane's) still applies.
        return OpChainInterceptor(self.catalog, self.auth, self.limiter, _GateProxy(self), self.ledger)

    async def stop(self) -> None:
        if self.pruner is not None:
            await self.pruner.stop()
        await self.ledger.stop()
        await self.auth.stop()
        await self.bus.close()
        if self.owns_store:
            await self.store.close()


async def _first_answer(open_: Callable[[], Awaitable[LeaseStore]], within: float) -> LeaseStore:
    """The runtime's first JetStream request, asked again while JetStream does not answer, for up
    to `within` seconds: a replica started beside a NATS cluster that is still electing its
    leader (a fresh cluster, a rolling restart) waits for it instead of exiting."""
    deadline = time.monotonic() + within
    while True:
        try:
            return await open_()
        except Unavailable as exc:
            if time.monotonic() >= deadline:
                raise
            log.warning("%s; asking again", exc)
            await asyncio.sleep(0.5)


class _GateProxy:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    @property
    def enabled(self) -> bool:
        return self.runtime.gate.enabled

    def check(self, call: Any) -> Coroutine[Any, Any, None]:
        # The gate's own coroutine, which the chain awaits: no second coroutine per gated call.
        return self.runtime.gate.check(call)


# The largest request or response message on either transport (gRPC's server and the relay's
# channels are configured with it; the in-process transport checks it the same way).
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
# gRPC core features no Loom call uses, off on both ends of every plane call (each costs every
# call: ~5% of an empty unary call's CPU per side, bench/cluster.py's floor row): transparent
# retries (a caller retries by Loom's own rules, LoomError's `retry`) and channelz (no channelz
# service is served).
GRPC_LEAN_OPTIONS = (("grpc.enable_retries", 0), ("grpc.enable_channelz", 0))


class PlaneServer:
    """One plane's gRPC server: its handlers behind the shared interceptor chain. `invoke` runs
    the same chain in process, for a gateway in the same process (embedded mode)."""

    def __init__(self, runtime: Runtime, plane: str, handlers: dict[str, Handler]) -> None:
        self.runtime = runtime
        self.plane = plane
        self.handlers = handlers
        self.port = 0
        self.server: grpc.aio.Server | None = None
        self.chain = runtime.interceptor()
        self.chain.plane = plane  # another plane's method here is answered by _WrongPlane, unwrapped
        self.health: Any = None
        self.relay: RelayStreamServer | None = None
        self._direct: dict[str, Callable[[Message], Awaitable[Message]]] = {name: _direct(fn) for name, fn in handlers.items()}

    async def invoke(self, op: OpSpec, request: Message, metadata: Mapping[str, str]) -> Message:
        """The in-process transport: the op through this plane's chain, no gRPC. Raises the
        call's LoomError (the ledger row is written either way). Its caller, the relay, has
        checked the request's fields already (Catalog.parse_request)."""
        return await self.chain.call(op, self._direct[op.name], request, metadata, validated=True)

    def _generic_handlers(self) -> list[grpc.GenericRpcHandler]:
        ops = self.runtime.catalog.for_plane(self.plane)
        missing = [op.name for op in ops if op.name not in self.handlers]
        if missing:
            raise RuntimeError(f"plane {self.plane} has no handler for {missing}")
        by_service: dict[str, dict[str, MethodHandler]] = {}
        for op in ops:
            fn = self.handlers[op.name]
            by_service.setdefault(op.service, {})[op.method] = grpc.unary_unary_rpc_method_handler(
                _bind(fn),
                request_deserializer=op.request_cls.FromString,
                response_serializer=op.response_cls.SerializeToString,
            )
        return [grpc.method_handlers_generic_handler(svc, methods) for svc, methods in by_service.items()]

    def service_names(self) -> list[str]:
        return sorted({op.service for op in self.runtime.catalog.for_plane(self.plane)})

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        from grpc_health.v1 import health, health_pb2, health_pb2_grpc
        from grpc_reflection.v1alpha import reflection

        self.server = grpc.aio.server(
            interceptors=[self.chain],
            options=[("grpc.so_reuseport", 0), ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES), *GRPC_LEAN_OPTIONS],
        )
        self.server.add_generic_rpc_handlers(self._generic_handlers())
        # The gateway's multiplexed calls (cluster mode): the same ops through the same chain.
        ops = {op.name: op for op in self.runtime.catalog.for_plane(self.plane)}
        self.relay = RelayStreamServer(self.plane, ops, self.chain, self._direct, MAX_MESSAGE_BYTES)
        self.server.add_generic_rpc_handlers([self.relay.handler()])
        # The standard health service (grpc.health.v1), per plane: "" (the server), the plane's
        # name and its service names, so Kubernetes gRPC probes and grpc_health_probe work.
        self.health = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        # Server reflection: `grpcurl list` / `grpcurl describe` without the .proto files.
        services = self.service_names()
        reflection.enable_server_reflection([*services, health.SERVICE_NAME, reflection.SERVICE_NAME], self.server)
        # Last: a method no handler above serves gets Loom's error, naming the plane serving it.
        self.server.add_generic_rpc_handlers([_WrongPlane(self.runtime.catalog, self.plane)])
        self.port = self.server.add_insecure_port(f"{host}:{port}")
        await self.server.start()
        for name in ("", self.plane, *services):
            await self.health.set(name, health_pb2.HealthCheckResponse.SERVING)
        return self.port

    async def stop(self, grace: float = 1.0) -> None:
        if self.server is not None:
            if self.health is not None:
                await self.health.enter_graceful_shutdown()
            if self.relay is not None:
                self.relay.drain()
            await self.server.stop(grace)
            self.server = None


class _WrongPlane(grpc.GenericRpcHandler):
    """Any method this plane's server does not serve: UNKNOWN_OP in Loom's rich status, naming
    the plane that serves the op when another one does."""

    def __init__(self, catalog: Catalog, plane: str) -> None:
        self.catalog = catalog
        self.plane = plane

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler[bytes, bytes]:
        method = handler_call_details.method
        op = self.catalog.by_path.get(method)
        if op is not None:
            error = NotFound(
                ErrorCode.UNKNOWN_OP,
                f"{op.name} is served by the {op.plane} plane, not by {self.plane}: call the {op.plane} plane's address",
                {"op": op.name, "plane": op.plane, "method": method, "this_plane": self.plane},
            )
        else:
            error = NotFound(ErrorCode.UNKNOWN_OP, f"no op is served at {method}", {"method": method, "this_plane": self.plane})
        status = to_rpc_status(error)

        async def refuse(_request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
            await context.abort_with_status(status)
            return b""  # never reached: abort raises

        return grpc.unary_unary_rpc_method_handler(refuse)


def _direct(fn: Handler) -> Callable[[Message], Awaitable[Message]]:
    async def behavior(request: Message) -> Message:
        return await fn(request, current_call())

    return behavior


def _bind(fn: Handler) -> Callable[[Message, Context], Awaitable[Message]]:
    async def behavior(request: Message, _context: Context) -> Message:
        return await fn(request, current_call())

    return behavior

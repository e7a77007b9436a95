"""The identity plane (auth.*, namespace.*, grants.*, sa.*, token.*), served by the gateway's
process: composed from the runtime's identity store, authenticator and token codec."""

from __future__ import annotations

from collections.abc import Sequence

from loom_core.catalog import Catalog
from loom_core.plane import Handler, bind_handlers
from loom_core.runtime import Runtime
from loom_core.store import Migration

from .handlers import IdentityHandlers
from .service.access import AccessService
from .service.tokens import TokenLimits, TokenService


class IdentityPlane:
    name = "identity"
    migrations: Sequence[Migration] = ()  # core owns the identity tables (every plane's chain reads them)

    def __init__(self, catalog: Catalog, handlers: IdentityHandlers) -> None:
        self._catalog = catalog
        self._handlers = handlers

    def handlers(self) -> dict[str, Handler]:
        return bind_handlers(self._catalog, self.name, self._handlers)

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None


def build(runtime: Runtime) -> IdentityPlane:
    s = runtime.settings
    limits = TokenLimits(s.token_default_ttl_seconds, s.token_max_ttl_seconds, s.token_max_chain_depth)
    handlers = IdentityHandlers(
        AccessService(runtime.identity, runtime.auth),
        TokenService(runtime.identity, runtime.auth, runtime.codec, limits),
    )
    return IdentityPlane(runtime.catalog, handlers)

"""The identity plane (auth.*, namespace.*, grants.*, sa.*, token.*), served by the gateway's
process: composed from the runtime's identity store, authenticator and token codec."""

from __future__ import annotations

from loom_core.plane import HandlersPlane
from loom_core.runtime import Runtime

from .handlers import IdentityHandlers
from .service.access import AccessService
from .service.tokens import TokenLimits, TokenService


class IdentityPlane(HandlersPlane):
    name = "identity"  # no migrations: core owns the identity tables (every plane's chain reads them)


def build(runtime: Runtime) -> IdentityPlane:
    s = runtime.settings
    limits = TokenLimits(s.token_default_ttl_seconds, s.token_max_ttl_seconds, s.token_max_chain_depth)
    handlers = IdentityHandlers(
        AccessService(runtime.identity, runtime.auth),
        TokenService(runtime.identity, runtime.auth, runtime.codec, limits),
    )
    return IdentityPlane(runtime.catalog, handlers)

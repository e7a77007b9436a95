"""The gateway edge's settings (entry point `loom.settings`: gateway), read as
`settings.plane(GatewaySettings)`; rendered into docs/configuration.md by `loom config docs`.
The runner reads LOOM_GATEWAY_TRANSPORT when it builds the gateway in a plane's process."""

from __future__ import annotations

from typing import Literal

from loom_core.settings import PlaneSettings
from pydantic import Field


class GatewaySettings(PlaneSettings):
    gateway_transport: Literal["inproc", "grpc"] = Field(
        "inproc",
        description="How the gateway reaches planes running in its own process: inproc (the interceptor chain called in process) or grpc (loopback gRPC, as a cluster's gateway does).",
    )
    assistant_bridge_url: str = Field(
        "", description="Cluster mode: the assistant bridge's internal HTTP address the gateway relays chats to (embedded: in process)."
    )
    frontend_dir: str = Field(
        "", description="The built dashboard (index.html and assets/) the gateway serves at /. Empty: the repository's frontend/dist."
    )
    public_url: str = Field(
        "",
        description="The URL people open Loom at (e.g. https://example.com): sign-in links name it and a cookie request's Origin must match it. Empty: the request's own host.",
    )
    session_ttl_seconds: int = Field(
        7 * 86400, description="Longest a sign-in session (dashboard or `loom login`) lives; then sign in again."
    )
    session_token_ttl_seconds: int = Field(
        3600, description="Lifetime of the access token the server holds for a session (refreshed silently)."
    )
    login_link_ttl_seconds: int = Field(
        900, description="How long a sign-in link (`loom admin login-link`) or a `loom login` request stays usable."
    )

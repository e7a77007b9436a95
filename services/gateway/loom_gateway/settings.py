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

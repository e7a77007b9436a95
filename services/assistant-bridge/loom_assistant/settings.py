"""The assistant plane's settings (entry point `loom.settings`: assistant), read as
`settings.plane(AssistantSettings)`; rendered into docs/configuration.md by `loom config docs`."""

from __future__ import annotations

from loom_core.settings import PlaneSettings
from pydantic import Field


class AssistantSettings(PlaneSettings):
    assistant_librechat_url: str = Field(
        "",
        description="LibreChat's internal address (its URL on the network only Loom reaches). Empty: no assistant; assistant.ask answers ASSISTANT_UNAVAILABLE.",
    )
    assistant_model: str = Field("", description="Replaces the agent definition's model when Loom seeds it (empty: the definition's).")
    assistant_answer_ttl_s: int = Field(600, description="Longest one answer runs; its delegated token expires then.")
    assistant_budget_share: float = Field(0.5, description="Share of a namespace's daily model cost cap the assistant may spend.")
    default_daily_cost_cap_usd: float = Field(1.0, description="A namespace's daily model cost cap when it sets none (daily_cost_cap_usd).")
    assistant_concurrent_answers: int = Field(2, description="Answers one process runs at once per namespace.")
    assistant_answer_ceiling_usd: float = Field(
        0.10, description="Charged for an answer cut before its final chunk or on a model Loom has no rate for."
    )
    assistant_setup_retry_s: float = Field(
        5.0, description="Wait after a failed service-user setup; doubled after each next failure, up to 16 times."
    )
    assistant_service_email: str = Field("loom-assistant@loom.local", description="Email of LibreChat's service user Loom registers.")
    assistant_loom_url: str = Field(
        "", description="Cluster mode: the gateway URL the bridge checks help and task citations through (embedded: in process)."
    )
    assistant_upstream_timeout_s: float = Field(30.0, description="Longest the bridge waits for LibreChat to start answering.")
    assistant_bridge_listen: str = Field(
        "",
        description="Cluster mode: host:port the assistant plane's process serves the chat route on, for the gateway (LOOM_ASSISTANT_BRIDGE_URL).",
    )

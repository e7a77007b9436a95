"""The assistant bridge's HTTP paths, once: the gateway hands them to the bridge in process or
relays them to LOOM_ASSISTANT_BRIDGE_URL in a cluster, and the bridge serves them.

The first two are public routes of every gateway. The last two a cluster's gateway calls on the
bridge's own listener only (no gateway serves them): what its MCP door saw (a request of an
answer that came with no token, which the bridge counts toward `auth_off`) and the bridge's
health check, for the gateway's readiness."""

from __future__ import annotations

CHAT_PATH = "/v1/assistant/chat/completions"
MODELS_PATH = "/v1/assistant/models"
TOKENLESS_PATH = "/v1/assistant/observed/tokenless"
HEALTH_PATH = "/v1/assistant/health"

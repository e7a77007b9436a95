"""The assistant bridge's HTTP paths, once: the gateway hands them to the bridge in process or
relays them to LOOM_ASSISTANT_BRIDGE_URL in a cluster, and the bridge serves them.

The first two are public routes of every gateway. The last two a cluster's gateway calls on the
bridge's own listener only (no gateway serves them): what its MCP door saw (a request of an
answer that came with no token, which the bridge counts toward `auth_off`) and the bridge's
health check, for the gateway's readiness.

`not_configured()` is the refusal both answer a chat with where LOOM_ASSISTANT_LIBRECHAT_URL is
unset: the gateway with no bridge to relay to, the bridge with no LibreChat."""

from __future__ import annotations

from .errors import ErrorCode, Unavailable

CHAT_PATH = "/v1/assistant/chat/completions"
MODELS_PATH = "/v1/assistant/models"
TOKENLESS_PATH = "/v1/assistant/observed/tokenless"
HEALTH_PATH = "/v1/assistant/health"


def not_configured() -> Unavailable:
    """No assistant is configured; retrying cannot fix that, an operator sets the URL."""
    return Unavailable(
        ErrorCode.ASSISTANT_UNAVAILABLE,
        "no assistant is configured: set LOOM_ASSISTANT_LIBRECHAT_URL to LibreChat's internal address",
        {"reason": "not_configured", "setting": "LOOM_ASSISTANT_LIBRECHAT_URL"},
        retryable=False,
    )

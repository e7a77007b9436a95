"""The assistant plane's `loom doctor` checks (entry point `loom.doctor`: assistant): LibreChat
reachable, its API closed to a caller without a key, and its MCP requests carrying the answer's
token, where LOOM_ASSISTANT_LIBRECHAT_URL is set (unset, there is no assistant and each says not
applicable); and its tables.

LibreChat is reached only by Loom, and every answer's tool calls reach Loom's MCP door with the
answer's own token. A LibreChat whose agents API answers without a key lets whatever reaches it
run the agent outside Loom's bridge (no delegated token, no budget, no ledger), so that is a
fault; the reachability check reads `GET /health` (200 `OK`).

LibreChat's MCP configuration (the `Authorization` header it sends Loom's MCP door with each
answer's token) shows on no LibreChat API: only the bridge sees it, from answers whose tool
calls or tool listing reached Loom without the token (its `auth_off`). The doctor reads that
finding from the bridge of the serving process (`loom doctor` beside `loom up` runs inside it)
or, in a cluster, from the bridge's own listener (LOOM_ASSISTANT_BRIDGE_URL)."""

from __future__ import annotations

from typing import Any

import httpx
from loom_core import inproc
from loom_core.assistant_paths import HEALTH_PATH
from loom_core.doctor import Check, DoctorContext, fault, not_applicable, ok, schema_check, sealed_check, unchecked
from loom_core.settings import Settings, plane_settings_classes

from .local import NAME as LOCAL_NAME
from .settings import AssistantSettings
from .store.schema import MIGRATIONS
from .store.service_row import PURPOSE, ServiceRowStore, sealer

SEALED = "secrets.sealed.assistant_service"
REACHABLE = "librechat.reachable"
AUTH = "librechat.auth"
MCP_AUTH = "librechat.mcp_auth"
TIMEOUT_S = 5.0


async def librechat_checks(url: str) -> list[Check]:
    if not url:
        why = "LOOM_ASSISTANT_LIBRECHAT_URL is not set: no assistant is configured"
        return [not_applicable(REACHABLE, why), not_applicable(AUTH, why)]
    async with httpx.AsyncClient(base_url=url.rstrip("/"), timeout=TIMEOUT_S) as http:
        try:
            health = await http.get("/health")
        except httpx.HTTPError as exc:
            return [
                fault(
                    REACHABLE,
                    "librechat-unreachable",
                    f"LibreChat did not answer at LOOM_ASSISTANT_LIBRECHAT_URL ({type(exc).__name__})",
                    "start LibreChat (Compose: the assistant profile; Helm: assistant.enabled) or fix LOOM_ASSISTANT_LIBRECHAT_URL",
                ),
                unchecked(AUTH, "LibreChat did not answer"),
            ]
        if health.status_code != 200:
            return [
                fault(
                    REACHABLE,
                    "librechat-unreachable",
                    f"LibreChat's /health answered HTTP {health.status_code}",
                    "see LibreChat's log (its MongoDB must be up), then run `loom doctor` again",
                ),
                unchecked(AUTH, "LibreChat is not healthy"),
            ]
        try:
            keyless = await http.get("/api/agents/v1/models")
        except httpx.HTTPError as exc:
            return [ok(REACHABLE, "LibreChat answers /health"), unchecked(AUTH, f"LibreChat did not answer ({type(exc).__name__})")]
    reachable = ok(REACHABLE, "LibreChat answers /health")
    if keyless.status_code == 401:
        return [reachable, ok(AUTH, "LibreChat's agents API refuses a caller without a key")]
    return [
        reachable,
        fault(
            AUTH,
            "librechat-auth-off",
            f"LibreChat's agents API answered HTTP {keyless.status_code} to a caller without a key: whatever reaches it runs the agent outside Loom",
            "deploy LibreChat with deploy/librechat/assistant.librechat.yaml and its agents API keys on (interface.remoteAgents), then restart it",
        ),
    ]


def bridge_url(settings: Settings) -> str:
    """LOOM_ASSISTANT_BRIDGE_URL, the gateway's setting, read through the settings class that
    plane registers (no import of the plane); empty when none is installed."""
    cls = plane_settings_classes().get("gateway")
    if cls is None or "assistant_bridge_url" not in cls.model_fields:
        return ""
    return str(settings.plane(cls).model_dump()["assistant_bridge_url"])


async def _bridge_health(ctx: DoctorContext) -> dict[str, Any] | str:
    """The running bridge's health check, or why it could not be read."""
    plane: Any = inproc.find(LOCAL_NAME, ctx.bus) if ctx.bus is not None else None
    if plane is not None:
        reported: Any = await plane.health()
    else:
        url = bridge_url(ctx.settings)
        if not url:
            return "no assistant bridge runs in this process and LOOM_ASSISTANT_BRIDGE_URL is not set"
        try:
            async with httpx.AsyncClient(base_url=url.rstrip("/"), timeout=TIMEOUT_S) as http:
                r = await http.get(HEALTH_PATH)
            r.raise_for_status()
            reported = r.json()
        except (httpx.HTTPError, ValueError) as exc:
            return f"the bridge at LOOM_ASSISTANT_BRIDGE_URL did not answer ({type(exc).__name__})"
    check = reported.get(LOCAL_NAME) if isinstance(reported, dict) else None
    return check if isinstance(check, dict) else "the bridge reported no assistant check"


async def mcp_auth_check(ctx: DoctorContext) -> Check:
    """Whether answers' MCP requests reach Loom with the answer's token (LibreChat's MCP header)."""
    if not ctx.settings.plane(AssistantSettings).assistant_librechat_url:
        return not_applicable(MCP_AUTH, "LOOM_ASSISTANT_LIBRECHAT_URL is not set: no assistant is configured")
    check = await _bridge_health(ctx)
    if isinstance(check, str):
        return unchecked(
            MCP_AUTH, check, "run the doctor beside the running Loom (`loom up` answers it), or set LOOM_ASSISTANT_BRIDGE_URL in a cluster"
        )
    if check.get("reason") == "auth_off":
        return fault(
            MCP_AUTH,
            "librechat-mcp-auth-off",
            "answers' tool calls reach Loom's MCP door without the answer's token: LibreChat does not send the loom server's Authorization header",
            "give the loom MCP server in librechat.yaml the headers deploy/librechat/assistant.librechat.yaml sets"
            " (LibreChat v0.8.8 or later fills {{LIBRECHAT_BODY_PARENTMESSAGEID}}), restart LibreChat, then ask once and run `loom doctor` again",
        )
    if not check.get("ok"):
        return unchecked(MCP_AUTH, f"the assistant is {check.get('reason') or 'not ready'}: no answer shows the MCP path yet")
    return ok(MCP_AUTH, "no answer's tool calls have reached Loom without the answer's token")


async def sealed_row_check(ctx: DoctorContext) -> Check:
    """The service user's password and API key, sealed together in loom.assistant_service."""
    if ctx.store is None:
        return unchecked(SEALED, "the store did not answer")
    seal = sealer(ctx.settings.jwt_secret, ctx.settings.jwt_secret_previous)
    try:
        raw = await ServiceRowStore(ctx.store, seal).read_raw()
    except Exception as exc:  # noqa: BLE001 - the store's own errors carry no driver text
        return unchecked(SEALED, f"the service row could not be read ({type(exc).__name__})")
    blob = str(raw["sealed"]) if raw else None
    return sealed_check(SEALED, "assistant's sealed service row", blob, seal, PURPOSE.encode())


async def checks(ctx: DoctorContext) -> list[Check]:
    return [
        *await librechat_checks(ctx.settings.plane(AssistantSettings).assistant_librechat_url),
        await mcp_auth_check(ctx),
        await sealed_row_check(ctx),
        await schema_check(ctx, "assistant", MIGRATIONS),
    ]

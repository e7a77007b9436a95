"""The assistant plane's `loom doctor` checks (entry point `loom.doctor`: assistant): LibreChat
reachable, and its API closed to a caller without a key, where LOOM_ASSISTANT_LIBRECHAT_URL is
set (unset, there is no assistant and both say not applicable); and its tables.

LibreChat is reached only by Loom, and every answer's tool calls reach Loom's MCP door with the
answer's own token. A LibreChat whose agents API answers without a key lets whatever reaches it
run the agent outside Loom's bridge (no delegated token, no budget, no ledger), so that is a
fault; the reachability check reads `GET /health` (200 `OK`)."""

from __future__ import annotations

import httpx
from loom_core.doctor import Check, DoctorContext, fault, not_applicable, ok, schema_check, sealed_check, unchecked

from .settings import AssistantSettings
from .store.schema import MIGRATIONS
from .store.service_row import PURPOSE, ServiceRowStore, sealer

SEALED = "secrets.sealed.assistant_service"
REACHABLE = "librechat.reachable"
AUTH = "librechat.auth"
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
        await sealed_row_check(ctx),
        await schema_check(ctx, "assistant", MIGRATIONS),
    ]

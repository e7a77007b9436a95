"""The gateway's HTTP app: POST /v1/{op}, GET /v1/ops, /openapi.json, health, /metrics, /mcp."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from loom_core.catalog import Catalog
from loom_core.chain.context import HEADER_CLIENT, http_transport
from loom_core.errors import ErrorCode, LoomError, NotFound, ValidationFailed
from loom_core.plane import HealthCheck
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from .asyncapi import router as asyncapi_router
from .errors import error_response
from .fastpath import OpFastPath
from .limits import parse_json
from .mcp import PROTECTED_RESOURCE_PATH, LoomMCP, protected_resource_metadata, tool_name
from .relay import Relay
from .session_http import SessionCookies
from .session_http import register as register_sessions
from .sessions import SessionService
from .settings import GatewaySettings
from .web import register as register_web
from .web import web_frontend

log = logging.getLogger(__name__)

ReadyCheck = Callable[[], Awaitable[None]]
# A plane's `health()`: named checks {name: {"ok": bool, "reason": str, "required": bool}}; a
# check that does not apply to this deployment says {"applicable": False, "reason": str}.
PlaneHealth = Callable[[], Awaitable[dict[str, HealthCheck]]]


class GatewayApp(FastAPI):
    """The gateway's FastAPI app with its own ASGI layers in front (session cookies, then the op
    fast path): an HTTP request meets them first, and only what they pass on gets FastAPI's and
    Starlette's per-request handling (the telemetry check, the error middleware, routing). So
    `POST /v1/{op}` pays for none of it."""

    front: ASGIApp | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.front is None or scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        scope["app"] = self  # as Starlette sets it (request.app)
        await self.front(scope, receive, send)

    async def behind(self, scope: Scope, receive: Receive, send: Send) -> None:
        """What the front layers pass on: FastAPI as it serves any request."""
        await super().__call__(scope, receive, send)


def create_app(
    relay: Relay,
    ready_checks: dict[str, ReadyCheck],
    version: str = "0.1.0",
    plane_health: dict[str, PlaneHealth] | None = None,
    verify: Callable[[str | None], Any] | None = None,
    nats_url: str = "",
    sessions: SessionService | None = None,
    gateway: GatewaySettings | None = None,
) -> FastAPI:
    """`verify` checks a bearer token (the runtime's Authenticator.verify); with it, an MCP
    request without a valid token is answered 401 at the HTTP layer, as MCP clients expect.
    `nats_url`: the NATS server the AsyncAPI document names (the configured one; without it,
    localhost). `sessions`: the sign-in sessions (session_http.py), when this gateway holds the store."""
    gateway = gateway or GatewaySettings()
    mcp = LoomMCP(relay, version=version, verify=verify)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with mcp.run():
            yield

    app = GatewayApp(title="Loom", version=version, lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.relay = relay

    @app.exception_handler(LoomError)
    async def _loom_error(_: Request, exc: LoomError) -> Response:
        return error_response(exc)

    async def call_op(request: Request) -> Response:
        # Served ops are answered by OpFastPath before FastAPI; what reaches here is unknown.
        op = str(request.path_params["op"])
        relay.op(op)  # UNKNOWN_OP before reading the body
        result = await relay.call(op, parse_json(await request.body()), request.headers, http_transport(request.headers.get(HEADER_CLIENT)))
        return JSONResponse(result)

    # Before /v1/{op}: the assistant's chat route (services/gateway/loom_gateway/assistant_routes.py).
    from .assistant_routes import register as register_assistant

    relayed_bridge_health = register_assistant(app, relay, mcp)
    if relayed_bridge_health is not None:
        # The bridge the chat is relayed to answers the assistant check (over HTTP), as it
        # answers the chat: a configured bridge URL wins over a bridge in this process.
        plane_health = {**(plane_health or {}), "assistant": relayed_bridge_health}
    from .watch import register as register_watch  # GET /v1/task/watch (watch.py)

    register_watch(app, relay)
    register_sessions(app, sessions, gateway.public_url, gateway.session_ttl_seconds)

    # A plain Starlette route: every op call skips FastAPI's per-request dependency solving.
    app.add_route("/v1/{op}", call_op, methods=["POST"], include_in_schema=False)

    @app.get("/v1/ops", include_in_schema=False)
    async def list_ops(toolset: str | None = None) -> JSONResponse:
        # No toolset: every op this gateway serves, the experimental and unlisted ones marked so
        # (`experimental`, `unlisted`); ?toolset=: the same listing MCP shows for it (unknown: 400).
        if toolset is None:
            listed = list(relay.catalog.ops.values())
        else:
            relay.catalog.check_toolset(toolset)
            listed = relay.catalog.listed(toolset)
        ops = [{**op.describe(), "tool": tool_name(op.name)} for op in listed if op.plane in relay.addresses]
        return JSONResponse({"ops": ops})

    async def run_checks() -> tuple[bool, dict[str, HealthCheck]]:
        """Every check: the gateway's own (store, bus: required) and each plane's `health()`
        (its checks say whether they are required). Ready means every required check is ok."""
        checks: dict[str, HealthCheck] = {}
        ok = True
        for name, check in ready_checks.items():
            try:
                await check()
                checks[name] = {"ok": True, "required": True}
            except Exception as exc:  # noqa: BLE001 - reported, not raised
                ok = False
                reason = exc.code if isinstance(exc, LoomError) else "unavailable"
                checks[name] = {"ok": False, "reason": reason, "required": True}
        for plane_name, hook in (plane_health or {}).items():
            try:
                reported = await hook()
            except Exception:  # noqa: BLE001 - a plane whose hook fails is itself the finding
                log.warning("health: plane %s's health() failed", plane_name)
                reported = {plane_name: {"ok": False, "reason": "the plane's health check failed", "required": True}}
            for name, result in reported.items():
                if result.get("applicable") is False:
                    # A check that does not apply here (analysis on the embedded store): neither
                    # ok nor failing, and never required.
                    checks[name] = {"applicable": False, "required": False, "reason": str(result.get("reason", ""))}
                    continue
                entry = HealthCheck(ok=bool(result.get("ok")), required=bool(result.get("required", True)))
                if result.get("reason"):
                    entry["reason"] = str(result["reason"])
                if result.get("failure"):  # what an operator must do (assistant_service_failing)
                    entry["failure"] = str(result["failure"])
                checks[name] = entry
                if entry["required"] and not entry["ok"]:
                    ok = False
        return ok, checks

    @app.get("/v1/health", include_in_schema=False)
    async def health() -> JSONResponse:
        # Liveness: always 200 while the process answers; `degraded` when a required check is
        # not ok. An optional check that is not ok (analysis on the embedded store, say) is
        # shown with its reason but degrades nothing.
        ok, checks = await run_checks()
        return JSONResponse({"status": "ok" if ok else "degraded", "version": version, "checks": checks})

    @app.get("/v1/health/ready", include_in_schema=False)
    async def ready() -> JSONResponse:
        ok, checks = await run_checks()
        return JSONResponse({"status": "ready" if ok else "not_ready", "checks": checks}, status_code=200 if ok else 503)

    @app.get("/metrics", include_in_schema=False)
    async def metrics() -> Response:
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    @app.api_route("/v1/{op}", methods=["GET", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"], include_in_schema=False)
    async def wrong_method(op: str) -> Response:
        relay.op(op)
        return JSONResponse(
            {"error": {"code": ErrorCode.VALIDATION_FAILED.value, "message": "ops are called with POST", "retryable": False}},
            status_code=405,
            headers={"Allow": "POST"},
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, exc: StarletteHTTPException) -> Response:
        # Starlette's own refusals (no route, a method a route does not take) in Loom's body.
        if exc.status_code == 404:
            return error_response(NotFound(ErrorCode.RESOURCE_NOT_FOUND, "no such path", {"reason": "path"}))
        return JSONResponse(
            {"error": {"code": ErrorCode.VALIDATION_FAILED.value, "message": str(exc.detail), "retryable": False}},
            status_code=exc.status_code,
            headers=dict(exc.headers or {}),
        )

    @app.exception_handler(RequestValidationError)
    async def _request_invalid(_: Request, exc: RequestValidationError) -> Response:
        first = exc.errors()[0] if exc.errors() else {}
        field_name = ".".join(str(p) for p in first.get("loc", ())[1:]) or "(request)"
        return error_response(ValidationFailed(f"{field_name}: {first.get('msg', 'invalid')}", {"field": field_name, "reason": "invalid"}))

    @app.get(PROTECTED_RESOURCE_PATH, include_in_schema=False)
    @app.get("/.well-known/oauth-protected-resource", include_in_schema=False)
    async def resource_metadata(request: Request) -> JSONResponse:
        return JSONResponse(protected_resource_metadata(str(request.base_url)))

    # /mcp itself as a route (a Mount alone answers it with a 307 to /mcp/), /mcp/ by the mount.
    mcp_app = mcp.asgi_app()
    app.add_route("/mcp", mcp_app, include_in_schema=False)  # type: ignore[arg-type]  # an ASGI app serves as the endpoint
    app.mount("/mcp", mcp_app)

    def openapi() -> dict[str, Any]:
        return build_openapi(relay.catalog, relay.addresses, version)

    app.openapi = openapi  # type: ignore[method-assign]
    app.include_router(asyncapi_router(nats_url or "nats://localhost:4222"))  # GET /asyncapi.json
    register_web(app, web_frontend(gateway, version, relay.replica))  # last: the dashboard's pages
    # Outermost, ahead of FastAPI and Starlette (telemetry, error handling, routing): POST
    # /v1/{op} never reaches them. The fast path answers every LoomError itself.
    fast = OpFastPath(app.behind, relay)
    app.front = SessionCookies(fast, sessions, gateway.public_url) if sessions is not None else fast
    return app


def build_openapi(catalog: Catalog, planes: dict[str, str], version: str) -> dict[str, Any]:
    error_schema = {
        "type": "object",
        "properties": {
            "error": {
                "type": "object",
                "properties": {
                    "code": {"type": "string"},
                    "message": {"type": "string"},
                    "detail": {"type": "object"},
                    "retryable": {"type": "boolean"},
                },
                "required": ["code", "message"],
            }
        },
    }
    paths: dict[str, Any] = {}
    components: dict[str, Any] = {"Error": error_schema}
    for op in catalog.ops.values():
        if op.plane not in planes:
            continue
        # A grammar's `$defs` (the op schema's own, for /v1/ops and MCP) live in components here:
        # in an OpenAPI document `#/...` points into the document, not into the op's schema.
        input_schema = {k: v for k, v in op.input_schema.items() if k != "$defs"}
        if "$defs" in op.input_schema:
            input_schema = _to_components(input_schema)
            components.update({name: _to_components(d) for name, d in op.input_schema["$defs"].items()})
        paths[f"/v1/{op.name}"] = {
            "post": {
                "operationId": op.name.replace(".", "_"),
                "summary": op.summary,
                "tags": [op.group],
                "x-loom-min-role": op.min_role.label,
                "x-loom-write-shaped": op.write_shaped,
                # An op with required arguments needs a body; the others take none or `{}`.
                "requestBody": {
                    "required": bool(op.input_schema.get("required") or op.input_schema.get("allOf")),
                    "content": {"application/json": {"schema": input_schema}},
                },
                "responses": {
                    "200": {"description": "OK", "content": {"application/json": {"schema": op.output_schema}}},
                    **{
                        str(s): {"description": d, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
                        for s, d in (
                            (400, "Bad request"),
                            (401, "Unauthenticated"),
                            (403, "Forbidden"),
                            (404, "Not found"),
                            (409, "Conflict"),
                            (422, "Invalid arguments"),
                            (423, "Locked"),
                            (429, "Rate limited"),
                            (503, "Unavailable"),
                        )
                    },
                },
                "security": [{"bearer": []}],
            }
        }
    return {
        "openapi": "3.1.0",
        "info": {"title": "Loom", "version": version},
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}},
        },
    }


def _to_components(schema: Any) -> Any:
    """A schema with its `#/$defs/X` references pointing at `#/components/schemas/X`."""
    if isinstance(schema, dict):
        return {
            k: (v.replace("#/$defs/", "#/components/schemas/", 1) if k == "$ref" and isinstance(v, str) else _to_components(v))
            for k, v in schema.items()
        }
    if isinstance(schema, list):
        return [_to_components(v) for v in schema]
    return schema


__all__ = ["NotFound", "create_app", "error_response"]

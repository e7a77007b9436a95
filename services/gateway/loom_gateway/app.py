"""The gateway's HTTP app: POST /v1/{op}, GET /v1/ops, /openapi.json, health, /metrics, /mcp."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from loom_core.catalog import Catalog
from loom_core.errors import LoomError, NotFound, ValidationFailed
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from .asyncapi import router as asyncapi_router
from .relay import Relay

log = logging.getLogger(__name__)

ReadyCheck = Callable[[], Awaitable[None]]


def error_response(err: LoomError) -> JSONResponse:
    headers = {}
    if err.code == "RATE_LIMITED" and err.detail and "retry_after_s" in err.detail:
        headers["Retry-After"] = str(max(1, int(float(err.detail["retry_after_s"]) + 0.999)))
    return JSONResponse({"error": err.to_payload()}, status_code=err.http_status, headers=headers)


def transport_of(request: Request) -> str:
    return "sdk" if request.headers.get("x-loom-client", "").startswith("sdk") else "rest"


def create_app(relay: Relay, ready_checks: dict[str, ReadyCheck], version: str = "0.1.0") -> FastAPI:
    from .mcp import LoomMCP

    mcp = LoomMCP(relay, version=version)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with mcp.run():
            yield

    app = FastAPI(title="Loom", version=version, lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.relay = relay

    @app.exception_handler(LoomError)
    async def _loom_error(_: Request, exc: LoomError) -> JSONResponse:
        return error_response(exc)

    async def call_op(request: Request) -> Response:
        op = str(request.path_params["op"])
        relay.op(op)  # UNKNOWN_OP before reading the body
        raw = await request.body()
        try:
            args: Any = json.loads(raw) if raw.strip() else {}
        except ValueError:
            raise ValidationFailed("the body is not valid JSON", {"field": "(body)", "reason": "invalid JSON"}) from None
        result = await relay.call(op, args, request.headers, transport_of(request))
        return JSONResponse(result)

    # A plain Starlette route: every op call skips FastAPI's per-request dependency solving.
    app.add_route("/v1/{op}", call_op, methods=["POST"], include_in_schema=False)

    @app.get("/v1/ops", include_in_schema=False)
    async def list_ops(toolset: str | None = None) -> JSONResponse:
        ops = [op.describe() for op in relay.catalog.listed(toolset) if op.plane in relay.addresses]
        return JSONResponse({"ops": ops})

    @app.get("/v1/health", include_in_schema=False)
    async def health() -> JSONResponse:
        return JSONResponse({"status": "ok", "version": version})

    @app.get("/v1/health/ready", include_in_schema=False)
    async def ready() -> JSONResponse:
        checks: dict[str, dict[str, Any]] = {}
        ok = True
        for name, check in ready_checks.items():
            try:
                await check()
                checks[name] = {"ok": True}
            except Exception as exc:  # noqa: BLE001 - reported, not raised
                ok = False
                reason = exc.code if isinstance(exc, LoomError) else "unavailable"
                checks[name] = {"ok": False, "reason": reason}
        return JSONResponse({"status": "ready" if ok else "not_ready", "checks": checks}, status_code=200 if ok else 503)

    @app.get("/metrics", include_in_schema=False)
    async def metrics() -> Response:
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    @app.api_route("/v1/{op}", methods=["GET", "PUT", "DELETE", "PATCH"], include_in_schema=False)
    async def wrong_method(op: str) -> Response:
        relay.op(op)
        return JSONResponse(
            {"error": {"code": "VALIDATION_FAILED", "message": "ops are called with POST", "retryable": False}},
            status_code=405,
        )

    # /mcp itself as a route (a Mount alone answers it with a 307 to /mcp/), /mcp/ by the mount.
    mcp_app = mcp.asgi_app()
    app.add_route("/mcp", mcp_app, include_in_schema=False)
    app.mount("/mcp", mcp_app)

    def openapi() -> dict[str, Any]:
        return build_openapi(relay.catalog, relay.addresses, version)

    app.openapi = openapi  # type: ignore[method-assign]
    app.include_router(asyncapi_router)  # GET /asyncapi.json, /asyncapi
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
    for op in catalog.ops.values():
        if op.plane not in planes:
            continue
        paths[f"/v1/{op.name}"] = {
            "post": {
                "operationId": op.name.replace(".", "_"),
                "summary": op.summary,
                "tags": [op.group],
                "x-loom-min-role": op.min_role.label,
                "x-loom-write-shaped": op.write_shaped,
                "requestBody": {"required": False, "content": {"application/json": {"schema": op.input_schema}}},
                "responses": {
                    "200": {"description": "OK", "content": {"application/json": {"schema": {"type": "object"}}}},
                    **{
                        str(s): {"description": d, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
                        for s, d in (
                            (401, "Unauthenticated"),
                            (403, "Forbidden"),
                            (404, "Not found"),
                            (409, "Conflict"),
                            (422, "Invalid arguments"),
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
            "schemas": {"Error": error_schema},
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}},
        },
    }


__all__ = ["NotFound", "create_app", "error_response"]

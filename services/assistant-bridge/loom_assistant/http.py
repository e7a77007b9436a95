"""The bridge's chat endpoint as an ASGI app: the gateway's POST /v1/assistant/chat/completions
is handed to it (in process, or over HTTP in a cluster). Streaming or not, OpenAI-compatible."""

from __future__ import annotations

import json
from functools import partial
from typing import Any

import anyio
from loom_core.errors import LoomError, ValidationFailed
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from .service.bridge import Bridge, labels_of

CHAT_PATH = "/v1/assistant/chat/completions"


class EventStream(StreamingResponse):
    """An SSE response that stops as soon as the client disconnects, whatever ASGI version the
    server speaks (under 2.4 a write to a closed connection is dropped silently, so the answer
    would run on): the stop closes the upstream request, and LibreChat aborts the run."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async with anyio.create_task_group() as tg:

            async def until_done(func: Any) -> None:
                await func()
                tg.cancel_scope.cancel()

            tg.start_soon(until_done, partial(self.stream_response, send))
            await until_done(partial(self.listen_for_disconnect, receive))


def _error(err: LoomError) -> JSONResponse:
    headers = {}
    if err.detail and "retry_after_s" in err.detail:
        headers["Retry-After"] = str(max(1, int(float(err.detail["retry_after_s"]))))
    return JSONResponse({"error": err.to_payload()}, status_code=err.http_status, headers=headers)


def _bearer(value: str | None) -> str | None:
    if not value:
        return None
    scheme, _, token = value.partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def chat_app(bridge: Bridge) -> Starlette:
    async def chat(request: Request) -> Response:
        headers = {k.lower(): v for k, v in request.headers.items()}
        transport = "sdk" if headers.get("x-loom-client", "").startswith("sdk") else "rest"
        try:
            adm = await bridge.admit(
                _bearer(headers.get("authorization")),
                headers.get("x-loom-namespace", ""),
                transport=transport,
                labels=labels_of(headers),
                ledgered=True,
            )
        except LoomError as err:
            return _error(err)
        try:
            raw = await request.body()
            try:
                body: Any = json.loads(raw) if raw.strip() else {}
            except ValueError:
                raise ValidationFailed("the body is not valid JSON", {"field": "(body)"}) from None
            if not isinstance(body, dict):
                raise ValidationFailed("the body must be a JSON object", {"field": "(body)"})
            messages = body.get("messages")
            if body.get("stream"):
                events = await bridge.stream(adm, messages)
                return EventStream(events, media_type="text/event-stream", headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
            out = await bridge.whole(adm, messages)
            bridge.record_answer(adm, run_id=str(adm.extra.get("run_id", "")), cost=float(adm.extra.get("cost", 0.0)), ok=True)
            return JSONResponse(out)
        except LoomError as err:
            bridge.release(adm)
            bridge.record_answer(adm, run_id="", cost=0.0, ok=False, error_code=str(err.code))
            return _error(err)

    return Starlette(routes=[Route(CHAT_PATH, chat, methods=["POST"])])

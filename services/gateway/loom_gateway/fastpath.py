"""`POST /v1/{op}` as raw ASGI, ahead of FastAPI's routing and middleware: the one hot path
of the gateway. Everything else (GET /v1/ops, health, MCP, OpenAPI, errors for other methods
and paths) stays with the FastAPI app behind it."""

from __future__ import annotations

import json
import logging
from typing import Any

import orjson
from loom_core.errors import ErrorCode, LoomError, ValidationFailed
from loom_core.runtime import MAX_MESSAGE_BYTES
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .relay import Relay

log = logging.getLogger(__name__)

PREFIX = "/v1/"


def parse_body(raw: bytes) -> Any:
    """The request body as JSON: no body at all means no arguments; anything else must parse
    (a whitespace-only body does not: refused, not taken for `{}`), and what does not, nesting
    past what the parser takes included, is the caller's 422, never a 5xx."""
    if not raw:
        return {}
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        raise ValidationFailed("the body is not valid JSON", {"field": "(body)", "reason": "invalid JSON"}) from None


def encode(body: Any) -> bytes:
    """Compact UTF-8 JSON, as Starlette's JSONResponse writes it but by orjson (a fifth of the
    cost; a float's exponent is written `1e16` where the standard library writes `1e+16`, the
    same number). What orjson refuses (an integer past 64 bits, nesting past 254 levels) is
    written by the standard library, as before."""
    try:
        return orjson.dumps(body)
    except TypeError:
        return json.dumps(body, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")).encode()


def error_body(err: LoomError) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    headers = [(b"content-type", b"application/json")]
    if err.code == ErrorCode.RATE_LIMITED and err.detail and "retry_after_s" in err.detail:
        headers.append((b"retry-after", str(max(1, int(float(err.detail["retry_after_s"]) + 0.999))).encode()))
    return err.http_status, headers, encode({"error": err.to_payload()})


class OpFastPath:
    """ASGI middleware: a POST to a served op's URL is answered here; anything else passes on."""

    def __init__(self, app: ASGIApp, relay: Relay) -> None:
        self.app = app
        self.relay = relay

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or not scope["path"].startswith(PREFIX):
            await self.app(scope, receive, send)
            return
        name = scope["path"][len(PREFIX) :]
        op = self.relay.catalog.get(name)
        if op is None or op.plane not in self.relay.addresses:
            await self.app(scope, receive, send)  # UNKNOWN_OP, /v1/ops, health... answered behind
            return
        headers: dict[str, str] = {}
        for k, v in scope["headers"]:
            try:
                headers[k.decode("latin-1").lower()] = v.decode("latin-1")
            except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes every byte
                continue
        try:
            raw = await _read_body(receive)
            args = parse_body(raw)
            transport = "sdk" if headers.get("x-loom-client", "").startswith("sdk") else "rest"
            status, out_headers, body = (
                200,
                [(b"content-type", b"application/json")],
                encode(await self.relay.call(name, args, headers, transport)),
            )
        except LoomError as err:
            status, out_headers, body = error_body(err)
        out_headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": status, "headers": out_headers})
        await send({"type": "http.response.body", "body": body})


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message: Message = await receive()
        if message["type"] == "http.disconnect":
            raise ValidationFailed("the client went away", {"field": "(body)", "reason": "disconnected"})
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_MESSAGE_BYTES:
            raise ValidationFailed("the request is too large", {"field": "(body)", "reason": "too large", "max_bytes": MAX_MESSAGE_BYTES})
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)

"""The gateway's outermost ASGI layer. Every request with a body meets the input limits here
(limits.py: size, media type, read time, what its JSON may hold), whichever route it is for;
and `POST /v1/{op}`, the one hot path, is answered here, ahead of FastAPI's routing and
middleware. Everything else (GET /v1/ops, health, MCP, the chat route, OpenAPI, errors for
other methods and paths) stays with the FastAPI app behind it, which is handed the body read
here."""

from __future__ import annotations

import json
import logging
from typing import Any

import orjson
from loom_core.chain.context import FORWARDED_HEADERS, HEADER_CLIENT, http_transport
from loom_core.errors import LoomError, http_error
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .limits import METHODS_WITH_BODY, check_headers, parse_json, read_body
from .mcp import is_mcp_path, jsonrpc_error
from .relay import Relay

log = logging.getLogger(__name__)

PREFIX = "/v1/"
# What a call reads from its request's headers: the forwarded ones (Relay.metadata) and the client's name.
_CALL_HEADERS = {h.encode("latin-1"): h for h in (*FORWARDED_HEADERS, HEADER_CLIENT)}


def encode(body: Any) -> bytes:
    """Compact UTF-8 JSON, as Starlette's JSONResponse writes it but by orjson (a fifth of the
    cost; a float's exponent is written `1e16` where the standard library writes `1e+16`, the
    same number). What orjson refuses (an integer past 64 bits, nesting past 254 levels) is
    written by the standard library, as before."""
    try:
        return orjson.dumps(body)
    except TypeError:
        return json.dumps(body, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")).encode()


class OpFastPath:
    """ASGI middleware: the input limits for every request with a body; a POST to a served op's
    URL answered here; anything else passed on."""

    def __init__(self, app: ASGIApp, relay: Relay) -> None:
        self.app = app
        self.relay = relay

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in METHODS_WITH_BODY:
            await self.app(scope, receive, send)
            return
        name = scope["path"][len(PREFIX) :] if scope["path"].startswith(PREFIX) else ""
        op = self.relay.catalog.get(name) if name and scope["method"] == "POST" else None
        if op is not None and op.plane not in self.relay.addresses:
            op = None  # UNKNOWN_OP, answered behind
        headers: dict[str, str] = {}
        if op is not None:
            # Only the headers the call reads; an ASGI server hands their names lower-cased.
            for k, v in scope["headers"]:
                header = _CALL_HEADERS.get(k)
                if header is not None:
                    headers[header] = v.decode("latin-1")
        transport = http_transport(headers.get(HEADER_CLIENT))
        # An unknown op's URL: the app behind answers UNKNOWN_OP before it looks at the body.
        unknown_op = op is None and bool(name) and "/" not in name
        try:
            check_headers(scope["headers"])
            raw = await read_body(receive)
            args = None if unknown_op else parse_json(raw)
        except LoomError as err:
            if op is not None:
                self.relay.refused(op, err, headers, transport)
            if is_mcp_path(scope["path"]):
                await _answer(send, err.http_status, [(b"content-type", b"application/json")], encode(jsonrpc_error(err)))
            else:
                await _answer(send, *http_error(err))
            return
        if op is None:
            await self.app(scope, _replay(raw, receive), send)
            return
        try:
            status, out_headers, body = (
                200,
                [(b"content-type", b"application/json")],
                encode(await self.relay.call(name, args, headers, transport)),
            )
        except LoomError as err:
            status, out_headers, body = http_error(err)
        await _answer(send, status, out_headers, body)


async def _answer(send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    headers.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _replay(body: bytes, receive: Receive) -> Receive:
    """The body already read, as the app behind reads it; after it, the client's own messages
    (a disconnect, which a streaming answer listens for)."""
    sent = False

    async def again() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again

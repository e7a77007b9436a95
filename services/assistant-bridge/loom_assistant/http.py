"""The bridge's HTTP endpoint, which the gateway hands POST /v1/assistant/chat/completions and
GET /v1/assistant/models (in process, or over HTTP in a cluster). OpenAI-compatible, streaming
or not.

One door: a chat is one call through the same interceptor chain as every op (token, role,
its own rate class `chat`, the history-policy gate, one ledger row, the same error body and
Retry-After), as op assistant.ask, the operation both surfaces record their spend under. The
body is checked first, by the rules every HTTP door's body meets (loom_core.json_limits: media
type, size, depth, NaN, NUL) under the chat's own size cap, so a hostile body is refused before
the token is read, a slot is held or LibreChat is called.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Any

import anyio
from google.protobuf.message import Message
from loom_api.assistant.v1 import assistant_pb2 as pb
from loom_core import json_limits
from loom_core.assistant_paths import CHAT_PATH, HEALTH_PATH, MODELS_PATH, TOKENLESS_PATH
from loom_core.catalog import Catalog, OpSpec
from loom_core.chain import OpChainInterceptor, current_call
from loom_core.chain.context import HEADER_CLIENT, LABEL_KEYS, MD_AUTHORIZATION, MD_TRANSPORT, bearer_token, http_transport
from loom_core.errors import ErrorCode, LoomError, NotFound, Unauthenticated, ValidationFailed, http_error
from loom_core.names import is_label
from loom_core.plane import HealthCheck
from starlette.responses import JSONResponse, StreamingResponse
from starlette.types import Message as AsgiMessage
from starlette.types import Receive, Scope, Send

from .domain import history as history_rules
from .service.bridge import ANSWER_OP, Bridge

# A chat is not `heavy` like assistant.ask: its own class, limited apart.
CHAT_RATE_CLASS = "chat"
# The chat's own cap, under the gateway's: fifty turns and a question of 20,000 characters
# each, escaped, fit well inside.
MAX_BODY_BYTES = 4 * 1024 * 1024


def chat_op(catalog: Catalog) -> OpSpec:
    """The chat route as the chain sees it: assistant.ask's rules under the `chat` rate class."""
    op = catalog.get(ANSWER_OP)
    if op is None:  # pragma: no cover - the assistant plane's own proto defines it
        raise RuntimeError(f"the catalog has no {ANSWER_OP}")
    return dataclasses.replace(op, rate_class=CHAT_RATE_CLASS)


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


class _Started:
    """`send`, noting whether the response has begun (after which a refusal cannot be sent)."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self.started = False

    async def __call__(self, message: AsgiMessage) -> None:
        if message["type"] == "http.response.start":
            self.started = True
        await self._send(message)


async def _render(err: LoomError, send: Send) -> None:
    status, headers, body = http_error(err)
    await send({"type": "http.response.start", "status": status, "headers": [*headers, (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


async def _read_chat(headers: Mapping[str, str], receive: Receive) -> dict[str, Any]:
    """The chat's body as a JSON object, or its refusal (read no further than the cap)."""
    json_limits.check_media_type(headers.get("content-type", "").encode("latin-1"))
    body = json_limits.parse_json(await json_limits.read_body(receive, MAX_BODY_BYTES))
    if not isinstance(body, dict):
        raise ValidationFailed("the body must be a JSON object", {"field": "(body)", "reason": "not_an_object"})
    try:
        history_rules.clean_messages(body.get("messages") or [], None)
    except history_rules.HistoryError as exc:
        raise ValidationFailed(str(exc), {"field": exc.field, "reason": exc.reason}) from None
    return body


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}


def _metadata(headers: Mapping[str, str]) -> dict[str, str]:
    """The chain's metadata from the request's headers; the transport is the door's to say."""
    md = {k: headers[k] for k in (MD_AUTHORIZATION, *LABEL_KEYS) if k in headers and k != MD_TRANSPORT}
    md[MD_TRANSPORT] = http_transport(headers.get(HEADER_CLIENT))
    return md


# {"run_id": "<a LibreChat message id>"} and nothing more.
MAX_NOTICE_BYTES = 1024


async def _send_json(send: Send, value: Any) -> None:
    body = json.dumps(value, separators=(",", ":")).encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})


class ChatEndpoint:
    """The ASGI app for the gateway's two paths (a class instance, so a route hands it the raw
    ASGI call), and on the bridge's own listener in a cluster the two its gateway calls: what
    the gateway's MCP door saw, and the health check."""

    def __init__(
        self, bridge: Bridge, chain: OpChainInterceptor, op: OpSpec, health: Callable[[], Awaitable[dict[str, HealthCheck]]]
    ) -> None:
        self.bridge = bridge
        self.chain = chain
        self.op = op
        self.health = health

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path, method = scope.get("path", ""), scope.get("method", "")
        if path == CHAT_PATH and method == "POST":
            await self._chat(scope, receive, send)
        elif path == MODELS_PATH and method == "GET":
            await self._models(scope, send)
        elif path == TOKENLESS_PATH and method == "POST":
            await self._tokenless(receive, send)
        elif path == HEALTH_PATH and method == "GET":
            await _send_json(send, await self.health())
        else:
            await _render(NotFound(ErrorCode.RESOURCE_NOT_FOUND, "no such path", {"reason": "path"}), send)

    async def _tokenless(self, receive: Receive, send: Send) -> None:
        """The gateway's MCP door saw a request of answer `run_id` with no token. Anyone could
        send the MCP door such a request, so it takes no token here either: it counts only
        toward an answer in flight under that run id (Bridge.observe_tokenless)."""
        try:
            notice = json_limits.parse_json(await json_limits.read_body(receive, MAX_NOTICE_BYTES))
            run_id = notice.get("run_id") if isinstance(notice, dict) else None
            if not isinstance(run_id, str) or not is_label(run_id):
                raise ValidationFailed('the body is {"run_id": <an answer\'s run id>}', {"field": "run_id", "reason": "invalid"})
        except LoomError as err:
            await _render(err, send)
            return
        self.bridge.observe_tokenless(run_id)
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def _models(self, scope: Scope, send: Send) -> None:
        try:
            token = bearer_token(_headers(scope).get(MD_AUTHORIZATION))
            if token is None:
                raise Unauthenticated(ErrorCode.AUTH_REQUIRED, "a bearer token is required")
            self.bridge.auth.verify(token)
            models = self.bridge.models()
        except LoomError as err:
            await _render(err, send)
            return
        await _send_json(send, models)

    async def _chat(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = _Started(send)
        headers = _headers(scope)
        try:
            body = await _read_chat(headers, receive)
            answer = partial(self._answer, body, scope, receive, started)
            await self.chain.call(self.op, answer, pb.AskRequest(), _metadata(headers), validated=True)
        except LoomError as err:
            # Once the stream has begun, its own error event has told the client.
            if not started.started:
                await _render(err, send)

    async def _answer(self, body: dict[str, Any], scope: Scope, receive: Receive, send: Send, _request: Message) -> Message:
        """The handler behind the chain: admit, answer, respond. Returns once the response is
        sent, with the spend kept for the chain's row; raises the answer's error for that row."""
        adm = await self.bridge.admit(current_call())
        messages = body.get("messages")
        if body.get("stream"):
            events = await self.bridge.stream(adm, messages)
            try:
                await EventStream(events, media_type="text/event-stream", headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})(
                    scope, receive, send
                )
            finally:
                # A disconnect leaves the relay suspended (or never started): its cleanup (close
                # the upstream, charge, free the slot) runs now, before the chain writes the row.
                await events.aclose()
            if adm.error is not None:
                raise adm.error
        else:
            out = await self.bridge.whole(adm, messages)
            await JSONResponse(out)(scope, receive, send)
        return pb.AskResponse(run_id=adm.run_id, support="")

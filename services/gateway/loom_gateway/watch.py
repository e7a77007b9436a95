"""GET /v1/task/watch: one task's or one inbox's events as server-sent events (spec 003).

The stream is a loop of `task.watch` calls through the relay (so every look passes the planes'
chain: token, role, org, ledger), each a long poll of up to `heartbeat_seconds`:

    id: <seq>                      the event's cursor; a reconnect sends it as Last-Event-ID
    data: {...the task event...}

and, when a look finds nothing, a comment line (`: heartbeat`) so proxies keep the connection
open. Resume: `Last-Event-ID` (or `since_seq`) is the cursor to read after; with neither,
`start=now` skips the events already on the stream (a page that has just read the lists wants
what happens next, not the inbox's history). The opening frame names the cursor the stream
starts from (`id:` alone, no event), so a browser that reconnects before any event arrives
resumes from there rather than from the beginning. The first look is
made before the response starts, so a refusal (401, 403, 404, 422) is an ordinary JSON error
with its status; a later one (a token revoked or expired meanwhile) is sent as `event: error`
with the error body, and the stream ends. When the client goes, the look in flight is cancelled
(its wait on the replica's event tail withdrawn) and nothing more is read.

Query: `task_id` or `inbox` (exactly one), `since_seq`, `start` (`now`), `heartbeat_seconds`
(1..30, default 15), `namespace`; headers as for any op (Authorization, X-Loom-Org,
X-Loom-Agent, ...). A browser's `EventSource` sends the sign-in cookie instead
(session_http.SessionCookies turns it into the session's token).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI
from loom_core.errors import LoomError, invalid_field
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from .relay import Relay

WATCH_PATH = "/v1/task/watch"
OP = "task.watch"
HEARTBEAT_SECONDS = 15
MAX_HEARTBEAT_SECONDS = 30  # task.watch's longest wait
SKIP_LIMIT = 1000  # task.watch's largest page: skipping the backlog takes the fewest looks


def _int(value: str | None, field: str, default: int, low: int, high: int | None = None) -> int:
    if value is None or value == "":
        return default
    try:
        n = int(value)
    except ValueError:
        raise invalid_field(field, "must be an integer") from None
    if n < low or (high is not None and n > high):
        raise invalid_field(field, f"between {low} and {high}" if high is not None else f"{low} or more")
    return n


def frame(event: dict[str, Any]) -> bytes:
    return f"id: {int(event.get('seq') or 0)}\ndata: {json.dumps(event, separators=(',', ':'))}\n\n".encode()


def error_frame(err: LoomError) -> bytes:
    return f"event: error\ndata: {json.dumps({'error': err.to_payload()}, separators=(',', ':'))}\n\n".encode()


def register(app: FastAPI, relay: Relay) -> None:
    async def watch(request: Request) -> Response:
        q = request.query_params
        args: dict[str, Any] = {k: q[k] for k in ("task_id", "inbox", "namespace") if q.get(k)}
        # A reconnecting EventSource names the last event it handled; it wins over the query's.
        resume = request.headers.get("last-event-id") or q.get("since_seq")
        cursor = _int(resume, "since_seq", 0, 0)
        start = q.get("start", "")
        if start not in ("", "now"):
            raise invalid_field("start", "`now` or absent")
        beat = _int(q.get("heartbeat_seconds"), "heartbeat_seconds", HEARTBEAT_SECONDS, 1, MAX_HEARTBEAT_SECONDS)
        headers = dict(request.headers)

        async def look(since: int, wait: int, limit: int = 0) -> tuple[list[dict[str, Any]], int]:
            page = {"limit": limit} if limit else {}
            out = await relay.call(OP, {**args, "since_seq": since, "wait_seconds": wait, **page}, headers, "rest")
            return list(out.get("events") or []), int(out.get("next_seq") or since)

        if start == "now" and not resume:
            first, cursor = await look(cursor, 0, SKIP_LIMIT)  # a refusal answers here, as JSON with its status
            while first:
                first, cursor = await look(cursor, 0, SKIP_LIMIT)
        else:
            first, cursor = await look(cursor, 0)  # a refusal answers here, as JSON with its status

        async def stream(cursor: int) -> AsyncIterator[bytes]:
            yield f"retry: {beat * 1000}\nid: {cursor}\n\n".encode()
            for event in first:
                yield frame(event)
            while True:
                try:
                    events, cursor = await look(cursor, beat)
                except LoomError as err:
                    yield error_frame(err)
                    return
                for event in events:
                    yield frame(event)
                if not events:
                    yield b": heartbeat\n\n"

        return StreamingResponse(
            stream(cursor),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    app.add_route(WATCH_PATH, watch, methods=["GET"], include_in_schema=False)

"""uvicorn servers run as tasks inside Loom's own loop (signals stay with the runner), with the
connection limits a slow or idle client meets: a request's headers must arrive within
HEADER_READ_SECONDS of its first byte (or of the connection's opening), its body within
BODY_READ_SECONDS of its headers, and an idle keep-alive connection closes after
KEEP_ALIVE_SECONDS."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Generator
from typing import Any

import uvicorn
from loom_core.errors import ErrorCode, LoomError
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield  # the runner owns SIGINT/SIGTERM


# Longest a stop waits for requests still in flight (a long poll, a stream, a client that never
# finishes its body) before cancelling them; uvicorn's default is to wait for ever.
SHUTDOWN_GRACE_SECONDS = 3.0
# How long an idle keep-alive connection stays open. Longer than any client's or proxy's idle
# expiry (httpx 5 s, cloud load balancers 60 s), so the client always closes first: with equal
# timeouts (uvicorn's default is httpx's 5 s) a request sent as the server closes fails mid-read.
KEEP_ALIVE_SECONDS = 75
# How long a client may take to send a request's headers, then its body. uvicorn has no such
# limits: a client sending one header byte a minute (slowloris), or a body that never ends, held
# its connection (and, for the body, its request) for ever.
HEADER_READ_SECONDS = 10.0
BODY_READ_SECONDS = 30.0


def _timeout_answer(what: str, within: float) -> bytes:
    error = LoomError(
        ErrorCode.REQUEST_TIMEOUT,
        f"the request {what} did not arrive within {within:g} s",
        {"field": f"({what})", "reason": "too slow", "timeout_seconds": within},
    )
    body = json.dumps({"error": error.to_payload()}).encode()
    head = b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
    return head + b"content-length: %d\r\n\r\n" % len(body) + body


def read_timed_protocol(header_seconds: float, body_seconds: float) -> type[HttpToolsProtocol]:
    """uvicorn's httptools protocol with read timeouts: one timer per request, armed for the
    headers when a connection opens and when a request's first byte arrives, re-armed for the
    body when the headers are complete, disarmed when the whole request is in (for a small
    request, within the same read). On expiry the client gets a 408 in Loom's error body and the
    connection closes (a request waiting on its body sees a disconnect). Idle time between
    requests is the keep-alive limit's, not this one's."""
    headers_late = _timeout_answer("headers", header_seconds)
    body_late = _timeout_answer("body", body_seconds)

    class ReadTimedProtocol(HttpToolsProtocol):
        _read_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm(header_seconds, headers_late)

        def on_message_begin(self) -> None:
            super().on_message_begin()
            if self._read_timer is None:
                self._arm(header_seconds, headers_late)

        def on_headers_complete(self) -> None:
            self._disarm()
            self._arm(body_seconds, body_late)
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            self._disarm()
            super().on_message_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self, within: float, answer: bytes) -> None:
            self._read_timer = self.loop.call_later(within, self._too_slow, answer)

        def _disarm(self) -> None:
            if self._read_timer is not None:
                self._read_timer.cancel()
                self._read_timer = None

        def _too_slow(self, answer: bytes) -> None:
            self._read_timer = None
            if not self.transport.is_closing():
                self.transport.write(answer)
                self.transport.close()

    return ReadTimedProtocol


class ListenFailed(Exception):
    """The server could not start serving (its port in use, an address not on this host); uvicorn
    has logged why."""


class HttpServer:
    def __init__(
        self,
        app: Any,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        uds: str | None = None,
        shutdown_grace: float = SHUTDOWN_GRACE_SECONDS,
        header_read_seconds: float = HEADER_READ_SECONDS,
        body_read_seconds: float = BODY_READ_SECONDS,
    ) -> None:
        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            uds=uds,
            log_level="warning",
            lifespan="on",
            access_log=False,
            loop="none",
            timeout_keep_alive=KEEP_ALIVE_SECONDS,
            http=read_timed_protocol(header_read_seconds, body_read_seconds),
            timeout_graceful_shutdown=shutdown_grace,  # type: ignore[arg-type]  # uvicorn takes fractions of a second too
        )
        self.server = _Server(config)
        self.where = uds or f"{host}:{port}"
        self.task: asyncio.Task[None] | None = None

    async def _serve(self) -> None:
        try:
            await self.server.serve()
        except SystemExit:
            # uvicorn's sys.exit on a failed start: raised in a task, it would leave the event
            # loop at once, past every cleanup of the process (a `loom up` then hung or crashed).
            raise ListenFailed(f"could not serve HTTP on {self.where}") from None

    async def start(self) -> None:
        """Serve; raises ListenFailed when the server cannot start."""
        self.task = asyncio.create_task(self._serve())
        while not self.server.started:
            if self.task.done():
                self.task.result()
                raise RuntimeError("the HTTP server stopped while starting")
            await asyncio.sleep(0.01)

    @property
    def port(self) -> int:
        for server in self.server.servers:
            for sock in server.sockets:
                addr = sock.getsockname()
                if isinstance(addr, tuple):
                    return int(addr[1])
        return 0

    async def stop(self) -> None:
        self.server.should_exit = True
        if self.task is not None:
            with contextlib.suppress(asyncio.CancelledError, ListenFailed):  # a failed start was raised by `start`
                await self.task

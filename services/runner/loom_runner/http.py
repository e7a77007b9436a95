"""uvicorn servers run as tasks inside Loom's own loop (signals stay with the runner)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Generator
from typing import Any

import uvicorn


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


class HttpServer:
    def __init__(
        self, app: Any, *, host: str = "127.0.0.1", port: int = 0, uds: str | None = None, shutdown_grace: float = SHUTDOWN_GRACE_SECONDS
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
            timeout_graceful_shutdown=shutdown_grace,  # type: ignore[arg-type]  # uvicorn takes fractions of a second too
        )
        self.server = _Server(config)
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.task = asyncio.create_task(self.server.serve())
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
            with contextlib.suppress(asyncio.CancelledError):
                await self.task

"""loom_runner/http.py's HttpServer on a port it cannot take: the start raises ListenFailed in the
caller's loop (uvicorn's own sys.exit, raised in the server's task, left the event loop at once,
past every cleanup), and a stop after it returns."""

from __future__ import annotations

import socket

import pytest
from fastapi import FastAPI
from loom_runner.http import HttpServer, ListenFailed


async def test_a_port_in_use_fails_the_start_with_listen_failed_and_the_loop_goes_on() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = HttpServer(FastAPI(), port=port)
        with pytest.raises(ListenFailed, match=f"could not serve HTTP on 127.0.0.1:{port}"):
            await server.start()
        await server.stop()  # the failed start is not raised again
    # The loop is still this test's: a server on a free port starts and stops in it.
    free = HttpServer(FastAPI())
    await free.start()
    assert free.port > 0
    await free.stop()

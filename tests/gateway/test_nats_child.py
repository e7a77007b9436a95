"""Embedded mode's nats-server child under supervision (loom_runner.embedded.NatsChild): a dead
child fails its health check (so /v1/health says degraded) until it is started again on the same
port and store, with JetStream's streams recovered."""

from __future__ import annotations

import signal
from pathlib import Path

import httpx
import nats
from loom_core.bus import NatsServer
from loom_gateway.app import create_app
from loom_gateway.relay import Relay
from loom_runner.embedded import Instance, NatsChild


async def test_dead_nats_child_turns_health_degraded_until_restarted_with_its_streams(tmp_path: Path, stack: Instance) -> None:
    srv = NatsServer(tmp_path / "nats")
    srv.start()
    child = NatsChild(srv)
    app = create_app(Relay(stack.runtime.catalog, {}), {"nats_server": child.check})
    try:
        nc = await nats.connect(srv.url)
        await nc.jetstream().add_stream(name="KEEP", subjects=["keep.>"])
        await nc.jetstream().publish("keep.one", b"1")
        await nc.close()
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://loom") as http:
            assert (await http.get("/v1/health")).json()["status"] == "ok"
            assert srv.proc is not None
            srv.proc.send_signal(signal.SIGKILL)
            srv.proc.wait()
            down = (await http.get("/v1/health")).json()
            ready = await http.get("/v1/health/ready")
            assert await child.restart()
            up = (await http.get("/v1/health")).json()
        assert down["status"] == "degraded" and down["checks"]["nats_server"] == {
            "ok": False,
            "reason": "BACKEND_UNAVAILABLE",
            "required": True,
        }
        assert ready.status_code == 503
        assert up["status"] == "ok" and child.restarts == 1
        nc = await nats.connect(srv.url)
        info = await nc.jetstream().stream_info("KEEP")
        await nc.close()
        assert info.state.messages == 1  # JetStream recovered its store
    finally:
        srv.stop()

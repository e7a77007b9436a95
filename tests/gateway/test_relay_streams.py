"""The relay's streams to a plane in another process (loom_gateway.streams, the plane's end in
loom_core.relay_stream): many calls at once on one stream, a slow call beside quick ones, and a
plane that goes away mid-stream and comes back. (tests/gateway/test_transports.py compares
answers, refusals, ledger rows and deadlines with the unary and in-process transports.)"""

from __future__ import annotations

import asyncio

import pytest
from loom_core.errors import LoomError
from loom_core.runtime import PlaneServer
from loom_gateway.relay import Relay
from loom_runner.embedded import Instance

from tests.conftest import Tenant


async def test_many_calls_at_once_share_one_stream_each_answered_its_own(stack: Instance, tenant: Tenant) -> None:
    relay = Relay(stack.runtime.catalog, stack.addresses, streams=1)
    try:
        answers = await asyncio.gather(
            *(
                relay.call("auth.whoami", {}, {"authorization": f"Bearer {tenant.token}", "x-loom-agent": f"a{i}"}, "rest")
                for i in range(200)
            )
        )
        assert [a["agent"] for a in answers] == [f"a{i}" for i in range(200)]
    finally:
        await relay.close()


async def test_a_slow_call_does_not_hold_up_the_stream(stack: Instance, tenant: Tenant) -> None:
    headers = {"authorization": f"Bearer {tenant.token}", "x-loom-namespace": tenant.namespace, "x-loom-agent": "stream-box"}
    relay = Relay(stack.runtime.catalog, stack.addresses, streams=1)
    try:
        await relay.call("inbox.register", {"inbox": "stream-box"}, headers, "rest")
        poll = asyncio.ensure_future(relay.call("task.pull", {"inbox": "stream-box", "wait_seconds": 20}, headers, "rest"))
        await asyncio.sleep(0.1)
        for _ in range(5):
            assert (await relay.call("auth.whoami", {}, headers, "rest"))["agent"] == "stream-box"
        assert not poll.done()
        poll.cancel()
        with pytest.raises(asyncio.CancelledError):
            await poll
        # The stream outlives a call its caller gave up on.
        assert (await relay.call("auth.whoami", {}, headers, "rest"))["agent"] == "stream-box"
    finally:
        await relay.close()


async def test_a_plane_gone_mid_stream_answers_503_then_its_return_is_reached(stack: Instance, tenant: Tenant) -> None:
    headers = {"authorization": f"Bearer {tenant.token}", "x-loom-namespace": tenant.namespace, "x-loom-agent": "gone-box"}
    handlers = stack.servers["tasks"].handlers
    plane = PlaneServer(stack.runtime, "tasks", handlers)
    port = await plane.start()
    relay = Relay(stack.runtime.catalog, {**stack.addresses, "tasks": f"127.0.0.1:{port}"}, streams=1)

    async def restarted() -> PlaneServer:
        again = PlaneServer(stack.runtime, "tasks", handlers)
        await again.start(port=port)
        for _ in range(200):  # the channel reconnects with gRPC's backoff (about a second first)
            try:
                assert await relay.call("task.pull", {"inbox": "gone-box"}, headers, "rest") is not None
                return again
            except LoomError as error:
                assert error.code == "BACKEND_UNAVAILABLE"
                await asyncio.sleep(0.1)
        raise AssertionError("the plane's return was never reached")

    try:
        await relay.call("inbox.register", {"inbox": "gone-box"}, headers, "rest")
        # A plane shutting down ends its idle streams at once rather than spend its grace on them.
        await asyncio.wait_for(plane.stop(grace=600), 60)
        with pytest.raises(LoomError) as caught:
            await relay.call("task.pull", {"inbox": "gone-box"}, headers, "rest")
        assert caught.value.code == "BACKEND_UNAVAILABLE" and caught.value.http_status == 503
        plane = await restarted()

        # Gone with a call in flight: the call answers 503, and the plane is reached once back.
        poll = asyncio.ensure_future(relay.call("task.pull", {"inbox": "gone-box", "wait_seconds": 20}, headers, "rest"))
        await asyncio.sleep(0.2)
        await plane.stop(grace=0)
        with pytest.raises(LoomError) as caught:
            await poll
        assert caught.value.code == "BACKEND_UNAVAILABLE" and caught.value.http_status == 503
        plane = await restarted()
    finally:
        await relay.close()
        await plane.stop(grace=0)

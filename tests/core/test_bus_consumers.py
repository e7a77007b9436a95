"""The runtime's FastStream broker: consumers declared once, each with its one ack policy."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from faststream.nats.message import NatsMessage
from loom_core.bus import AckPolicy, Bus, BusLayout, Consumer, KVBucket
from nats.js.api import StreamConfig


def _name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def test_a_core_consumer_declares_no_ack_and_a_stream_consumer_must() -> None:
    with pytest.raises(ValueError, match="nothing to ack"):
        Consumer("x", "loom.x", ack=AckPolicy.ACK)
    with pytest.raises(ValueError, match="declares its ack policy"):
        Consumer("x", "loom.x", ack=None, stream="X")
    with pytest.raises(ValueError, match="declared twice"):
        BusLayout(consumers=(Consumer("x", "a", ack=None), Consumer("x", "b", ack=None)))


async def test_a_core_consumer_gets_every_message_until_stopped(bus: Bus) -> None:
    subject = f"loom.test.{uuid.uuid4().hex}"
    got: list[bytes] = []
    three = asyncio.Event()

    async def on(msg: NatsMessage) -> None:
        got.append(msg.body)
        if len(got) == 3:
            three.set()

    consuming = await bus.consume(Consumer("test-core", subject, ack=None), on)
    for i in range(3):
        await bus.nc.publish(subject, str(i).encode())
    await asyncio.wait_for(three.wait(), 10)
    await consuming.stop()
    assert got == [b"0", b"1", b"2"]


async def test_a_durable_consumer_with_nack_on_error_gets_a_failed_message_again(bus: Bus) -> None:
    stream, subject = _name("LOOM_TEST"), f"loom.test.{uuid.uuid4().hex}"
    layout = BusLayout(
        streams=(StreamConfig(name=stream, subjects=[subject]),),
        buckets=(KVBucket(_name("loom_test_kv"), ttl=60),),
        consumers=(
            Consumer(
                "test-durable",
                subject,
                stream=stream,
                durable=_name("d"),
                ack=AckPolicy.NACK_ON_ERROR,
                pull_batch=10,
                pull_timeout_seconds=0.5,
            ),
        ),
    )
    buckets = await layout.declare(bus)
    assert len(buckets) == 1
    deliveries: list[tuple[bytes, int]] = []
    done = asyncio.Event()

    async def on(msg: NatsMessage) -> None:
        attempt = msg.raw_message.metadata.num_delivered
        deliveries.append((msg.body, attempt))
        if msg.body == b"fails-once" and attempt == 1:
            raise RuntimeError("first delivery fails")
        if msg.body == b"fails-once":
            done.set()

    consuming = await bus.consume(layout.consumer("test-durable"), on)
    await bus.js.publish(subject, b"fails-once")
    await asyncio.wait_for(done.wait(), 20)
    await consuming.stop()
    assert deliveries == [(b"fails-once", 1), (b"fails-once", 2)]
    await bus.js.delete_stream(stream)

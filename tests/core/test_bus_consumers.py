"""The runtime's FastStream broker: consumers declared once, each with its one ack policy."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import uuid

import pytest
from faststream.nats.message import NatsBatchMessage, NatsMessage
from loom_core.bus import AckPolicy, Bus, BusLayout, Consumer, KVBucket, NatsServer, connect_bus
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


async def test_the_bus_repr_holds_no_credentials(bus: Bus) -> None:
    """`Bus.quiet()` keeps the runtime connection's credentials to open its second connection; a
    repr of the bus (a failing test's report, a log line printing the runtime) never shows them."""
    with_secret = dataclasses.replace(bus, connect_options={**bus.connect_options, "user": "loom-internal", "password": "s3cret-pw"})
    assert "s3cret-pw" not in repr(with_secret)
    assert "loom-internal" not in repr(with_secret)


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


async def test_a_listener_gets_each_message_with_its_subject_past_a_failure_until_stopped(bus: Bus) -> None:
    prefix = f"loom.test.{uuid.uuid4().hex}"
    got: list[tuple[str, bytes]] = []
    three = asyncio.Event()

    def on(subject: str, data: bytes) -> None:
        got.append((subject, data))
        if data == b"bad":
            raise ValueError("a handler that fails on one message")
        if len(got) == 3:
            three.set()

    listening = await bus.listen(Consumer("test-listener", f"{prefix}.>", ack=None), on)
    for i, data in enumerate((b"0", b"bad", b"2")):
        await bus.nc.publish(f"{prefix}.{i}", data)
    await asyncio.wait_for(three.wait(), 10)
    await listening.stop()
    await bus.nc.publish(f"{prefix}.3", b"after the stop")
    await bus.nc.flush()
    assert got == [(f"{prefix}.0", b"0"), (f"{prefix}.1", b"bad"), (f"{prefix}.2", b"2")]
    with pytest.raises(ValueError, match="not a stream"):
        await bus.listen(Consumer("test-stream", "loom.x", ack=AckPolicy.ACK, stream="X"), on)


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


def test_a_batch_consumer_is_a_pull_consumer() -> None:
    with pytest.raises(ValueError, match="batch consumer is a pull consumer"):
        Consumer("x", "loom.x", ack=AckPolicy.ACK, stream="X", durable="x", batch=True)


async def _batch_stream(bus: Bus, *, fetch_wait: float, ack: AckPolicy = AckPolicy.NACK_ON_ERROR) -> tuple[str, str, Consumer]:
    stream, subject = _name("LOOM_TEST"), f"loom.test.{uuid.uuid4().hex}"
    await bus.ensure_stream(StreamConfig(name=stream, subjects=[subject]))
    durable = _name("d")
    consumer = Consumer(
        "test-batch", subject, stream=stream, durable=durable, ack=ack, pull_batch=100, pull_timeout_seconds=fetch_wait, batch=True
    )
    return stream, subject, consumer


async def test_a_batch_consumer_hands_a_lone_message_over_at_once_not_after_its_fetch_timeout(bus: Bus) -> None:
    """FastStream's own batch loop waits for a full batch or its timeout (here 60 s); the prompt
    loop hands a lone message over as soon as it is stored, and acks it after the handler."""
    stream, subject, consumer = await _batch_stream(bus, fetch_wait=60.0)
    got: asyncio.Queue[list[bytes]] = asyncio.Queue()

    async def on(batch: NatsBatchMessage) -> None:
        await got.put([m.data for m in batch.raw_message])

    consuming = await bus.consume(consumer, on)
    try:
        await bus.js.publish(subject, b"lone")
        assert await asyncio.wait_for(got.get(), 10) == [b"lone"]
        await bus.js.publish(subject, b"second")
        assert await asyncio.wait_for(got.get(), 10) == [b"second"]
        info = await bus.js.consumer_info(stream, consumer.durable or "")
        while info.num_ack_pending:  # the ack follows the handler's return
            await asyncio.sleep(0.01)
            info = await bus.js.consumer_info(stream, consumer.durable or "")
        assert info.ack_floor.stream_seq == 2
    finally:
        await consuming.stop()
        await bus.js.delete_stream(stream)


async def test_a_batch_consumer_hands_what_is_ready_over_in_one_call_in_stream_order(bus: Bus) -> None:
    stream, subject, consumer = await _batch_stream(bus, fetch_wait=60.0)
    for i in range(250):
        await bus.js.publish(subject, str(i).encode())
    calls: list[list[bytes]] = []
    all_in = asyncio.Event()

    async def on(batch: NatsBatchMessage) -> None:
        calls.append([m.data for m in batch.raw_message])
        if sum(len(c) for c in calls) == 250:
            all_in.set()

    consuming = await bus.consume(consumer, on)
    try:
        await asyncio.wait_for(all_in.wait(), 10)
        assert [len(c) for c in calls] == [100, 100, 50]  # pull_batch at most, everything ready at once
        assert [b for c in calls for b in c] == [str(i).encode() for i in range(250)]
    finally:
        await consuming.stop()
        await bus.js.delete_stream(stream)


async def test_a_batch_whose_handler_raises_comes_back_in_order_and_is_acked_after_it_succeeds(bus: Bus) -> None:
    stream, subject, consumer = await _batch_stream(bus, fetch_wait=60.0)
    for i in range(3):
        await bus.js.publish(subject, str(i).encode())
    calls: list[list[tuple[bytes, int]]] = []
    done = asyncio.Event()

    async def on(batch: NatsBatchMessage) -> None:
        calls.append([(m.data, m.metadata.num_delivered) for m in batch.raw_message])
        if len(calls) == 1:
            raise RuntimeError("the first attempt fails")
        if sum(len(c) for c in calls[1:]) >= 3:
            done.set()

    consuming = await bus.consume(consumer, on)
    try:
        await asyncio.wait_for(done.wait(), 20)
        assert calls[0] == [(b"0", 1), (b"1", 1), (b"2", 1)]
        # Handed back together, but the server applies naks apart from pull requests: on a busy
        # machine the next fetch may take the first redelivery before the others are back.
        # What holds is the order, and each message once more.
        assert [m for c in calls[1:] for m in c] == [(b"0", 2), (b"1", 2), (b"2", 2)]
        info = await bus.js.consumer_info(stream, consumer.durable or "")
        while info.num_ack_pending:
            await asyncio.sleep(0.01)
            info = await bus.js.consumer_info(stream, consumer.durable or "")
        assert info.ack_floor.stream_seq == 3 and info.num_redelivered == 0
    finally:
        await consuming.stop()
        await bus.js.delete_stream(stream)


async def test_an_idle_batch_consumer_waits_on_one_lingering_pull_request_per_timeout(bus: Bus) -> None:
    """No fetch storm while idle: between two lingering pull requests (each expiring after the
    consumer's timeout) there is at most one `no_wait` request asking for what is ready."""
    stream, _subject, consumer = await _batch_stream(bus, fetch_wait=0.3)
    requests: list[dict[str, object]] = []
    four_lingering = asyncio.Event()

    async def seen(msg: NatsMessage) -> None:
        import json

        requests.append(json.loads(msg.body))
        if sum(1 for r in requests if "expires" in r) >= 4:
            four_lingering.set()

    watch = await bus.consume(Consumer("test-pull-requests", f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer.durable}", ack=None), seen)

    async def on(batch: NatsBatchMessage) -> None:
        raise AssertionError("nothing was published")

    consuming = await bus.consume(consumer, on)
    try:
        await asyncio.wait_for(four_lingering.wait(), 20)
    finally:
        await consuming.stop()
        await watch.stop()
        await bus.js.delete_stream(stream)
    kinds = ["wait" if "expires" in r else "ready" for r in requests]
    assert all(not (a == "ready" and b == "ready") for a, b in itertools.pairwise(kinds)), kinds
    assert all(r["batch"] == 1 and 0.2e9 < int(str(r["expires"])) <= 0.3e9 for r in requests if "expires" in r)


async def _ack_pending(bus: Bus, stream: str, durable: str, want: int, *, at_least: bool = False) -> None:
    while True:
        have = (await bus.js.consumer_info(stream, durable)).num_ack_pending
        if have == want or (at_least and have >= want):
            return
        await asyncio.sleep(0.01)


async def test_what_is_ready_is_taken_while_the_handler_applies_a_fetch_and_handed_over_after_it(bus: Bus) -> None:
    stream, subject, consumer = await _batch_stream(bus, fetch_wait=60.0)
    durable = consumer.durable or ""
    for i in range(150):
        await bus.js.publish(subject, str(i).encode())
    calls: list[list[bytes]] = []
    release, all_in = asyncio.Event(), asyncio.Event()

    async def on(batch: NatsBatchMessage) -> None:
        calls.append([m.data for m in batch.raw_message])
        if len(calls) == 1:
            await release.wait()
        if sum(len(c) for c in calls) == 150:
            all_in.set()

    consuming = await bus.consume(consumer, on)
    try:
        # all 150 delivered while the first fetch (pull_batch 100) is still being applied
        await asyncio.wait_for(_ack_pending(bus, stream, durable, 150), 10)
        assert len(calls) == 1
        release.set()
        await asyncio.wait_for(all_in.wait(), 10)
        assert [len(c) for c in calls] == [100, 50]
        assert [b for c in calls for b in c] == [str(i).encode() for i in range(150)]
        await asyncio.wait_for(_ack_pending(bus, stream, durable, 0), 10)
    finally:
        await consuming.stop()
        await bus.js.delete_stream(stream)


async def test_a_fetch_whose_handler_raises_comes_back_before_the_one_taken_ahead(bus: Bus) -> None:
    stream, subject, consumer = await _batch_stream(bus, fetch_wait=60.0)
    for i in range(150):
        await bus.js.publish(subject, str(i).encode())
    calls: list[list[bytes]] = []
    all_in = asyncio.Event()

    async def on(batch: NatsBatchMessage) -> None:
        calls.append([m.data for m in batch.raw_message])
        if len(calls) == 1:
            await asyncio.sleep(0.2)  # the fetch ahead is taken meanwhile
            raise RuntimeError("the first attempt fails")
        if sum(len(c) for c in calls[1:]) == 150:
            all_in.set()

    consuming = await bus.consume(consumer, on)
    try:
        await asyncio.wait_for(all_in.wait(), 20)
        assert [b for c in calls[1:] for b in c] == [str(i).encode() for i in range(150)]
    finally:
        await consuming.stop()
        await bus.js.delete_stream(stream)


async def test_a_fetch_made_ahead_is_handed_back_when_the_consumer_stops(nats_server: NatsServer) -> None:
    """The consumer's ack wait is 30 s: the fetch ahead's message is another holder's at once.
    The handler never ends, so the stop cuts it off after the bus's graceful stop (0.5 s here)."""
    bus = await connect_bus(nats_server.url, name="core-test-short-stop", graceful_stop=0.5)
    stream, subject, consumer = await _batch_stream(bus, fetch_wait=60.0)
    durable = consumer.durable or ""
    consumer = dataclasses.replace(consumer, pull_batch=1)  # one message a fetch: the second is taken ahead
    await bus.js.publish(subject, b"first")
    await bus.js.publish(subject, b"ahead")
    calls: list[list[bytes]] = []

    async def on(batch: NatsBatchMessage) -> None:
        calls.append([m.data for m in batch.raw_message])
        await asyncio.Event().wait()  # applied for ever: the stop cuts it off (unacked)

    consuming = await bus.consume(consumer, on)
    try:
        await asyncio.wait_for(_ack_pending(bus, stream, durable, 2), 10)
        await consuming.stop()
        assert calls == [[b"first"]]  # the fetch ahead never reached the handler
        # handed back (nak): the next holder gets it now, not after the 30 s ack wait ("first",
        # cut off mid-apply and never acked, comes back only then)
        psub = await bus.js.pull_subscribe_bind(durable, stream=stream)
        (msg,) = await psub.fetch(1, timeout=5)
        assert (msg.data, msg.metadata.num_delivered) == (b"ahead", 2)
        await msg.ack()
    finally:
        await bus.js.delete_stream(stream)
        await bus.close()

"""The ledger's two writers: in embedded mode batches go straight into the store; otherwise
(a ClickHouse server shared by replicas) each batch is published to JetStream and inserted by
the `ledger-writer` FastStream consumer, once, whichever replica fetches it."""

from __future__ import annotations

import asyncio
import uuid

from loom_core.bus import NatsServer, connect_bus
from loom_core.chain.ledger import DURABLE, STREAM, Ledger, ledger_row
from loom_runner.embedded import Instance


def row(org: str, i: int) -> dict[str, object]:
    return ledger_row(
        org=org, namespace="ns", subject="user:a", agent="a", user="", session="", op="auth.whoami", transport="rest",
        run_id="", consumer="", ok=True, error_code="", latency_ms=1.0, args={"i": str(i)}, out_hits=1, token_id="t",
        request_id=f"{org}-{i}", write_shaped=False,
    )  # fmt: skip


async def count(stack: Instance, org: str, want: int) -> int:
    n = 0
    for _ in range(200):
        rows = await stack.runtime.store.query("SELECT count() AS n FROM {db}.agent_events WHERE org = {o:String}", {"o": org})
        n = int(rows[0]["n"])
        if n >= want:
            break
        await asyncio.sleep(0.05)
    return n


async def test_embedded_ledger_inserts_batches_straight_into_the_store(stack: Instance) -> None:
    assert stack.runtime.ledger.direct is True
    org = f"led-{uuid.uuid4().hex[:8]}"
    for i in range(5):
        stack.runtime.ledger.record(row(org, i))
    await stack.runtime.ledger.flush()
    assert await count(stack, org, 5) == 5


async def test_published_batches_are_written_once_by_the_faststream_consumer_of_two_replicas(
    stack: Instance, nats_server: NatsServer
) -> None:
    org = f"led-{uuid.uuid4().hex[:8]}"
    buses = [await connect_bus(nats_server.url, name=f"ledger-{i}") for i in range(2)]
    ledgers = [Ledger(stack.runtime.store, bus, flush_interval=3600, batch_max=10**6, direct=False) for bus in buses]
    try:
        for ledger in ledgers:
            await ledger.start()
        for i in range(10):
            ledgers[i % 2].record(row(org, i))
        for ledger in ledgers:
            await ledger.flush()  # two published batches, each fetched by one replica's consumer
        assert await count(stack, org, 10) == 10
        # Every batch acknowledged (nothing pending or waiting redelivery), and still 10 rows.
        for _ in range(200):
            info = await buses[0].js.consumer_info(STREAM, DURABLE)
            if info.num_ack_pending == 0 and info.num_pending == 0:
                break
            await asyncio.sleep(0.05)
        assert info.num_ack_pending == 0 and info.num_pending == 0
        assert await count(stack, org, 10) == 10
    finally:
        for ledger in ledgers:
            await ledger.stop()
        for bus in buses:
            await bus.close()

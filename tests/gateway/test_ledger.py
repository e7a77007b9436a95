"""The ledger's two writers: in embedded mode batches go straight into the store; otherwise
(a ClickHouse server shared by replicas) each batch is published to JetStream and inserted by
the `ledger-writer` FastStream consumer, once, whichever replica fetches it."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable

from loom_core.bus import NatsServer, connect_bus
from loom_core.chain.ledger import DURABLE, MIGRATIONS, STREAM, Ledger, insert_batch, ledger_row
from loom_core.store.embedded import EmbeddedStore
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


async def eventually(check: Callable[[], bool]) -> None:
    for _ in range(200):
        if check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition not met")


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


async def test_a_published_batch_lands_as_the_rows_were_recorded(stack: Instance, nats_server: NatsServer) -> None:
    """A batch goes out as the table's JSON lines and is inserted as it came: arguments with
    newlines, quotes and non-ASCII text, and the instant to the microsecond, read back equal."""
    org = f"led-{uuid.uuid4().hex[:8]}"
    bus = await connect_bus(nats_server.url, name="ledger-lines")
    ledger = Ledger(stack.runtime.store, bus, flush_interval=3600, batch_max=10**6, direct=False)
    hostile = {"k": 'a\nb "c" \\ d', "ключ": "значение ✓", "empty": ""}
    recorded = [{**row(org, i), "args": {**hostile, "i": str(i)}} for i in range(3)]
    try:
        await ledger.start()
        for r in recorded:
            ledger.record(r)  # type: ignore[arg-type]
        await ledger.flush()
        assert await count(stack, org, 3) == 3
    finally:
        await ledger.stop()
        await bus.close()
    got = await stack.runtime.store.query(
        "SELECT request_id, args, toString(ts) AS ts FROM {db}.agent_events WHERE org = {o:String} ORDER BY request_id", {"o": org}
    )
    assert [(g["request_id"], dict(g["args"]), g["ts"]) for g in got] == [(r["request_id"], r["args"], r["ts"]) for r in recorded]


async def test_a_batch_the_previous_release_published_still_lands(stack: Instance) -> None:
    """Batches were `{"id": ..., "rows": [...]}` (stdlib JSON) before they became the table's
    JSON lines; one still in the stream after an upgrade lands whole, once."""
    org = f"led-{uuid.uuid4().hex[:8]}"
    batch_id = uuid.uuid4().hex
    body = json.dumps({"id": batch_id, "rows": [row(org, i) for i in range(3)]}, default=str).encode()
    await insert_batch(stack.runtime.store, body, batch_id)
    await insert_batch(stack.runtime.store, body, batch_id)  # a redelivery
    assert await count(stack, org, 0) == 3  # the inserts are done: one read


async def test_the_first_row_after_a_quiet_interval_is_written_at_once_and_later_rows_wait_for_a_full_batch(stack: Instance) -> None:
    # An hour's interval: any row written before a full batch was written by the pacing's
    # "first row after quiet goes at once", never by the interval running out.
    org = f"led-{uuid.uuid4().hex[:8]}"
    ledger = Ledger(stack.runtime.store, None, flush_interval=3600, batch_max=5, direct=True)
    await ledger.start()
    try:
        ledger.record(row(org, 0))
        assert await count(stack, org, 1) == 1  # readable without a flush call or the hour
        for i in range(1, 5):
            ledger.record(row(org, i))
        # Within the interval of the last write and short of a full batch: held in memory.
        assert await count(stack, org, 0) == 1  # one query's round trip: the flusher ran meanwhile
        assert [r["request_id"] for r in ledger._buf] == [f"{org}-{i}" for i in range(1, 5)]
        ledger.record(row(org, 5))  # the batch is full: written now, the hour notwithstanding
        assert await count(stack, org, 6) == 6
    finally:
        await ledger.stop()


async def test_stop_writes_the_rows_the_interval_still_holds(stack: Instance) -> None:
    org = f"led-{uuid.uuid4().hex[:8]}"
    ledger = Ledger(stack.runtime.store, None, flush_interval=3600, batch_max=10**6, direct=True)
    await ledger.start()
    ledger.record(row(org, 0))
    assert await count(stack, org, 1) == 1
    for i in range(1, 50):
        ledger.record(row(org, i))
    await ledger.stop()
    assert await count(stack, org, 50) == 50


async def test_a_batch_the_store_refuses_goes_back_ahead_of_later_rows_and_is_written_on_stop(stack: Instance) -> None:
    # A second handle on the same chDB engine whose database does not exist yet: its inserts fail
    # in chDB itself until the table is made.
    org = f"led-{uuid.uuid4().hex[:8]}"
    main = stack.runtime.store
    assert isinstance(main, EmbeddedStore)
    database = f"ledger_putback_{uuid.uuid4().hex[:8]}"
    missing = EmbeddedStore(main.path, database)
    ledger = Ledger(missing, None, flush_interval=3600, batch_max=10**6, direct=True)
    await ledger.start()
    try:
        for i in range(3):
            ledger.record(row(org, i))
        await eventually(lambda: ledger.pacer.started > 0 and len(ledger._buf) == 3)  # tried and put back
        for i in range(3, 5):
            ledger.record(row(org, i))
        assert [r["request_id"] for r in ledger._buf] == [f"{org}-{i}" for i in range(5)]
        await missing.execute(f"CREATE DATABASE {database}")
        for migration in MIGRATIONS:
            await missing.execute(migration.sql)
        await ledger.stop()
        rows = await missing.query("SELECT request_id FROM {db}.agent_events ORDER BY ts")
        assert [r["request_id"] for r in rows] == [f"{org}-{i}" for i in range(5)]
    finally:
        await ledger.stop()
        await missing.execute(f"DROP DATABASE IF EXISTS {database}")

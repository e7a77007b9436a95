"""Version counters on NATS KV (loom_core.bus.counters), on a real nats-server: each number once,
whichever replica asks, with each replica remembering the revision it last wrote."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
from loom_core.bus import Bus, LeaseStore, NatsServer, connect_bus
from loom_core.bus.counters import Counters


def key() -> str:
    return f"test.counter.{uuid.uuid4().hex[:12]}"


@pytest.fixture
async def counters(nats_server: NatsServer) -> AsyncIterator[list[Counters]]:
    """Three replicas' counters on three connections, in the lease bucket as the decisions plane keeps them."""
    buses: list[Bus] = [await connect_bus(nats_server.url, name=f"counter-replica-{i}") for i in range(3)]
    try:
        stores = [await LeaseStore.open(b) for b in buses]
        yield [Counters(s.bus, s.bucket) for s in stores]
    finally:
        for b in buses:
            await b.close()


async def test_replicas_asking_at_once_get_each_number_once(counters: list[Counters]) -> None:
    k = key()
    numbers = await asyncio.gather(*(counters[i % 3].next(k) for i in range(30)))
    assert sorted(numbers) == list(range(1, 31))
    # Each replica's remembered revision is stale now for two of them: they still count on.
    more = [await c.next(k) for c in counters]
    assert more == [31, 32, 33]


async def test_the_floor_starts_a_new_counter_and_a_read_floor_is_only_read_when_needed(counters: list[Counters]) -> None:
    k = key()
    reads: list[int] = []

    async def stored_top() -> int:
        reads.append(1)
        return 41

    assert await counters[0].next(k, floor=stored_top) == 42  # no number in the KV: the store's top
    assert await counters[1].next(k, floor=stored_top) == 43  # another replica: the KV's number
    assert await counters[0].next(k, floor=stored_top) == 44
    assert reads == [1]
    assert await counters[2].next(k, floor=50) == 51  # a number floor always counts
    assert await counters[0].next(k) == 52


async def test_a_number_floor_on_a_counter_another_replica_drives_counts_past_the_kv(counters: list[Counters]) -> None:
    """A counter this replica has not seen is written as new first; one that exists refuses that
    and this replica reads it and counts past the KV's number, above a lower floor too."""
    k = key()
    assert await counters[0].next(k, floor=5) == 6  # new: created at the floor + 1
    assert await counters[1].next(k, floor=2) == 7  # exists: the KV's number, not the lower floor
    assert await counters[2].next(k, floor=9) == 10  # exists, a higher floor: the floor
    assert [await counters[0].next(k, floor=0), await counters[1].next(k, floor=0)] == [11, 12]

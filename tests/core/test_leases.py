"""KV leases on a real nats-server: compare-and-set, TTL expiry, fencing, a server that stops."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from loom_core.bus import Bus, Lease, LeaseHeld, LeaseStore, NatsServer, connect_bus
from loom_core.errors import ErrorCode, Unavailable


def key() -> str:
    return f"test.lease.{uuid.uuid4().hex[:12]}"


@pytest.fixture
async def replicas(nats_server: NatsServer) -> AsyncIterator[list[LeaseStore]]:
    """Four lease stores on four connections, as four replicas would hold."""
    buses: list[Bus] = [await connect_bus(nats_server.url, name=f"lease-replica-{i}") for i in range(4)]
    try:
        yield [await LeaseStore.open(b) for b in buses]
    finally:
        for b in buses:
            await b.close()


@pytest.mark.parametrize("round_", range(3))
async def test_racing_acquirers_exactly_one_wins(replicas: list[LeaseStore], round_: int) -> None:
    k = key()

    async def try_acquire(i: int) -> Lease | None:
        try:
            return await replicas[i % len(replicas)].acquire(k, f"holder-{i}", ttl=30)
        except LeaseHeld:
            return None

    results = await asyncio.gather(*(try_acquire(i) for i in range(20)))
    winners = [r for r in results if r is not None]
    assert len(winners) == 1
    current = await replicas[0].read(k)
    assert current is not None
    assert current.holder == winners[0].holder
    assert current.fence == winners[0].fence


async def test_held_lease_refuses_another_holder_with_its_key(leases: LeaseStore) -> None:
    k = key()
    await leases.acquire(k, "a", ttl=30)
    with pytest.raises(LeaseHeld) as exc:
        await leases.acquire(k, "b", ttl=30)
    assert exc.value.code == "PRECONDITION_FAILED"
    assert exc.value.holder == "a"
    assert exc.value.detail == {"lease": k}


async def test_expired_holder_is_taken_over_with_a_larger_fence(leases: LeaseStore) -> None:
    k = key()
    old = await leases.acquire(k, "a", ttl=0.2)
    await asyncio.sleep(0.3)
    new = await leases.acquire(k, "b", ttl=30)
    assert new.holder == "b"
    assert new.fence > old.fence


async def test_stale_holder_cannot_renew_or_release(leases: LeaseStore) -> None:
    k = key()
    old = await leases.acquire(k, "a", ttl=0.2)
    await asyncio.sleep(0.3)
    new = await leases.acquire(k, "b", ttl=30)
    with pytest.raises(LeaseHeld):
        await leases.renew(old, ttl=30)
    assert await leases.release(old) is False
    current = await leases.read(k)
    assert current is not None and current.holder == "b" and current.fence == new.fence


async def test_renew_keeps_the_fence_and_extends_the_expiry(leases: LeaseStore) -> None:
    k = key()
    lease = await leases.acquire(k, "a", ttl=1)
    renewed = await leases.renew(lease, ttl=30)
    assert renewed.fence == lease.fence
    assert renewed.revision > lease.revision
    assert renewed.expires_at > lease.expires_at
    # The renewed lease is the one that counts now: the old revision is stale.
    with pytest.raises(LeaseHeld):
        await leases.renew(lease, ttl=30)
    again = await leases.renew(renewed, ttl=30)
    assert again.fence == lease.fence


async def test_release_then_reacquire_by_another_holder(leases: LeaseStore) -> None:
    k = key()
    first = await leases.acquire(k, "a", ttl=30)
    assert await leases.release(first) is True
    assert await leases.read(k) is None
    second = await leases.acquire(k, "b", ttl=30)
    assert second.holder == "b"
    assert second.fence > first.fence
    # Releasing twice is a stale release.
    assert await leases.release(first) is False


async def test_wait_acquire_times_out_while_the_holder_keeps_it(leases: LeaseStore) -> None:
    k = key()
    await leases.acquire(k, "a", ttl=30)
    started = time.monotonic()
    with pytest.raises(LeaseHeld):
        await leases.wait_acquire(k, "b", ttl=30, timeout=0.3)
    assert time.monotonic() - started >= 0.3


async def test_wait_acquire_gets_the_lease_when_the_holder_releases(leases: LeaseStore) -> None:
    k = key()
    held = await leases.acquire(k, "a", ttl=30)

    async def release_soon() -> None:
        await asyncio.sleep(0.15)
        await leases.release(held)

    releaser = asyncio.create_task(release_soon())
    got = await leases.wait_acquire(k, "b", ttl=30, timeout=5)
    await releaser
    assert got.holder == "b"
    assert got.fence > held.fence


async def test_a_bus_that_is_down_is_a_503_for_every_lease_call_and_the_leases_come_back(tmp_path: Path) -> None:
    """The lease store on its own nats-server, stopped while the client reconnects: every call,
    opening the bucket included, is a retryable 503 `Unavailable` (not nats-py's errors) within
    the request timeout, and the bus closes without raising; started again, the lease taken
    before is held as it was."""
    async with NatsServer(tmp_path / "nats") as srv:
        bus = await connect_bus(srv.url, name="lease-reconnect", request_timeout=0.5)
        leases = await LeaseStore.open(bus)
        held = await leases.acquire("reconnect.k", "a", ttl=60)
        srv.stop()
        calls: dict[str, Callable[[], Awaitable[object]]] = {
            "open": lambda: LeaseStore.open(bus),
            "read": lambda: leases.read("reconnect.k"),
            "acquire": lambda: leases.acquire("reconnect.other", "b", ttl=60),
            "renew": lambda: leases.renew(held, ttl=60),
            "release": lambda: leases.release(held),
        }
        refused = {}
        for name, call_ in calls.items():
            with pytest.raises(Unavailable) as exc:
                await call_()
            refused[name] = exc.value.code
        assert refused == dict.fromkeys(calls, ErrorCode.BACKEND_UNAVAILABLE) and bus.nc.is_reconnecting
        srv.start()
        back = await _read_once_the_bus_answers(leases, "reconnect.k")
        assert back is not None and (back.holder, back.fence) == ("a", held.fence)
        srv.stop()
        await bus.close()
        assert bus.nc.is_closed


async def _read_once_the_bus_answers(leases: LeaseStore, k: str) -> Lease | None:
    """A read retried while the client reconnects (each attempt is refused within the request timeout)."""
    async with asyncio.timeout(30):
        while True:
            with contextlib.suppress(Unavailable):
                return await leases.read(k)

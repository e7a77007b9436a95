"""Bounded projection lag (service/admission.py): writes wait while the projector is more than
`max_behind` writes behind this replica's last write, at most `max_wait` seconds."""

from __future__ import annotations

import asyncio
import time

from loom_tasks.service.admission import Admission


class Projector:
    def __init__(self, at: int = 0) -> None:
        self.at = at
        self.looks = 0

    async def position(self) -> int:
        self.looks += 1
        await asyncio.sleep(0)
        return self.at


async def test_a_write_within_the_bound_does_not_look_at_the_projector() -> None:
    p = Projector()
    a = Admission(p.position, max_behind=100, max_wait=1.0)
    a.wrote(100)
    await a.admit()
    assert (p.looks, a.waits) == (0, 0)


async def test_writes_past_the_bound_wait_for_the_projector_and_share_their_looks() -> None:
    p = Projector(at=0)
    a = Admission(p.position, max_behind=100, max_wait=5.0)
    a.wrote(500)
    waiting = [asyncio.create_task(a.admit()) for _ in range(50)]
    await asyncio.sleep(0.05)
    assert not any(t.done() for t in waiting)  # 500 unapplied, 100 allowed
    # Fifty writes waiting, one look per poll interval between them (not one each).
    assert p.looks == a.looks <= 0.05 / 0.005 + 2
    p.at = 450  # the projector catches up to within the bound
    await asyncio.wait_for(asyncio.gather(*waiting), 1.0)
    assert a.waits == 50
    a.wrote(520)
    await a.admit()  # within the bound of the position last seen: no look
    assert a.known == 450


async def test_a_stalled_projector_holds_a_write_back_only_max_wait() -> None:
    p = Projector(at=0)
    a = Admission(p.position, max_behind=10, max_wait=0.2)
    a.wrote(1000)
    started = time.monotonic()
    await a.admit()
    assert 0.2 <= time.monotonic() - started < 1.0


async def test_no_bound_when_max_behind_is_zero() -> None:
    p = Projector(at=0)
    a = Admission(p.position, max_behind=0, max_wait=5.0)
    a.wrote(10**9)
    await asyncio.wait_for(a.admit(), 0.1)
    assert p.looks == 0


async def test_the_projector_here_lets_waiting_writes_go_as_soon_as_it_is_within_the_bound() -> None:
    """`projected` (the in-process projector, after each fetch) opens the gate in the same turn,
    not at the poller's next look; one short of the bound keeps it shut."""
    p = Projector(at=0)
    a = Admission(p.position, max_behind=100, max_wait=5.0)
    a.wrote(500)
    waiting = [asyncio.create_task(a.admit()) for _ in range(20)]
    await asyncio.sleep(0.02)
    a.projected(399)  # 101 behind: still past the bound
    await asyncio.sleep(0)
    assert not any(t.done() for t in waiting)
    looks = p.looks
    a.projected(400)
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert all(t.done() for t in waiting)
    assert a.known == 400
    await asyncio.sleep(0.02)
    assert p.looks <= looks + 1  # the poller stopped with the gate open
    a.projected(300)  # a position never goes back
    assert a.known == 400


async def test_reached_waits_until_the_projector_applied_a_write_and_no_longer() -> None:
    p = Projector(at=10)
    a = Admission(p.position, max_behind=100, max_wait=1.0)
    assert await a.reached(10, 1.0) is True  # already applied: one look
    assert await a.reached(10, 1.0) is True and p.looks == 1  # known since: no look
    waiting = asyncio.create_task(a.reached(20, 5.0))
    await asyncio.sleep(0.02)
    assert not waiting.done()
    a.projected(20)  # the projector in this process tells it
    assert await waiting is True
    # Never applied: False once the wait is over (task.progress then answers a retryable 503).
    assert await a.reached(30, 0.05) is False

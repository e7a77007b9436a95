"""loom_core.batching: the calls that arrive while a batch runs share the next one (Coalescer);
at most one write per interval unless full or hurried, the first after quiet at once (Pacer)."""

from __future__ import annotations

import asyncio

import pytest
from loom_core.batching import Coalescer, Pacer


class Recorder:
    """A batch runner that holds each batch until released, and records what each carried."""

    def __init__(self) -> None:
        self.batches: list[tuple[str, list[int]]] = []
        self.gate = asyncio.Event()

    async def run(self, group: str, items: list[int]) -> list[int]:
        self.batches.append((group, list(items)))
        await self.gate.wait()
        if -1 in items:
            raise ValueError("a bad item")
        return [i * 10 for i in items]


async def test_the_first_call_runs_alone_and_the_calls_queued_behind_it_share_the_next_batch() -> None:
    rec = Recorder()
    c: Coalescer[str, int, int] = Coalescer(rec.run)
    first = asyncio.ensure_future(c.submit("g", 1))
    await asyncio.sleep(0)
    rest = [asyncio.ensure_future(c.submit("g", i)) for i in (2, 3, 4)]
    await asyncio.sleep(0)
    rec.gate.set()
    assert await first == 10
    assert [await r for r in rest] == [20, 30, 40]  # each caller gets its own item's answer
    assert rec.batches == [("g", [1]), ("g", [2, 3, 4])]


async def test_groups_batch_apart_and_a_batch_carries_at_most_max_size() -> None:
    rec = Recorder()
    c: Coalescer[str, int, int] = Coalescer(rec.run, max_size=2)
    calls = [asyncio.ensure_future(c.submit(g, i)) for g, i in [("a", 1), ("b", 2), ("a", 3), ("a", 4), ("a", 5)]]
    await asyncio.sleep(0)
    rec.gate.set()
    assert [await x for x in calls] == [10, 20, 30, 40, 50]
    assert all(len(items) <= 2 for _, items in rec.batches)
    assert sorted(i for g, items in rec.batches if g == "a" for i in items) == [1, 3, 4, 5]
    assert [items for g, items in rec.batches if g == "b"] == [[2]]


async def test_an_error_reaches_every_caller_of_its_batch_and_no_other() -> None:
    rec = Recorder()
    c: Coalescer[str, int, int] = Coalescer(rec.run)
    first = asyncio.ensure_future(c.submit("g", 1))
    await asyncio.sleep(0)
    bad = [asyncio.ensure_future(c.submit("g", i)) for i in (2, -1)]
    await asyncio.sleep(0)
    rec.gate.set()
    assert await first == 10
    for b in bad:
        with pytest.raises(ValueError, match="a bad item"):
            await b
    assert await c.submit("g", 5) == 50  # the group goes on after a failed batch


async def test_items_weigh_by_size() -> None:
    seen: list[list[list[str]]] = []

    async def run(_: None, items: list[list[str]]) -> list[int]:
        seen.append(items)
        await asyncio.sleep(0)
        return [len(i) for i in items]

    c: Coalescer[None, list[str], int] = Coalescer(run, max_size=3, size=len)
    calls = [asyncio.ensure_future(c.submit(None, t)) for t in (["a"], ["b", "c"], ["d", "e"], ["f", "g", "h", "i"])]
    assert [await x for x in calls] == [1, 2, 2, 4]
    # Up to 3 texts a batch, in order; an item over the bound still goes, alone.
    assert seen == [[["a"], ["b", "c"]], [["d", "e"]], [["f", "g", "h", "i"]]]


async def _settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def test_with_a_linger_callers_that_submit_again_once_answered_share_each_batch() -> None:
    sizes: list[int] = []

    async def run(_: str, items: list[int]) -> list[int]:
        sizes.append(len(items))
        await asyncio.sleep(0.02)
        return items

    # A second at most per linger: the wait ends as soon as the last batch's callers are back.
    c: Coalescer[str, int, int] = Coalescer(run, linger=0.5)

    async def caller(n: int) -> None:
        for i in range(4):
            assert await c.submit("g", n * 10 + i) == n * 10 + i
            await asyncio.sleep(0.002 * n)  # each back at its own pace, as callers are

    await asyncio.gather(*(caller(n) for n in range(6)))
    # All six each time; without the linger 6, then batches of one and five by turns (the first
    # caller back runs alone while the other five come back).
    assert sizes == [6, 6, 6, 6]
    # That batch's callers never came back (its linger was futile): the next call goes at once.
    await c.submit("g", 0)
    assert sizes[-1] == 1


async def test_a_pacer_lets_the_first_write_go_at_once_and_holds_the_next_for_its_interval_until_hurried() -> None:
    pacer = Pacer(3600.0)
    await asyncio.wait_for(pacer.turn(), 60)  # the first write after quiet: at once
    second = asyncio.ensure_future(pacer.turn())
    await _settle()
    assert not second.done()  # an hour to wait
    pacer.hurry()
    await asyncio.wait_for(second, 60)
    third = asyncio.ensure_future(pacer.turn())
    await _settle()
    assert not third.done()  # a hurry serves one turn
    third.cancel()


async def test_a_full_batch_goes_at_once_and_a_write_that_did_not_land_lets_the_next_go_at_once() -> None:
    pacer = Pacer(3600.0)
    await asyncio.wait_for(pacer.turn(), 60)
    await asyncio.wait_for(pacer.turn(at_once=True), 60)
    pacer.again()
    await asyncio.wait_for(pacer.turn(), 60)
    pacer.mark()  # a write made outside `turn` (a flush on demand) counts too
    pacer.again()
    await asyncio.wait_for(pacer.turn(), 60)
    waiting = asyncio.ensure_future(pacer.turn())
    await _settle()
    assert not waiting.done()
    waiting.cancel()

"""The embedded store's threads run below the event loop's priority (LOOM_CHDB_THREAD_NICE): on a
machine whose cores are all busy, calls on the loop run first."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest
from loom_core.store.embedded import THREAD_NICE, EmbeddedStore

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="each thread's own nice value is Linux's")


def nice_of(tid: int) -> int:
    stat = Path(f"/proc/self/task/{tid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2 :].split()[16])  # proc(5): field 19, after pid and (comm)


async def test_the_store_threads_run_below_the_loop(store: EmbeddedStore) -> None:
    # A statement on each pool thread: every one has started (and run its initializer).
    for _ in range(8):
        await store.query("SELECT 1")
    pool = [t for t in threading.enumerate() if t.name.startswith("chdb")]
    assert pool and THREAD_NICE > 0
    assert {nice_of(t.native_id) for t in pool if t.native_id is not None} == {THREAD_NICE}
    assert nice_of(threading.get_native_id()) == 0  # the loop's thread is left as it was

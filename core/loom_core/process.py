"""How a long-running Loom server process (`loom up`, `loom serve`) sets up the interpreter.

The cyclic garbage collector. At CPython's default thresholds (700, 10, 10) a busy server runs a
young-generation collection every few hundred allocations, and a full one, walking every object
the planes hold (the catalog, the generated protobuf and pydantic classes), every hundred of
those. Measured on the task lifecycle benchmark (bench/tasks.py, 2 cores): about a quarter of
the server's CPU went to collections that found next to nothing, since almost everything a
request makes is freed by reference counting. Server processes therefore collect the young
generation every 50,000 net allocations, and move what start-up built out of the collector's
sight (`gc.freeze`) once the server is up. Reference cycles are still collected, later.

The end. A process that ran the embedded engine (chDB) leaves through `os._exit` once its own
shutdown is done (`exit_process`): chDB's C++ static destructors do not survive the engine's
threads, which its Python module gives no way to stop (chdb-io/chdb-core#181), and such a
process ended with SIGSEGV, or hung, in them about half the time (docs/benchmarks.md, session 30).
"""

from __future__ import annotations

import gc
import logging
import os
import sys
from typing import NoReturn

#: gc.set_threshold for server processes (docs/benchmarks.md, "Tasks": the A/B).
SERVER_GC_THRESHOLDS = (50_000, 20, 100)


def tune_gc() -> None:
    """Collect less often: called first thing by a server process."""
    gc.set_threshold(*SERVER_GC_THRESHOLDS)


def freeze_startup_heap() -> None:
    """Once a server is up: what start-up built stays for the process's life; keep the
    collector from walking it again on every full collection."""
    gc.collect()
    gc.freeze()


def embedded_engine_started() -> bool:
    """This process opened the embedded store, whose engine threads outlive its close."""
    embedded = sys.modules.get("loom_core.store.embedded")
    return bool(embedded is not None and embedded.EmbeddedStore.engine_started)


def exit_status(ended: SystemExit) -> int:
    """The status Python itself ends with on `ended`: 0 for no code, an int as it is, any other
    code written to standard error and 1."""
    if ended.code is None:
        return 0
    if isinstance(ended.code, int):
        return ended.code
    print(ended.code, file=sys.stderr)
    return 1


def exit_process(code: int) -> NoReturn:
    """End the process with `code` once its own shutdown is done; past the native teardown when
    the embedded engine ran here (the module's docstring says why)."""
    if not embedded_engine_started():
        sys.exit(code)
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed or gone: nothing left to write there
            pass
    os._exit(code)

"""A Loom replica in a process of its own, for the chaos test to kill -9: its own data dir (chDB
allows one process per data dir), the test's nats-server. Prints one JSON line when serving:
{"url", "token", "namespace"}, then sends its stdout to its stderr (its log), so the pipe the test
read the line from never fills; the org and its admin token are made on the first start.

For a test that finds it stuck: SIGUSR1 writes every thread's Python stack to the log (faulthandler,
from the signal handler itself, so it answers even when the event loop is blocked), SIGUSR2 every
asyncio task's stack (when the loop still runs)."""

from __future__ import annotations

import asyncio
import faulthandler
import json
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any


async def main(data_dir: Path, nats_url: str) -> None:
    from loom_core.store.embedded import EmbeddedStore
    from loom_gateway.identity import bootstrap_org
    from loom_runner.embedded import start_instance

    from tests.tasks.conftest import task_settings

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("loom_tasks.consumers").setLevel(logging.DEBUG)
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR2, _dump_tasks)
    settings = task_settings(data_dir, task_webhook_deliver_enabled=False)
    store = EmbeddedStore.open(data_dir / "chdb", settings.clickhouse_database)
    inst = await start_instance(settings, store=store, nats_url=nats_url, name="chaos")
    creds = data_dir / "creds.json"
    if not creds.exists():
        token, _ = await bootstrap_org(inst.runtime.identity, inst.runtime.codec, "chaos", "main", 7200)
        creds.write_text(json.dumps({"token": token, "namespace": "main"}))
    print(json.dumps({"url": inst.base_url, **json.loads(creds.read_text())}), flush=True)
    os.dup2(2, 1)
    await asyncio.Event().wait()


def _dump_tasks() -> None:
    """Each task's chain of awaits, outermost first (Task.print_stack shows only the outermost)."""
    for task in asyncio.all_tasks():
        frames: list[str] = []
        awaited: Any = task.get_coro()
        while awaited is not None:
            frame = getattr(awaited, "cr_frame", None) or getattr(awaited, "gi_frame", None)
            if frame is not None:
                frames.append(f"{frame.f_code.co_name} ({Path(frame.f_code.co_filename).name}:{frame.f_lineno})")
            awaited = getattr(awaited, "cr_await", None) or getattr(awaited, "gi_yieldfrom", None)
        if not any(".pyx" in f for f in frames):  # grpc's own server loops
            print(f"task {task.get_name()}: {' -> '.join(frames) or repr(task)}", file=sys.stderr)
    sys.stderr.flush()


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), sys.argv[2]))

"""A Loom replica in a process of its own, for the chaos test to kill -9: its own data dir (chDB
allows one process per data dir), the test's nats-server. Prints one JSON line when serving:
{"url", "token", "namespace"}, then sends its stdout to its stderr (its log), so the pipe the test
read the line from never fills; the org and its admin token are made on the first start."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path


async def main(data_dir: Path, nats_url: str) -> None:
    from loom_core.store.embedded import EmbeddedStore
    from loom_gateway.identity import bootstrap_org
    from loom_runner.embedded import start_instance

    from tests.tasks.conftest import task_settings

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


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), sys.argv[2]))

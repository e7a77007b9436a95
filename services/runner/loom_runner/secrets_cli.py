"""`loom secrets reseal`: rewrites every sealed secrets row under LOOM_JWT_SECRET, through the
resealers the `loom.reseal` entry points name. A plane's own commands come through the
`loom.commands` entry points (cli.py)."""

from __future__ import annotations

import argparse
import asyncio
from importlib.metadata import entry_points
from typing import Any

from loom_core.local_secrets import owned_secrets
from loom_core.settings import Settings

COMMANDS = ("secrets",)


def add_commands(sub: Any) -> None:
    secrets = sub.add_parser("secrets", help="sealed secrets at rest")
    secrets_sub = secrets.add_subparsers(dest="secrets_cmd", required=True)
    secrets_sub.add_parser("reseal", help="reseal every sealed secrets row under LOOM_JWT_SECRET")


def run_command(args: argparse.Namespace, settings: Settings) -> int:
    return asyncio.run(_reseal(owned_secrets(settings)))


async def _reseal(settings: Settings) -> int:
    from loom_core.store import open_store

    store = await open_store(settings)
    total = 0
    try:
        for ep in sorted(entry_points(group="loom.reseal"), key=lambda e: e.name):
            n = int(await ep.load()(store, settings))
            print(f"loom: {ep.name}: {n} row(s) resealed", flush=True)
            total += n
    finally:
        await store.close()
    print(f"loom: {total} row(s) resealed in all", flush=True)
    return 0

"""The machine line every benchmark prints beside its figures."""

from __future__ import annotations

import argparse
import os
import platform
from pathlib import Path


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown cpu"


def cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def machine() -> str:
    return f"{platform.machine()}, {cpu_model()}, {cpus()} cpus, Python {platform.python_version()}"


def load() -> str:
    """The machine's load average (1, 5, 15 minutes), to read beside a figure taken on it."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.1f} / {five:.1f} / {fifteen:.1f}"


def default_sync_interval() -> str:
    """JetStream's storage sync as `loom up` runs it unless told otherwise (LOOM_NATS_SYNC_INTERVAL)."""
    from loom_core.settings import Settings

    return str(Settings.model_fields["nats_sync_interval"].default)


def add_durability_argument(parser: argparse.ArgumentParser) -> None:
    default = default_sync_interval()
    parser.add_argument(
        "--sync-interval",
        default=default,
        help=f"JetStream sync_interval of the bench's nats-server, for Loom and the baseline alike (default {default!r}, `loom up`'s)",
    )


def durability(sync_interval: str) -> str:
    """The line every bench that starts a nats-server prints: what an acknowledged write survives."""
    what = (
        "fsync of every write before its ack"
        if sync_interval == "always"
        else f"fsync every {sync_interval or '2m (nats-server default)'}: a machine crash may lose that long's acknowledged writes"
    )
    default = " (loom up's default)" if sync_interval == default_sync_interval() else " (NOT loom up's default)"
    return (
        f"durability: JetStream sync_interval {sync_interval or 'unset'}: {what}{default}; the same nats-server for Loom and the baseline"
    )

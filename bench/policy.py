"""The history-policy gate's added latency, and the evaluator's throughput.

    .venv/bin/python bench/policy.py [-n 3000] [--events 100000] [--json]

Starts two embedded replicas in one process sharing one chDB engine and one nats-server (as
the tests do): one with LOOM_POLICY_MODE=off (the baseline) and one with enforce. Loads 10^5
events of one caller (agent `bench-bot`) into the ledger table over the last 50 minutes, plus
exposure rows, sets 10 rules that all apply to `auth.whoami` (every leaf kind, combinators,
args_equal, windows up to a day), and lets the enforce replica build its window. Then calls
`auth.whoami` on the identity plane's gRPC port, alternating off / enforce one call at a time,
from a client process of its own (`--client loop`: from the server's event loop, as before
session 26), with the server on uvloop as `loom up` runs it, and reports the p50 / p99 of the
per-pair difference (enforce - off), the same for off against off (a control: what the per-pair
figures read with no gate on either side), the p50 / p99 of each side, the time spent inside the gate itself (and, with `--direct N`, its CPU over N checks in a
row without gRPC, the caches warm), and evaluations per second of the evaluator alone (10 rules
over the same window, no I/O). With `--loop asyncio` it also lists the event-loop steps over
`--slow-step-ms` of thread CPU during the alternating calls (what a tail call waited behind); the
collector's CPU there in either loop. Every enforce call must be allowed (the rules are
written to allow it), so the difference is the cost of evaluating, not of refusing.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import json
import logging
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from _machine import add_durability_argument, durability, load, machine, profile_text  # bench/ is on sys.path when a script runs
from loom_core.process import exit_process

ROOT = Path(__file__).resolve().parents[1]
AGENT = "bench-bot"

OPS = [
    ("memory.get", 40),
    ("memory.set", 20),
    ("memory.search", 10),
    ("task.create", 10),
    ("task.claim", 5),
    ("task.heartbeat", 5),
    ("insights.query", 10),
]


def rules() -> list[dict[str, Any]]:
    """Ten rules over every leaf kind; each applies to auth.whoami and allows it."""
    a = ["auth.*"]
    return [
        {
            "name": "writes-per-hour",
            "effect": "forbid",
            "actions": a,
            "condition": {"op": "count_within", "within": "1h", "operation": "memory.set", "cmp": "gt", "value": 100000},
        },
        {
            "name": "read-first",
            "effect": "require",
            "actions": a,
            "condition": {"op": "formerly", "within": "1h", "operation": "memory.get"},
        },
        {
            "name": "hot-key",
            "effect": "forbid",
            "actions": a,
            "condition": {
                "op": "count_within",
                "within": "1h",
                "operation": "memory.get",
                "args_equal": {"memory_key": "notes/k1"},
                "cmp": "gt",
                "value": 10000,
            },
        },
        {
            "name": "heartbeat-after-claim",
            "effect": "forbid",
            "actions": a,
            "condition": {"op": "not_since", "within": "15m", "anchor": "task.claim", "operation": "task.heartbeat"},
        },
        {
            "name": "not-too-broad",
            "effect": "forbid",
            "actions": a,
            "condition": {"op": "breadth_within", "within": "1h", "cmp": "gt", "value": 50000},
        },
        {
            "name": "create-then-delete",
            "effect": "forbid",
            "actions": a,
            "condition": {
                "op": "all",
                "of": [
                    {"op": "count_within", "within": "15m", "operation": "task.create", "cmp": "gt", "value": 5000},
                    {"op": "formerly", "within": "5m", "operation": "memory.delete"},
                ],
            },
        },
        {
            "name": "volume",
            "effect": "forbid",
            "actions": a,
            "condition": {
                "op": "any",
                "of": [
                    {"op": "count_within", "within": "1h", "operation": "memory.*", "cmp": "gt", "value": 200000},
                    {"op": "count_within", "within": "1d", "operation": "*", "cmp": "gt", "value": 500000},
                ],
            },
        },
        {
            "name": "not-too-chatty",
            "effect": "require",
            "actions": a,
            "condition": {
                "op": "not",
                "of": {"op": "count_within", "within": "1h", "operation": "auth.whoami", "cmp": "gt", "value": 1000000},
            },
        },
        {
            "name": "odd-search-count",
            "effect": "forbid",
            "actions": a,
            "condition": {"op": "count_within", "within": "30m", "operation": "memory.search", "cmp": "eq", "value": 123456},
        },
        {
            "name": "no-recent-delete-of-k1",
            "effect": "forbid",
            "actions": a,
            "condition": {"op": "formerly", "within": "30s", "operation": "memory.delete", "args_equal": {"memory_key": "notes/k1"}},
        },
    ]


def quantile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(len(s) * q))]


async def load_history(store: Any, org: str, ns: str, n: int) -> None:
    from datetime import UTC, datetime

    from loom_core.store import ch_time

    rng = random.Random(7)
    names = [op for op, w in OPS for _ in range(w)]
    now = time.time()
    # Every event and exposure row is the one caller's: these columns, the same in both tables.
    caller = {"org": org, "namespace": ns, "subject": "user:admin", "agent": AGENT, "user": "", "session": ""}
    batch: list[dict[str, Any]] = []
    for i in range(n):
        op = names[i % len(names)]  # a fixed mix, so every run loads the same history
        ts = now - 3000 + 3000 * i / n  # spread over the last 50 minutes, oldest first
        args = {"memory_key": f"notes/k{rng.randrange(1000)}"} if op.startswith("memory.") else {}
        batch.append(
            {
                "ts": ch_time(datetime.fromtimestamp(ts, UTC)),
                **caller,
                "op": op,
                "transport": "grpc",
                "run_id": "",
                "consumer": "",
                "ok": True,
                "error_code": "",
                "latency_ms": 1.0,
                "args": args,
                "out_hits": 1,
                "token_id": "t",
                "request_id": f"bench-{i}",
                "write_shaped": op.endswith((".set", ".create")),
            }
        )
        if len(batch) == 20000:
            await store.insert("{db}.agent_events", batch)
            batch = []
    if batch:
        await store.insert("{db}.agent_events", batch)
    # task.claim is always followed by a task.heartbeat in the mix, so heartbeat-after-claim allows.
    exposures = [
        {
            "ts": ch_time(datetime.fromtimestamp(now - 1000 + i / 10, UTC)),
            **caller,
            "run_id": "",
            "op": "memory.search",
            "kind": "memory",
            "key": f"notes/k{i % 2000}",
            "request_id": f"x-{i}",
        }
        for i in range(5000)
    ]
    await store.insert("{db}.memory_exposures", exposures)


async def direct_calls(gate: Any, catalog: Any, org: str, ns: str, n: int) -> tuple[list[float], list[float]]:
    """`gate.check` called `n` times in a row on the event loop, no gRPC around it, each call's
    own ledger row handed to the observer after it (as the ledger does): the thread CPU of each
    check and each observation, with the caches as warm as a tight loop keeps them (the gRPC
    figures above pay for everything else a call runs between two gate checks). No check awaits,
    so nothing else runs on the loop meanwhile; their decision rows are written after the count
    the report ends with."""
    from loom_core.chain import GateCall
    from loom_core.chain.context import CallContext
    from loom_core.chain.ledger import LedgerCaller, call_row
    from loom_core.identity.tokens import Principal
    from loom_core.roles import Role

    op = catalog.get("auth.whoami")
    principal = Principal(jti="bench", sub="user:admin", org=org, roles={ns: "admin"}, iat=0, exp=2**40, default_namespace=ns)
    observe = gate.history.observe_ledger_row
    check_cpu: list[float] = []
    observe_cpu: list[float] = []
    caller: LedgerCaller = {
        "org": org,
        "namespace": ns,
        "subject": "user:admin",
        "agent": AGENT,
        "user": "",
        "session": "",
        "transport": "grpc",
        "run_id": "",
        "consumer": "",
        "token_id": "",
    }
    for _ in range(n):
        ctx = CallContext(op=op, principal=principal, namespace=ns, role=Role.ADMIN, agent=AGENT)
        call = GateCall(ctx, op.request_cls())
        row = call_row(caller, "auth.whoami", True, "", 0.0, {}, 0, ctx.request_id, False)
        cpu = time.thread_time()
        await gate.check(call)
        check_cpu.append(time.thread_time() - cpu)
        if call.after is not None:
            call.after()  # the decision row, as the chain records it after the answer (not counted)
        cpu = time.thread_time()
        observe(row)
        observe_cpu.append(time.thread_time() - cpu)
    return check_cpu, observe_cpu


class LoopSteps:
    """While on, the thread CPU of every event-loop step (a callback, or a task running to its
    next await) over `slow_s`, by what ran: the steps that hold up the call waiting behind them."""

    def __init__(self, slow_s: float) -> None:
        self.slow_s = slow_s
        self.on = False
        self.installed = False
        self.slow: dict[str, list[float]] = {}
        # Every step's thread CPU by what ran (a task's coroutine, a callback's name; cheap to
        # tell apart, unlike `_step_name`): where the loop's CPU goes, per call.
        self.kinds: dict[str, list[float]] = {}
        self._run = asyncio.events.Handle._run

    def install(self) -> None:
        steps, run = self, self._run

        def timed_run(handle: asyncio.events.Handle) -> None:
            if not steps.on:
                return run(handle)
            kinds, slow = steps.kinds, steps.slow  # where this step counts, whatever it switches to
            cpu = time.thread_time()
            try:
                return run(handle)
            finally:
                spent = time.thread_time() - cpu
                if spent > steps.slow_s:
                    slow.setdefault(_step_name(handle), []).append(spent)
                kind = kinds.get(_step_kind(handle))
                if kind is None:
                    kind = kinds[_step_kind(handle)] = [0, 0.0]
                kind[0] += 1
                kind[1] += spent

        asyncio.events.Handle._run = timed_run  # type: ignore[method-assign,assignment]
        self.installed = True

    def uninstall(self) -> None:
        asyncio.events.Handle._run = self._run  # type: ignore[method-assign]

    def top(self, n: int = 8) -> list[dict[str, Any]]:
        ranked = sorted(self.slow.items(), key=lambda kv: -sum(kv[1]))[:n]
        return [{"step": k, "n": len(v), "total_ms": sum(v) * 1000, "max_ms": max(v) * 1000} for k, v in ranked]

    def kinds_top(self, calls: int, n: int = 16) -> list[dict[str, Any]]:
        ranked = sorted(self.kinds.items(), key=lambda kv: -kv[1][1])[:n]
        return [{"step": k, "per_call": v[0] / calls, "cpu_per_call_us": v[1] / calls * 1e6} for k, v in ranked]


def _steps_added(kinds: dict[str, dict[str, list[float]]], calls: int, n: int = 14) -> list[dict[str, Any]]:
    """The blocks' loop steps by what ran: each kind's thread CPU per call, enforce's against
    off's, the kinds enforce adds most first."""
    off, on = kinds["off"], kinds["enforce"]
    rows: list[tuple[float, str, float, float]] = []
    for k in set(off) | set(on):
        a, b = off.get(k, [0.0, 0.0])[1] / calls * 1e6, on.get(k, [0.0, 0.0])[1] / calls * 1e6
        rows.append((b - a, k, a, b))
    rows.sort(key=lambda r: -abs(r[0]))
    return [{"step": k, "off_us": a, "enforce_us": b, "added_us": added} for added, k, a, b in rows[:n]]


def _step_kind(handle: asyncio.events.Handle) -> str:
    """A step's kind, cheaply: a task's coroutine, or a plain callback's name."""
    callback = handle._callback  # type: ignore[attr-defined]
    task = getattr(callback, "__self__", None)
    if isinstance(task, asyncio.Task):
        return str(getattr(task.get_coro(), "__qualname__", "?"))
    return str(getattr(callback, "__qualname__", type(callback).__name__))


def _step_name(handle: asyncio.events.Handle) -> str:
    """A task's step by its coroutine and where it had been waiting; a plain callback by name."""
    callback = handle._callback  # type: ignore[attr-defined]
    task = getattr(callback, "__self__", None)
    if not isinstance(task, asyncio.Task):
        return str(getattr(callback, "__qualname__", type(callback).__name__))
    coro: Any = task.get_coro()
    name, waited = getattr(coro, "__qualname__", None) or f"{type(coro).__module__}.{type(coro).__qualname__} {coro!r:.80}", ""
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is not None:
            waited = frame.f_code.co_qualname
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return f"{name} (was at {waited})"


async def make_calls(stubs: dict[str, Any], token: str, command: dict[str, Any]) -> dict[str, list[float]]:
    """One command of calls, timed from the caller's side (seconds each): `pairs` alternates one
    call of each of two sides (`off` and `enforce` unless it names others), neither side always
    first; `block` makes `n` calls of one side."""
    from loom_api.identity.v1 import identity_pb2

    md = [("authorization", f"Bearer {token}"), ("x-loom-agent", AGENT)]
    req = identity_pb2.WhoAmIRequest()
    if command["do"] == "pairs":
        a, b = command.get("sides", ("off", "enforce"))
        plan = [side for i in range(command["n"]) for side in ((a, b), (b, a))[i % 2]]
    else:
        plan = [command["side"]] * command["n"]
    walls: dict[str, list[float]] = {side: [] for side in plan[:2]}
    for side in plan:
        started = time.perf_counter()
        await stubs[side].WhoAmI(req, metadata=md)
        walls[side].append(time.perf_counter() - started)
    return walls


def _stubs(channels: dict[str, Any]) -> dict[str, Any]:
    from loom_api.identity.v1 import identity_pb2_grpc

    return {side: identity_pb2_grpc.IdentityServiceStub(ch) for side, ch in channels.items()}


@asynccontextmanager
async def caller_for(
    where: str, addresses: dict[str, str], token: str
) -> AsyncIterator[Callable[[dict[str, Any]], Awaitable[dict[str, list[float]]]]]:
    """The bench's caller: `process`, a client process of its own (how an agent reaches Loom; the
    answer is timed when it reaches that process, and work the server does after answering runs
    beside the client instead of inside its timing), or `loop`, calls made on the server's own
    event loop (sessions 13-24's figures: an answer is read only after the loop's next steps,
    the deferred ones included)."""
    if where == "loop":
        import grpc

        channels = {side: grpc.aio.insecure_channel(address) for side, address in addresses.items()}
        try:
            stubs = _stubs(channels)

            async def in_loop(command: dict[str, Any]) -> dict[str, list[float]]:
                return await make_calls(stubs, token, command)

            yield in_loop
        finally:
            for ch in channels.values():
                await ch.close()
        return
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "--client-of",
        json.dumps(addresses),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        limit=1 << 24,  # an answer is one line of every call's time
        env={**os.environ, "LOOM_BENCH_TOKEN": token},  # not in argv, where `ps` shows it
    )
    assert proc.stdin is not None and proc.stdout is not None
    stdin, stdout = proc.stdin, proc.stdout

    async def in_process(command: dict[str, Any]) -> dict[str, list[float]]:
        stdin.write(json.dumps(command).encode() + b"\n")
        await stdin.drain()
        line = await stdout.readline()
        if not line:
            raise RuntimeError(f"the client process ended (exit {await proc.wait()})")
        answer: dict[str, list[float]] = json.loads(line)
        return answer

    try:
        yield in_process
    finally:
        stdin.close()
        await proc.wait()


async def client_process(addresses: dict[str, str]) -> None:
    """`--client-of`: the caller's process. One command a line on stdin, one answer a line on stdout."""
    import grpc

    token = os.environ["LOOM_BENCH_TOKEN"]
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    channels = {side: grpc.aio.insecure_channel(address) for side, address in addresses.items()}
    stubs = _stubs(channels)
    while line := await reader.readline():
        walls = await make_calls(stubs, token, json.loads(line))
        sys.stdout.write(json.dumps(walls) + "\n")
        sys.stdout.flush()
    for ch in channels.values():
        await ch.close()


async def main(args: argparse.Namespace) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT))
    import httpx
    from loom_core.bus import NatsServer
    from loom_core.chain.ledger import LedgerRow
    from loom_core.settings import Settings
    from loom_core.store.embedded import EmbeddedStore
    from loom_gateway.identity import bootstrap_org
    from loom_policy.domain.compiler import Caller, EvalContext
    from loom_policy.domain.evaluator import evaluate
    from loom_policy.service.gate import PolicyGate
    from loom_policy.service.live_history import now_us
    from loom_runner.embedded import start_instance

    logging.basicConfig(level=logging.WARNING)
    load_at_start = load()
    with tempfile.TemporaryDirectory(prefix="loom-bench-policy-", ignore_cleanup_errors=True) as tmp:
        data = Path(tmp)
        base = {
            "data_dir": data,
            "jwt_secret": "bench-secret-0123456789abcdef0123456789",
            "http_port": 0,
            "rate_read_per_minute": 10_000_000,
        }
        off_settings = Settings(**base, plane_overrides={"policy_mode": "off"})  # type: ignore[arg-type]
        on_settings = Settings(**base, plane_overrides={"policy_mode": "enforce"})  # type: ignore[arg-type]
        async with NatsServer(data / "nats", sync_interval=args.sync_interval) as nats:
            store = EmbeddedStore.open(data / "chdb", off_settings.clickhouse_database, off_settings.chdb_thread_nice)
            off = await start_instance(off_settings, store=store, nats_url=nats.url, name="off")
            on = await start_instance(on_settings, store=store, nats_url=nats.url, name="enforce")
            try:
                org, ns = "bench", "main"
                token, _ = await bootstrap_org(off.runtime.identity, off.runtime.codec, org, ns, 3600)
                t = time.perf_counter()
                await load_history(store, org, ns, args.events)
                load_s = time.perf_counter() - t
                async with httpx.AsyncClient(base_url=on.base_url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as h:
                    for r in rules():
                        resp = await h.post("/v1/policy.set", json=r)
                        assert resp.status_code == 200, resp.text
                gate = on.runtime.gate
                assert isinstance(gate, PolicyGate) and gate.rules is not None and gate.history is not None
                ns_rules = await gate.rules.get(org, ns)
                assert len(ns_rules.for_op("auth.whoami")) == 10
                t = time.perf_counter()
                window = await gate.history.window(org, ns, ns_rules.shape)
                build_s = time.perf_counter() - t
                # What one full collection costs with the window in memory (each one the calls
                # trigger walks all of it): thread CPU, and the tracked objects and references walked.
                full_gc_cpu: list[float] = []
                for _ in range(5):
                    cpu = time.thread_time()
                    gc.collect()
                    full_gc_cpu.append(time.thread_time() - cpu)
                tracked = gc.get_objects()
                gc_walk = (len(tracked), sum(len(gc.get_referents(o)) for o in tracked))
                del tracked
                if args.gc_freeze:
                    gc.freeze()  # an experiment: the window (and the app) out of the collector's scans
                caller = Caller("user:admin", AGENT)
                agent_events = sum(len(s.times) for s in (window.series_for(caller.pkey("agent")) or {}).values())

                # Time spent inside the gate itself (enforce replica): wall, and the thread's CPU
                # (which a loaded machine inflates far less); the same for the ledger observer that
                # feeds each call's row into the window (also a cost enforce adds).
                inner: list[float] = []
                inner_cpu: list[float] = []
                observer_cpu: list[float] = []
                real_check = gate.check
                profiler = cProfile.Profile(time.thread_time) if args.profile else None
                steps = LoopSteps(args.slow_step_ms / 1000)
                if args.loop == "asyncio":
                    steps.install()  # uvloop's steps are C: not listed

                async def timed_check(call: Any) -> None:
                    started, cpu = time.perf_counter(), time.thread_time()
                    if profiler:
                        profiler.enable()
                    try:
                        await real_check(call)
                    finally:
                        if profiler:
                            profiler.disable()
                        inner_cpu.append(time.thread_time() - cpu)
                        inner.append(time.perf_counter() - started)

                gate.check = timed_check  # type: ignore[method-assign]
                history = gate.history
                real_observe = history.observe_ledger_row
                observers = gate._ledger_observers

                def timed_observe(row: LedgerRow) -> None:
                    cpu = time.thread_time()
                    real_observe(row)
                    observer_cpu.append(time.thread_time() - cpu)

                observers[observers.index(real_observe)] = timed_observe

                # `control`: the off replica again, on a channel of its own: off against off in
                # pairs is what the per-pair figures read with no gate on either side.
                addresses = {
                    "off": off.grpc_address("identity"),
                    "enforce": on.grpc_address("identity"),
                    "control": off.grpc_address("identity"),
                }
                async with caller_for(args.client, addresses, token) as call:
                    await call({"do": "pairs", "n": args.warmup})
                    inner.clear()
                    inner_cpu.clear()
                    observer_cpu.clear()
                    gc_alternating = [0.0, 0.0]  # the collector's thread CPU in the alternating calls: young, full
                    gc_started = [0.0]

                    def gc_cpu(phase: str, info: dict[str, int]) -> None:
                        if phase == "start":
                            gc_started[0] = time.thread_time()
                        else:
                            gc_alternating[info["generation"] == 2] += time.thread_time() - gc_started[0]

                    gc.callbacks.append(gc_cpu)
                    steps.on = steps.installed
                    walls = await call({"do": "pairs", "n": args.n})
                    lat_off, lat_on = walls["off"], walls["enforce"]
                    control = await call({"do": "pairs", "n": args.n, "sides": ("off", "control")})
                    steps.on = False
                    gc.callbacks.remove(gc_cpu)
                    gate.check = real_check  # type: ignore[method-assign]
                    observers[observers.index(timed_observe)] = real_observe
                    # The process's CPU per call (every thread: the gate, the observer, and the work
                    # a gated call leaves for later: the feed to other replicas, decision batches),
                    # in blocks of one side at a time so deferred work lands on its own side's
                    # calls; blocks alternate, each side's figure is the median of its blocks.
                    block_cpu: dict[str, list[float]] = {"off": [], "enforce": []}
                    block_p50: dict[str, list[float]] = {"off": [], "enforce": []}
                    block_p99: dict[str, list[float]] = {"off": [], "enforce": []}
                    block_gc: dict[str, list[float]] = {"off": [], "enforce": []}
                    block_full = {"off": 0, "enforce": 0}
                    # Where a block's CPU went: the event loop's thread (and its steps by what ran)
                    # against every other thread (chDB's, gRPC's core), per call.
                    block_loop: dict[str, list[float]] = {"off": [], "enforce": []}
                    block_kinds: dict[str, dict[str, list[float]]] = {"off": {}, "enforce": {}}
                    gc_spent = [0.0, 0.0]  # the cyclic collector's time: total, and when the running one started
                    full_collections = [0]

                    def gc_timer(phase: str, info: dict[str, int]) -> None:
                        if phase == "start":
                            gc_spent[1] = time.perf_counter()
                        else:
                            gc_spent[0] += time.perf_counter() - gc_spent[1]
                            full_collections[0] += info["generation"] == 2

                    gc.callbacks.append(gc_timer)
                    alternating_steps = (steps.kinds, steps.slow)
                    steps.slow = {}
                    for b in range(2 * args.blocks):
                        name = ("off", "enforce")[(b + b // 2) % 2]  # off, enforce, enforce, off, ...
                        await asyncio.sleep(args.settle)  # the previous block's deferred work done
                        print(f"block {b}: {name}", file=sys.stderr, flush=True)  # a mark for an outside profiler
                        # The step listing's clock reads cost every step CPU (more steps on
                        # enforce): only with --block-steps, so the blocks' own figures are the code's.
                        steps.kinds, steps.on = block_kinds[name], args.block_steps and steps.installed
                        cpu, gc_before, full_before = time.process_time(), gc_spent[0], full_collections[0]
                        loop_cpu = time.thread_time()
                        block_walls = (await call({"do": "block", "side": name, "n": args.n}))[name]
                        await asyncio.sleep(args.settle)
                        steps.on = False
                        block_loop[name].append((time.thread_time() - loop_cpu) / args.n)
                        block_cpu[name].append((time.process_time() - cpu) / args.n)
                        block_p50[name].append(statistics.median(block_walls))
                        block_p99[name].append(quantile(block_walls, 0.99))
                        block_gc[name].append((gc_spent[0] - gc_before) / args.n)
                        block_full[name] += full_collections[0] - full_before
                    gc.callbacks.remove(gc_timer)
                    await asyncio.sleep(0)  # this step began in the last block: end it before the rest
                    steps.kinds, steps.slow = alternating_steps
                diffs = [b - a for a, b in zip(lat_off, lat_on, strict=True)]
                control_diffs = [b - a for a, b in zip(control["off"], control["control"], strict=True)]
                direct_check, direct_observe = await direct_calls(gate, on.runtime.catalog, org, ns, args.direct)

                # The evaluator alone: 10 rules over the same window, no I/O.
                rules_for = ns_rules.for_op("auth.whoami")
                v = evaluate(
                    rules_for, EvalContext(window, caller, now_us(), {}), op="auth.whoami", write_shaped=False, deployment_mode="enforce"
                )
                assert v.decision == "allow" and not v.errors, (v.determining_rules, v.errors)
                count, started = 0, time.perf_counter()
                while time.perf_counter() - started < args.eval_seconds:
                    for _ in range(200):
                        evaluate(
                            rules_for,
                            EvalContext(window, caller, now_us(), {}),
                            op="auth.whoami",
                            write_shaped=False,
                            deployment_mode="enforce",
                        )
                    count += 200
                evals_s = count / (time.perf_counter() - started)
                # As the gate evaluates: the caller's standing verdict (the rules' memos under it),
                # each call's own ledger row added to the window after it (so the rules reading
                # every op, or auth.whoami, are asked again).
                from loom_policy.domain.history import Event
                from loom_policy.domain.standing import decide

                kept: dict[Any, Any] = {}
                count, started = 0, time.perf_counter()
                while time.perf_counter() - started < args.eval_seconds:
                    for _ in range(200):
                        t = now_us()
                        standing = decide(
                            kept,
                            rules_for,
                            EvalContext(window, caller, t, {}, memo=True),
                            op="auth.whoami",
                            write_shaped=False,
                            deployment_mode="enforce",
                        )
                        assert standing is not None and standing.decision == "allow"
                        window.add_event(Event(t, "user:admin", AGENT, "", "", "auth.whoami", True, {}, request_id=f"e{count}"))
                    count += 200
                evals_memo_s = count / (time.perf_counter() - started)
                steps.uninstall()
                decisions = await store.query("SELECT decision, count() AS n FROM {db}.policy_decisions GROUP BY decision")
            finally:
                await on.stop()
                await off.stop()
                await store.close()

    ms = 1000.0
    return {
        "machine": machine(),
        "platform": platform.platform(),
        "durability": durability(args.sync_interval),
        "client": args.client,
        "loop": args.loop,
        "load_at_start": load_at_start,
        "load": load(),
        "events_loaded": args.events,
        "caller_events_in_window": agent_events,
        "window_stats": window.stats(),
        "load_seconds": round(load_s, 2),
        "window_build_seconds": round(build_s, 2),
        "calls_per_side": args.n,
        "off_p50_ms": statistics.median(lat_off) * ms,
        "off_p99_ms": quantile(lat_off, 0.99) * ms,
        "enforce_p50_ms": statistics.median(lat_on) * ms,
        "enforce_p99_ms": quantile(lat_on, 0.99) * ms,
        "added_p50_ms": statistics.median(diffs) * ms,
        "added_p99_ms": quantile(diffs, 0.99) * ms,
        "control_added_p50_ms": statistics.median(control_diffs) * ms,
        "control_added_p99_ms": quantile(control_diffs, 0.99) * ms,
        "control_p99_difference_ms": (quantile(control["control"], 0.99) - quantile(control["off"], 0.99)) * ms,
        "p50_difference_ms": (statistics.median(lat_on) - statistics.median(lat_off)) * ms,
        "p99_difference_ms": (quantile(lat_on, 0.99) - quantile(lat_off, 0.99)) * ms,
        "gate_check_p50_ms": statistics.median(inner) * ms,
        "gate_check_p99_ms": quantile(inner, 0.99) * ms,
        "gate_check_cpu_p50_us": statistics.median(inner_cpu) * 1e6,
        "gate_check_cpu_p99_us": quantile(inner_cpu, 0.99) * 1e6,
        "observer_cpu_p50_us": statistics.median(observer_cpu) * 1e6,
        "direct_calls": args.direct,
        **(
            {
                "direct_check_cpu_p50_us": statistics.median(direct_check) * 1e6,
                "direct_check_cpu_p99_us": quantile(direct_check, 0.99) * 1e6,
                "direct_observer_cpu_p50_us": statistics.median(direct_observe) * 1e6,
            }
            if direct_check
            else {}
        ),
        "evaluations_per_second_memo": evals_memo_s,
        "slow_step_ms": args.slow_step_ms,
        "slow_steps": steps.top(),
        "step_kinds": steps.kinds_top(2 * args.n),
        "collector_cpu_alternating_ms": [round(x * 1000, 1) for x in gc_alternating],
        "blocks": args.blocks,
        "settle_seconds": args.settle,
        "block_cpu_off_us": statistics.median(block_cpu["off"]) * 1e6,
        "block_cpu_enforce_us": statistics.median(block_cpu["enforce"]) * 1e6,
        "block_cpu_added_us": (statistics.median(block_cpu["enforce"]) - statistics.median(block_cpu["off"])) * 1e6,
        "block_p50_off_ms": statistics.median(block_p50["off"]) * ms,
        "block_p99_off_ms": statistics.median(block_p99["off"]) * ms,
        "block_p99_enforce_ms": statistics.median(block_p99["enforce"]) * ms,
        "block_loop_off_us": statistics.median(block_loop["off"]) * 1e6,
        "block_loop_enforce_us": statistics.median(block_loop["enforce"]) * 1e6,
        "block_steps_added": _steps_added(block_kinds, args.n * args.blocks),
        "block_gc_off_us": statistics.median(block_gc["off"]) * 1e6,
        "block_gc_enforce_us": statistics.median(block_gc["enforce"]) * 1e6,
        "block_p50_enforce_ms": statistics.median(block_p50["enforce"]) * ms,
        "block_full_collections_off": block_full["off"],
        "block_full_collections_enforce": block_full["enforce"],
        "full_collection_cpu_ms": statistics.median(full_gc_cpu) * ms,
        "collector_tracked_objects": gc_walk[0],
        "collector_references": gc_walk[1],
        **({"profile": profile_text(profiler)} if profiler else {}),
        "evaluations_per_second": evals_s,
        "rule_evaluations_per_second": evals_s * 10,
        "decisions": {r["decision"]: int(r["n"]) for r in decisions},
    }


def report(r: dict[str, Any]) -> str:
    return "\n".join(
        [
            f"machine: {r['machine']}; {r['load_at_start']} at the start, {r['load']} at the end",
            r["durability"],
            f"caller's events in the window: {r['caller_events_in_window']} (loaded {r['events_loaded']} in {r['load_seconds']} s; window built in {r['window_build_seconds']} s)",
            f"auth.whoami over gRPC, {r['calls_per_side']} calls per side, alternating; the caller: "
            + ("a process of its own" if r["client"] == "process" else "the server's own event loop")
            + f"; the server's loop: {r['loop']}",
            f"  mode off      p50 {r['off_p50_ms']:.3f} ms   p99 {r['off_p99_ms']:.3f} ms",
            f"  mode enforce  p50 {r['enforce_p50_ms']:.3f} ms   p99 {r['enforce_p99_ms']:.3f} ms   (10 rules)",
            f"  added latency (per-pair enforce - off): p50 {r['added_p50_ms']:.3f} ms   p99 {r['added_p99_ms']:.3f} ms",
            f"  difference of quantiles:                p50 {r['p50_difference_ms']:.3f} ms   p99 {r['p99_difference_ms']:.3f} ms",
            f"  control, off against off (no gate on either side), per pair: p50 {r['control_added_p50_ms']:.3f} ms   "
            f"p99 {r['control_added_p99_ms']:.3f} ms;  difference of p99s {r['control_p99_difference_ms']:.3f} ms",
            f"  inside gate.check:                      p50 {r['gate_check_p50_ms']:.3f} ms   p99 {r['gate_check_p99_ms']:.3f} ms",
            f"  CPU inside gate.check (thread time):    p50 {r['gate_check_cpu_p50_us']:.1f} µs   p99 {r['gate_check_cpu_p99_us']:.1f} µs"
            f"   (+ the ledger observer feeding the window: p50 {r['observer_cpu_p50_us']:.1f} µs)",
            *(
                [
                    f"  the same, {r['direct_calls']} calls of gate.check in a row without gRPC (warm caches): p50 "
                    f"{r['direct_check_cpu_p50_us']:.1f} µs   p99 {r['direct_check_cpu_p99_us']:.1f} µs   "
                    f"(+ the observer: p50 {r['direct_observer_cpu_p50_us']:.1f} µs)"
                ]
                if "direct_check_cpu_p50_us" in r
                else []
            ),
            *([] if r["loop"] == "asyncio" else ["(the loop's steps are listed with --loop asyncio)"]),
            f"event-loop steps over {r['slow_step_ms']} ms of thread CPU during the alternating calls (what a call can wait behind); "
            f"the collector's CPU there: {r['collector_cpu_alternating_ms'][0]} ms young, {r['collector_cpu_alternating_ms'][1]} ms full:",
            *(f"  {s['n']:5d} steps  {s['total_ms']:7.1f} ms  max {s['max_ms']:5.1f} ms  {s['step']}" for s in r["slow_steps"]),
            "every event-loop step during the alternating calls, by what ran: steps and thread CPU per call (both sides' calls):",
            *(f"  {s['per_call']:5.2f} steps  {s['cpu_per_call_us']:7.1f} µs  {s['step']}" for s in r["step_kinds"]),
            f"in blocks of {r['calls_per_side']} calls of one side ({r['blocks']} per side, alternating; process CPU of every thread, "
            f"the {r['settle_seconds']} s after each block included):",
            f"  CPU per call: off {r['block_cpu_off_us']:.1f} µs, enforce {r['block_cpu_enforce_us']:.1f} µs, "
            f"added {r['block_cpu_added_us']:.1f} µs;  wall p50 off {r['block_p50_off_ms']:.3f} ms, enforce {r['block_p50_enforce_ms']:.3f} ms"
            f" (added {r['block_p50_enforce_ms'] - r['block_p50_off_ms']:+.3f}); p99 off {r['block_p99_off_ms']:.3f} ms, "
            f"enforce {r['block_p99_enforce_ms']:.3f} ms (added {r['block_p99_enforce_ms'] - r['block_p99_off_ms']:+.3f})",
            f"  of which the event loop's thread: off {r['block_loop_off_us']:.1f} µs, enforce {r['block_loop_enforce_us']:.1f} µs; "
            f"every other thread (chDB's, gRPC's core): off {r['block_cpu_off_us'] - r['block_loop_off_us']:.1f} µs, "
            f"enforce {r['block_cpu_enforce_us'] - r['block_loop_enforce_us']:.1f} µs",
            *(
                [
                    "  the loop's steps by what ran, thread CPU per call (off / enforce / added), the largest differences first:",
                    *(f"  {s['off_us']:7.1f} {s['enforce_us']:7.1f} {s['added_us']:+7.1f} µs  {s['step']}" for s in r["block_steps_added"]),
                ]
                if r["block_steps_added"]
                else ["  (the loop's steps by what ran: --block-steps)"]
            ),
            f"  of which the cyclic garbage collector, per call: off {r['block_gc_off_us']:.1f} µs, enforce {r['block_gc_enforce_us']:.1f} µs "
            f"(wall; full collections: off {r['block_full_collections_off']}, enforce {r['block_full_collections_enforce']})",
            f"one full collection with the window built: {r['full_collection_cpu_ms']:.1f} ms of thread CPU over "
            f"{r['collector_tracked_objects']} tracked objects holding {r['collector_references']} references",
            f"evaluator alone: {r['evaluations_per_second']:.0f} evaluations/s of 10 rules afresh ({r['rule_evaluations_per_second']:.0f} rule evaluations/s); "
            f"{r['evaluations_per_second_memo']:.0f}/s as the gate evaluates (standing verdict, each call's own row added)",
            f"decision rows written: {r['decisions']}",
            *([r["profile"]] if "profile" in r else []),
        ]
    )


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-n", type=int, default=3000, help="calls per side")
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--events", type=int, default=100_000, help="events of the caller in the ledger")
    p.add_argument("--eval-seconds", type=float, default=3.0)
    p.add_argument("--json", action="store_true")
    p.add_argument("--profile", action="store_true", help="cProfile (thread CPU) of gate.check on the enforce replica")
    p.add_argument("--blocks", type=int, default=2, help="blocks of -n calls per side for the CPU per call")
    p.add_argument(
        "--block-steps",
        action="store_true",
        help="list the blocks' loop steps by what ran (its clock reads add CPU to every step, so the blocks' own figures read high)",
    )
    p.add_argument("--settle", type=float, default=1.0, help="seconds after each block whose CPU it counts (deferred work)")
    p.add_argument("--direct", type=int, default=20_000, help="calls of gate.check in a row without gRPC, for its CPU with warm caches")
    p.add_argument("--slow-step-ms", type=float, default=0.5, help="report event-loop steps over this much thread CPU")
    p.add_argument("--gc-freeze", action="store_true", help="gc.freeze() once the window is built (an experiment)")
    p.add_argument(
        "--client",
        choices=("process", "loop"),
        default="process",
        help="the caller: a process of its own (default: how agents reach Loom), or the server's event loop (sessions 13-24)",
    )
    p.add_argument(
        "--loop",
        choices=("uvloop", "asyncio"),
        default="uvloop",
        help="the server's event loop: uvloop as `loom up` runs (default), or asyncio's, whose steps the bench can list",
    )
    p.add_argument("--client-of", help=argparse.SUPPRESS)  # the client process's own run: the two replicas' addresses, JSON
    add_durability_argument(p)
    a = p.parse_args()
    import uvloop

    if a.client_of:
        uvloop.run(client_process(json.loads(a.client_of)))
        sys.exit(0)
    result = uvloop.run(main(a)) if a.loop == "uvloop" else asyncio.run(main(a))
    print(json.dumps(result, indent=2) if a.json else report(result))
    exit_process(0)

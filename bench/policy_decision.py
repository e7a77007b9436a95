"""The live gate's decision alone, in process: bench/policy.py's 10 rules over its 10^5-event
window (built directly, no server, no store), one caller calling `auth.whoami` the way the gate
decides it, each call's own ledger row added to the window after it.

    .venv/bin/python bench/policy_decision.py [-n 5000]

Prints the thread CPU per decision (p50 / p99) and per row added, and the load it ran at. Run
against the previous code by putting its `services/policy` first on PYTHONPATH: without
`domain.standing` (before the standing verdict) it decides as that code's gate did, with the
rules' memo.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

from _machine import load, machine  # bench/ is on sys.path when a script runs
from policy import AGENT, OPS, rules


def loaded_window() -> tuple[list[Any], Any]:
    """bench/policy.py's 10 rules compiled, and a window shaped for them holding its ledger:
    10^5 events of the caller over the last 3,000 s and 5,000 exposures."""
    from loom_policy.domain.compiler import compile_rule
    from loom_policy.domain.history import Event, Exposure, Shape, Window
    from loom_policy.domain.parser import parse_rule
    from loom_policy.service.live_history import now_us

    compiled = [compile_rule(parse_rule(r, max_window_seconds=86400)[0]) for r in rules()]
    shape = Shape()
    for r in compiled:
        shape = shape.union(r.shape)
    now = now_us()
    w = Window(shape=shape, floor_us=now - 86400 * 10**6 - 10**6)
    rng = random.Random(7)
    names = [op for op, weight in OPS for _ in range(weight)]
    events = 100_000
    for i in range(events):  # as bench/policy.py loads the ledger
        op = names[i % len(names)]
        ts = now - 3000 * 10**6 + 3000 * 10**6 * i // events
        args = {"memory_key": f"notes/k{rng.randrange(1000)}"} if op.startswith("memory.") else {}
        w.add_event(Event(ts, "user:admin", AGENT, "", "", op, True, args, f"b{i}"))
    for i in range(5000):
        w.add_exposure(
            Exposure(now - 1000 * 10**6 + i * 10**5, "user:admin", AGENT, "", "", "memory.search", "memory", f"notes/k{i % 2000}")
        )
    return compiled, w


def main(n: int) -> str:
    from loom_policy.domain.compiler import Caller, EvalContext
    from loom_policy.domain.evaluator import evaluate
    from loom_policy.domain.history import Event
    from loom_policy.service.live_history import now_us

    decide: Callable[..., Any] | None
    try:
        from loom_policy.domain.standing import decide
    except ImportError:  # the previous code: the rules' memo alone
        decide = None
    compiled, w = loaded_window()
    caller = Caller("user:admin", AGENT)
    kept: dict[Any, Any] = {}
    decided: list[int] = []
    added: list[int] = []
    load_at_start = load()
    for k in range(n + 500):
        cpu = time.thread_time_ns()
        t = now_us()
        ctx = EvalContext(w, caller, t, {}, memo=True)
        v = decide(kept, compiled, ctx, op="auth.whoami", write_shaped=False, deployment_mode="enforce") if decide else None
        if v is None:
            v = evaluate(compiled, ctx, op="auth.whoami", write_shaped=False, deployment_mode="enforce", applying=True)
        cpu_decided = time.thread_time_ns()
        assert v.decision == "allow" and not v.errors, (v.determining_rules, v.errors)
        w.add_event(Event(t, "user:admin", AGENT, "", "", "auth.whoami", True, {}, f"e{k}"))
        if k >= 500:  # after a warm-up
            decided.append(cpu_decided - cpu)
            added.append(time.thread_time_ns() - cpu_decided)
    decided.sort()
    return "\n".join(
        [
            f"machine: {machine()}; {load_at_start} at the start, {load()} at the end",
            f"{'standing verdict' if decide else 'rules memo (previous code)'}: {n} decisions, thread CPU per decision "
            f"p50 {statistics.median(decided) / 1000:.1f} µs, p99 {decided[int(len(decided) * 0.99)] / 1000:.1f} µs; "
            f"per row added to the window p50 {statistics.median(added) / 1000:.1f} µs",
        ]
    )


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-n", type=int, default=5000, help="decisions timed")
    print(main(p.parse_args().n))

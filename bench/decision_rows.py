"""What the store spends inserting the gate's policy_decisions rows, by what a row holds:
the rows as the gate writes them today (each rule's outcome with its leaves' definitions:
path, op, comparison, threshold, window, operation, key) against the same rows with those
definitions left out (what a row would hold if each rule version's definitions were stored
once and referenced), in the same run, into one embedded store.

    .venv/bin/python bench/decision_rows.py [--rows 700] [--batches 8]

The rows are real: bench/policy.py's 10 rules decided over its 10^5-event window
(bench/policy_decision.py's `loaded_window`), each verdict rendered by the gate's own
`render.rules_stored` and encoded by the decision writer's `encode_row`, in batches of `--rows`
(the gate's flush, about a second of calls at bench/policy.py's rate). Prints bytes a row and
the process's CPU a row (every thread: chDB parses and writes on its own), both layouts
alternating, and their ratio. Nothing is decided about the layout here: it measures the lever.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import tempfile
from pathlib import Path
from typing import Any

import orjson
from _machine import load, machine  # bench/ is on sys.path when a script runs
from loom_core.process import exit_process
from policy import AGENT
from policy_decision import loaded_window

# A leaf in a stored outcome (render._rule_stored): path, op, holds, observed, cmp, threshold,
# within_seconds, operation, key, key_value, last_us, error. What a call changes: holds,
# observed, key_value, last_us, error.
_LEAF_VALUES = (2, 3, 9, 10, 11)


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _without_definitions(stored: str) -> str:
    """A row's `rules` value (a JSON string's text, as the gate splices it) with each leaf's
    definition fields left out."""
    outcomes = orjson.loads(orjson.loads(stored))
    for outcome in outcomes:
        outcome[6] = [[leaf[i] for i in _LEAF_VALUES] for leaf in outcome[6]]
    return orjson.dumps(orjson.dumps(outcomes).decode()).decode()


def verdict_rows(n: int) -> list[tuple[Any, ...]]:
    """`n` decision rows as the gate records them (DecisionAtoms), from real verdicts."""
    from loom_policy.domain.compiler import Caller, EvalContext
    from loom_policy.domain.evaluator import evaluate
    from loom_policy.domain.history import Event
    from loom_policy.service.live_history import now_us
    from loom_policy.service.render import rules_stored

    compiled, w = loaded_window()
    caller = Caller("user:admin", AGENT)
    out: list[tuple[Any, ...]] = []
    for k in range(n):
        t = now_us()
        v = evaluate(
            compiled, EvalContext(w, caller, t, {}), op="auth.whoami", write_shaped=False, deployment_mode="enforce", applying=True
        )
        v.settle()
        names_ = tuple(r.name for r in v.rules)
        call = ("org-bench", "main", "user:admin", AGENT, "", "", "auth.whoami", "rest", f"req-{k}")
        out.append(
            (
                *call,
                v.decision,
                v.would_enforce,
                v.mode,
                v.write_shaped,
                tuple(v.determining_rules),
                names_,
                v.latency_ms,
                t,
                "[]",
                rules_stored(v.rules),
            )
        )
        w.add_event(Event(t, "user:admin", AGENT, "", "", "auth.whoami", True, {}, f"e{k}"))
    return out


async def run(rows_a_batch: int, batches: int) -> str:
    from loom_core.store.base import run_migrations
    from loom_core.store.embedded import EmbeddedStore
    from loom_policy.store.decisions import TABLE, encode_row
    from loom_policy.store.schema import MIGRATIONS

    load_at_start = load()
    made = verdict_rows(rows_a_batch)
    slim = [(*a[:18], _without_definitions(a[18])) for a in made]
    store = EmbeddedStore.open(Path(tempfile.mkdtemp(prefix="loom-bench-rows-")) / "chdb", "bench")
    await run_migrations(store, MIGRATIONS)
    cpu: dict[str, list[float]] = {"today": [], "without definitions": []}
    size: dict[str, float] = {}
    for b in range(batches * 2 + 2):
        name = "today" if b % 2 == 0 else "without definitions"
        base = made if name == "today" else slim
        # Each batch its own request ids: an insert identical to an earlier one is deduplicated, not written.
        body = b"\n".join(encode_row((*a[:8], f"{a[8]}-{b}", *a[9:])) for a in base)
        size[name] = len(body) / len(base)
        before = _cpu()
        await store.insert_json_lines(TABLE, body)
        if b >= 2:  # after one warm-up insert of each
            cpu[name].append((_cpu() - before) / len(base) * 1e6)
    counted = await store.query("SELECT count() AS n FROM {db}.policy_decisions")
    await store.close()
    today, slim_cpu = statistics.median(cpu["today"]), statistics.median(cpu["without definitions"])
    return "\n".join(
        [
            f"machine: {machine()}; {load_at_start} at the start, {load()} at the end",
            f"{rows_a_batch} rows an insert, {batches} inserts of each layout, alternating ({counted[0]['n']} rows written)",
            f"today's rows:            {size['today']:7.0f} bytes a row, insert CPU {today:6.1f} µs a row (median)",
            f"without the definitions: {size['without definitions']:7.0f} bytes a row, insert CPU {slim_cpu:6.1f} µs a row (median)",
            f"ratio: {slim_cpu / today:.2f}x the CPU, {size['without definitions'] / size['today']:.2f}x the bytes",
        ]
    )


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=700, help="rows an insert (the gate's flush)")
    p.add_argument("--batches", type=int, default=8, help="inserts of each layout")
    a = p.parse_args()
    print(asyncio.run(run(a.rows, a.batches)))
    exit_process(0)

"""Policy decisions survive a crash: a replica's decision batches go to JetStream first, and
whichever replica's consumer fetches a batch inserts it, so a process killed right after its
publish loses none of them."""

from __future__ import annotations

import asyncio
import os
import sys
import textwrap

from loom_core import fastjson
from loom_core.bus import NatsServer
from loom_policy.store.decisions import DecisionAtoms, encode_row
from loom_runner.embedded import Instance

from tests.conftest import unique
from tests.policy.conftest import eventually

# A replica's decision writer that publishes one batch, then dies by SIGKILL: no shutdown, no
# final flush, nothing after the publish runs.
CRASHING_REPLICA = textwrap.dedent(
    """
    import asyncio, os, signal, sys
    from loom_core.bus import connect_bus
    from loom_policy.store.decisions import DecisionWriter

    async def main() -> None:
        bus = await connect_bus(sys.argv[1], name="crashing-replica")
        writer = DecisionWriter(store=None, flush_interval=3600, bus=bus)
        for i in range(5):
            writer.record((
                sys.argv[2], "ns", "user:a", "", "", "", "grants.set", "rest", f"req-{i}", "deny", True, "enforce",
                True, ("r",), ("r",), 0.1, 1796040000000000, "[]", '"[]"',
            ))
        await writer.flush()
        os.kill(os.getpid(), signal.SIGKILL)

    asyncio.run(main())
    """
)


async def test_decisions_published_before_a_crash_reach_the_table(enforce_stack: Instance, nats_server: NatsServer) -> None:
    org = unique("org")
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", CRASHING_REPLICA, nats_server.url, org, env={**os.environ})
    assert await proc.wait() == -9  # killed, not exited

    async def landed() -> bool:
        rows = await enforce_stack.runtime.store.query(
            "SELECT request_id FROM {db}.policy_decisions WHERE org = {org:String}", {"org": org}
        )
        return sorted(r["request_id"] for r in rows) == [f"req-{i}" for i in range(5)]

    # The surviving replica's consumer inserts the batch (once: the batch id dedups a redelivery).
    await eventually(landed, within=30)


async def test_a_flush_larger_than_one_message_lands_whole(enforce_stack: Instance, nats_server: NatsServer) -> None:
    """A flush of more rows than one JetStream message carries (max_payload, 1 MB by default)
    goes out as several batches: published whole, it was refused on every pass and never landed."""
    from loom_core.bus import connect_bus
    from loom_policy.store.decisions import DecisionWriter

    org = unique("org")
    bus = await connect_bus(nats_server.url, name="big-flush")
    try:
        # direct=False: through the stream, as with a ClickHouse server (embedded goes straight in)
        writer = DecisionWriter(store=enforce_stack.runtime.store, flush_interval=3600, bus=bus, direct=False)
        rules = "[" + ",".join(f'["rule-{i}","allow",false,"{"x" * 300}"]' for i in range(10)) + "]"
        n = 1_000
        assert n * len(rules) > bus.nc.max_payload
        for i in range(n):
            writer.record(_atoms(org, f"req-{i}", rules))
        await writer.flush()
        assert writer._buf == []  # every batch was taken
    finally:
        await bus.close()

    async def landed() -> bool:
        rows = await enforce_stack.runtime.store.query(
            "SELECT uniqExact(request_id) AS n, count() AS c FROM {db}.policy_decisions WHERE org = {org:String}", {"org": org}
        )
        return int(rows[0]["n"]) == n and int(rows[0]["c"]) == n

    await eventually(landed, within=60)


async def test_an_embedded_replica_inserts_its_flush_straight_in_as_one_batch(enforce_stack: Instance) -> None:
    """Embedded (the store's engine is this process's), as the ledger: a flush is one insert,
    however many messages it would take, and its rows are in the table when the flush returns."""
    from loom_policy.service.gate import PolicyGate
    from loom_policy.store.decisions import DecisionWriter

    org = unique("org")
    runtime = enforce_stack.runtime
    assert isinstance(runtime.gate, PolicyGate) and runtime.gate.decisions is not None
    assert runtime.gate.decisions.direct  # the gate's own writer
    assert runtime.bus is not None
    writer = DecisionWriter(store=runtime.store, flush_interval=3600, bus=runtime.bus)
    rules = "[" + ",".join(f'["rule-{i}","allow",false,"{"x" * 300}"]' for i in range(10)) + "]"
    n = 1_000
    lines = [encode_row(_atoms(org, f"req-{i}", rules)) for i in range(n)]
    assert sum(map(len, lines)) > runtime.bus.nc.max_payload and writer._batches(lines) == [lines]
    for i in range(n):
        writer.record(_atoms(org, f"req-{i}", rules))
    await writer.flush()
    rows = await enforce_stack.runtime.store.query(
        "SELECT uniqExact(request_id) AS n, count() AS c FROM {db}.policy_decisions WHERE org = {org:String}", {"org": org}
    )
    assert (int(rows[0]["n"]), int(rows[0]["c"])) == (n, n)


def _atoms(org: str, request_id: str, outcomes: str) -> DecisionAtoms:
    """_row as the gate records it (`ts` as epoch microseconds, the outcomes as a JSON string)."""
    ts = 1_796_040_000_000_000  # 2026-11-30 12:00:00 UTC
    return (
        org,
        "ns",
        "user:a",
        "",
        "",
        "",
        "grants.set",
        "rest",
        request_id,
        "deny",
        True,
        "enforce",
        True,
        ("r",),
        ("r",),
        0.1,
        ts,
        "[]",
        fastjson.dumps_str(outcomes),
    )


def _row(org: str) -> dict[str, object]:
    return {
        "ts": "2026-11-30 12:00:00.000000",
        "org": org,
        "namespace": "ns",
        "subject": "user:a",
        "agent": "",
        "user": "",
        "session": "",
        "op": "grants.set",
        "transport": "rest",
        "request_id": "req-1",
        "decision": "deny",
        "enforced": True,
        "mode": "enforce",
        "write_shaped": True,
        "determining_rules": ["r"],
        "rule_names": ["r"],
        "latency_ms": 0.1,
        "errors": "[]",
        "rules": "[]",
    }


async def test_a_redelivered_decision_batch_lands_once(enforce_stack: Instance) -> None:
    from loom_policy.store.decisions import insert_batch

    org = unique("org")
    row = _row(org)
    store = enforce_stack.runtime.store
    await insert_batch(store, fastjson.dumps(row), "batch-" + org)
    await insert_batch(store, fastjson.dumps(row), "batch-" + org)  # the consumer's redelivery of the same batch
    rows = await store.query("SELECT count() AS n FROM {db}.policy_decisions WHERE org = {org:String}", {"org": org})
    assert int(rows[0]["n"]) == 1


async def test_a_batch_the_previous_release_published_still_lands(enforce_stack: Instance) -> None:
    """Batches were `{"id": ..., "rows": [...]}` before they became the table's JSON lines; one
    still in the stream after an upgrade lands whole."""
    from loom_policy.store.decisions import insert_batch

    org = unique("org")
    rows = [{**_row(org), "request_id": f"req-{i}"} for i in range(3)]
    await insert_batch(enforce_stack.runtime.store, fastjson.dumps({"id": "batch-" + org, "rows": rows}), "batch-" + org)
    stored = await enforce_stack.runtime.store.query(
        "SELECT request_id, rules FROM {db}.policy_decisions WHERE org = {org:String} ORDER BY request_id", {"org": org}
    )
    assert [(r["request_id"], r["rules"]) for r in stored] == [(f"req-{i}", "[]") for i in range(3)]

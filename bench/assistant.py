"""The assistant bridge's cost: added latency to first byte and per chunk over a direct call of
the LibreChat emulator, and the citation check's time for 50 citations against 1.

    .venv/bin/python bench/assistant.py [--answers 20] [--chunks 40] [--rounds 3]

Starts an embedded Loom in a temp dir (nats-server child, chDB, every plane, the gateway) with
LOOM_ASSISTANT_LIBRECHAT_URL on the protocol-faithful LibreChat emulator of tests/assistant,
waits for the service-user setup, and mints a viewer token. Baseline: the emulator's agents API
called directly with the service key (stream, no tool call). Measured: the same answer through
POST /v1/assistant/chat/completions (step 1 refusals, the delegated token, the relay, the live
steps, the checks). The answer's script makes no tool call, so the figures are the bridge's own.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from _machine import add_durability_argument, durability, load, machine  # bench/ is on sys.path when a script runs
from loom_core.process import exit_process

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


async def _timed_stream(
    client: httpx.AsyncClient, url: str, body: dict[str, Any], headers: dict[str, str]
) -> tuple[float, list[float], float]:
    """(seconds to the first content byte, gaps between content chunks, seconds to the end)."""
    started = time.perf_counter()
    first = 0.0
    stamps: list[float] = []
    async with client.stream("POST", url, json=body, headers=headers) as r:
        r.raise_for_status()
        async for line in r.aiter_lines():
            if line.startswith("data: ") and '"content"' in line:
                now = time.perf_counter()
                if not first:
                    first = now - started
                stamps.append(now)
    gaps = [b - a for a, b in itertools.pairwise(stamps)]
    return first, gaps, time.perf_counter() - started


def _shipped_samples() -> tuple[list[str], list[str]]:
    """Ten pages of the shipped docs and ten shipped source files of more than two lines."""
    repo = Path(__file__).resolve().parents[1]
    pages = sorted(p.name for p in (repo / "docs").glob("*.md"))[:10]
    sources = [
        p.relative_to(repo).as_posix() for p in sorted((repo / "core" / "loom_core").glob("*.py")) if len(p.read_text().splitlines()) > 2
    ]
    return pages, sources[:10]


async def main(answers: int, chunks: int, rounds: int, sync_interval: str) -> None:
    from loom_assistant.domain import citations as cit
    from loom_assistant.plane import AssistantPlane
    from loom_assistant.service.checks import AnswerScope
    from loom_core.bus import NatsServer
    from loom_core.chain.ledger import ledger_row
    from loom_core.settings import Settings
    from loom_core.store.embedded import EmbeddedStore
    from loom_gateway.identity import bootstrap_org
    from loom_runner.embedded import start_instance
    from loom_runner.http import HttpServer

    from tests.assistant.emulator import Emulator, Turn

    async def script(turn: Turn) -> None:
        for i in range(chunks):
            await turn.say(f"word{i} ")

    tmp = Path(tempfile.mkdtemp(prefix="loom-bench-assistant-"))
    emu = Emulator(loom_url="", script=script)
    emu_server = HttpServer(emu.app())
    await emu_server.start()
    emu_url = f"http://127.0.0.1:{emu_server.port}"
    settings = Settings(
        data_dir=tmp, jwt_secret="bench-secret-0123456789abcdef0123456789", http_port=0, ledger_flush_interval_seconds=0.05,
        rate_chat_per_minute=1_000_000,  # the chat's own rate class would cut the rounds short
        plane_overrides={
            "assistant_librechat_url": emu_url, "assistant_setup_retry_s": 0.05, "assistant_concurrent_answers": 1000,
            "default_daily_cost_cap_usd": 1e9,
        },
    )  # fmt: skip
    store = EmbeddedStore.open(tmp / "chdb", "loom")
    async with NatsServer(tmp / "nats", sync_interval=sync_interval) as nats:
        inst = await start_instance(settings, store=store, nats_url=nats.url)
        emu.loom_url = inst.base_url
        plane = next(p for p in inst.planes if isinstance(p, AssistantPlane))
        setup = plane.setup
        assert setup is not None, "the assistant plane's setup runs when LibreChat's URL is set (the emulator's)"
        async with asyncio.timeout(30):
            await setup.wait_ready()
        row = setup.row
        assert row is not None, "wait_ready returns once the row holds its key and agent"
        admin, _ = await bootstrap_org(inst.runtime.identity, inst.runtime.codec, "bench", "ns", 3600)
        async with httpx.AsyncClient(base_url=inst.base_url, timeout=60) as c:
            minted = (await c.post("/v1/token.mint", json={"roles": {"ns": "viewer"}}, headers={"Authorization": f"Bearer {admin}"})).json()
            token = minted["token"]
            direct_body = {
                "model": row.agent_id,
                "messages": [{"role": "user", "content": "q"}],
                "parent_message_id": token,
                "stream": True,
            }
            bridge_body = {"model": "loom", "messages": [{"role": "user", "content": "q"}], "stream": True}
            direct_h = {"Authorization": f"Bearer {row.api_key}"}
            bridge_h = {"Authorization": f"Bearer {token}"}
            for _ in range(3):  # warm both paths
                await _timed_stream(c, f"{emu_url}/api/agents/v1/chat/completions", direct_body, direct_h)
                await _timed_stream(c, "/v1/assistant/chat/completions", bridge_body, bridge_h)
            results: dict[str, list[tuple[float, list[float], float]]] = {"direct": [], "bridge": []}
            for _ in range(rounds):
                for _ in range(answers):
                    results["direct"].append(await _timed_stream(c, f"{emu_url}/api/agents/v1/chat/completions", direct_body, direct_h))
                    results["bridge"].append(await _timed_stream(c, "/v1/assistant/chat/completions", bridge_body, bridge_h))

        def summary(kind: str) -> tuple[float, float, float]:
            rs = results[kind]
            return (
                statistics.median(r[0] for r in rs) * 1000,
                statistics.median(g for r in rs for g in r[1]) * 1000,
                statistics.median(r[2] for r in rs) * 1000,
            )

        d, b = summary("direct"), summary("bridge")
        print(f"machine: {machine()}; {load()}")
        print(durability(sync_interval))
        print(f"answers: {answers * rounds} per path, {chunks} content chunks each, medians")
        print(f"first byte   direct {d[0]:7.2f} ms   bridge {b[0]:7.2f} ms   added {b[0] - d[0]:+7.2f} ms   ratio {b[0] / d[0]:.2f}x")
        print(f"per chunk    direct {d[1]:7.3f} ms   bridge {b[1]:7.3f} ms   added {b[1] - d[1]:+7.3f} ms")
        print(f"whole answer direct {d[2]:7.2f} ms   bridge {b[2]:7.2f} ms   (bridge includes the end checks and ledger wait)")

        # The citation check: 50 citations verified against this run's rows, against 1.
        run_id = "bench-run"
        subject = inst.runtime.codec.decode(token).sub
        keys = [f"notes/k{i}" for i in range(50)]
        await store.insert(
            "{db}.memory_exposures",
            [
                {"ts": "2026-01-01 00:00:00", "org": "bench", "namespace": "ns", "subject": subject, "agent": "", "user": "", "session": "",
                 "run_id": run_id, "op": "memory.get", "kind": "memory", "key": k, "request_id": "r"}
                for k in keys
            ],
        )  # fmt: skip
        task_rows = [
            ledger_row(org="bench", namespace="ns", subject=subject, agent="", user="", session="", op="task.get", transport="mcp",
                       run_id=run_id, consumer="loom-assistant", ok=True, error_code="", latency_ms=1, args={"task_id": f"t{i}"},
                       out_hits=1, token_id="t", request_id="r", write_shaped=False)
            for i in range(25)
        ]  # fmt: skip
        await store.insert("{db}.agent_events", task_rows)
        scope = AnswerScope("bench", "ns", subject, token, time.time())
        many = " ".join([f"[memory:{k}@v1]" for k in keys[:25]] + [f"[task:t{i}]" for i in range(25)])
        # Every kind: 15 memory, 15 task, 10 doc (the shipped docs, through help.verify) and 10
        # code (not checked: spec 000 leaves code citations to a code index Loom does not have).
        pages, sources = await asyncio.to_thread(_shipped_samples)
        mixed = " ".join(
            [f"[memory:{k}@v1]" for k in keys[:15]]
            + [f"[task:t{i}]" for i in range(15)]
            + [f"[doc:docs/{p}]" for p in pages]
            + [f"[code:{p}:1-2]" for p in sources]
        )
        one = "[memory:notes/k0@v1]"
        assert len(cit.parse(many)) == 50 and len(cit.parse(mixed)) == 50
        timings: dict[str, list[float]] = {"1": [], "50": [], "mixed": []}
        for _ in range(rounds * 3):
            for label, text in (("1", one), ("50", many), ("mixed", mixed)):
                t = time.perf_counter()
                v = await plane.checker.verdict(scope, run_id, text, streamed=False)
                timings[label].append(time.perf_counter() - t)
                assert all(c.verified for c in v.checked), [(c.citation.text, c.reason) for c in v.checked if not c.verified]
        m1, m50, mmix = (statistics.median(timings[k]) * 1000 for k in ("1", "50", "mixed"))
        print(f"citation check  1 citation {m1:7.2f} ms   50 citations {m50:7.2f} ms   ratio {m50 / m1:.2f}x   (bound: 10 s)")
        print(f"citation check  50 of every kind (15 memory, 15 task, 10 doc, 10 code) {mmix:7.2f} ms   ratio {mmix / m1:.2f}x")
        await inst.stop()
    await emu_server.stop()


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    p = argparse.ArgumentParser()
    p.add_argument("--answers", type=int, default=20)
    p.add_argument("--chunks", type=int, default=40)
    p.add_argument("--rounds", type=int, default=3)
    add_durability_argument(p)
    a = p.parse_args()
    asyncio.run(main(a.answers, a.chunks, a.rounds, a.sync_interval))
    exit_process(0)

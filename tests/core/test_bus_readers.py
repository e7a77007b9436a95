"""Every reader of the bus runs on the runtime's FastStream broker (`Bus.consume`), or for a core
NATS latency path `Bus.listen`: no module of core or a plane opens a nats-py subscription or
fetch loop of its own (issue 7)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.pyast import parse_file

ROOT = Path(__file__).resolve().parents[2]
READS = {"subscribe", "pull_subscribe", "pull_subscribe_bind", "subscribe_bind", "watch", "watchall", "fetch"}
# Per-request reads that are not consumers, each said why at the call.
ALLOWED = {
    # The op task.watch's service method (TaskWatching.watch), not a KV watch.
    ("services/tasks/loom_tasks/handlers.py", "watch"),
    # The broker's own fetch loop's inbox: FastStream's batch pull subscriber with a prompt fetch
    # (a subclass run by Bus.consume for Consumer(batch=True)) speaks JetStream's pull protocol
    # on an inbox of its own, not a reader of its own.
    ("core/loom_core/bus/batched.py", "subscribe"),
    # Bus.listen: a declared core NATS consumer read from nats-py's callback (the pull wake-ups;
    # the policy feed, on the connection without echo).
    ("core/loom_core/bus/nats.py", "subscribe"),
    # The inbox JetStream's answers to Loom's publishes come back on (one per connection).
    ("core/loom_core/bus/jspublish.py", "subscribe"),
    # A direct get's answers (task.updates and task.watch reading stored events): not a consumer.
    ("core/loom_core/bus/direct.py", "subscribe"),
}


def _direct_reads() -> list[tuple[str, int, str]]:
    found = []
    files = [*ROOT.joinpath("core/loom_core").rglob("*.py"), *ROOT.joinpath("services").glob("*/loom_*/**/*.py")]
    for path in files:
        rel = path.relative_to(ROOT).as_posix()
        for node in ast.walk(parse_file(path)):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            if node.func.attr in READS and (rel, node.func.attr) not in ALLOWED:
                found.append((rel, node.lineno, node.func.attr))
    return found


def test_no_module_reads_nats_outside_the_runtimes_broker() -> None:
    assert _direct_reads() == []

"""`bench/tasks.py --trace-wake`: where a wake round's time goes, step by step.

Stamps `time.perf_counter()` (CLOCK_MONOTONIC on Linux, the same clock in every process of the
machine) at each step of a wake round on the server's side, by wrapping the tasks planes' objects
in the bench's server process and in the second replica's own process, whose stamps come back
with its counters (`merge`); nothing in the planes changes: the create's handler, its state write,
the wake-up's publish, its read off the other replica's connection, its row handed to that
replica's queue (`WakeHub.apply`), the claim's state write and the
pull's answer. Rounds are told apart by the task's title (`w<round>`). The client stamps its
send and the two answers; `spans` gives each step's median over the rounds.
"""

from __future__ import annotations

import json
import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

#: (label, from, to): each step of a round, in the order the wake's path takes them.
STEPS = (
    ("in: client sent -> create handler", "sent", "create_in"),
    ("in: client sent -> the plane's chain (gRPC)", "sent", "chain_in"),
    ("in: the chain before the handler (token, role, rate)", "chain_in", "create_in"),
    ("create: checks before its write", "create_in", "create_write"),
    ("create's state write (JetStream answer)", "create_write", "create_written"),
    ("written -> wake-up published", "create_written", "wake_sent"),
    ("wake-up: publish -> other replica's apply", "wake_sent", "applied"),
    ("  of it: publish -> read off the other replica's connection", "wake_sent", "wake_read"),
    ("  of it: read -> apply (the subscriber)", "wake_read", "applied"),
    ("apply -> claim write starts", "applied", "claim_write"),
    ("written -> claim write starts (same replica)", "create_written", "claim_write"),
    ("claim's state write (JetStream answer)", "claim_write", "claim_written"),
    ("claim written -> pull answered", "claim_written", "pull_out"),
    ("out: pull answered -> client has it", "pull_out", "pull_answered"),
    ("create answered (handler) -> the chain answers", "create_out", "chain_out"),
    ("create answered (chain) -> client has it", "chain_out", "create_answered"),
    ("create's round trip (client)", "sent", "create_answered"),
    ("wake (client): create sent -> pull answered", "sent", "pull_answered"),
)


def wrap(obj: Any, name: str, traced: Any) -> None:
    """Put `traced` in place of `obj.name`. A slots dataclass has no instance dict, so its
    instance moves to a subclass (no new slots: the same layout) whose method calls `traced`."""
    try:
        setattr(obj, name, traced)
    except AttributeError:
        cls = type(obj)
        obj.__class__ = type(cls.__name__, (cls,), {"__slots__": (), name: lambda _self, *a, **k: traced(*a, **k)})


class WakeTrace:
    def __init__(self) -> None:
        self.stamps: dict[str, dict[str, float]] = defaultdict(dict)
        self._offer: Callable[..., None] | None = None

    def _stamp(self, title: str, step: str) -> None:
        if title.startswith("w"):
            self.stamps[title].setdefault(step, time.perf_counter())

    def install(self, plane: Any, chain: Any) -> None:
        """Wrap one tasks plane's create, state writes, wake-ups and pull, and its gRPC server's
        chain (instance attributes)."""
        posting, working, truth, hub = plane._handlers.posting, plane._handlers.working, plane.truth, plane.hub
        stamp = self._stamp

        call = chain.call

        async def traced_call(op: Any, inner: Any, request: Any, md: Any, validated: bool = False, **kw: Any) -> Any:
            title = str(getattr(request, "title", "")) if op.name == "task.create" else ""
            stamp(title, "chain_in")
            out = await call(op, inner, request, md, validated, **kw)
            stamp(title, "chain_out")
            return out

        chain.call = traced_call

        nc = plane.runtime.bus.nc
        process_msg = nc._process_msg

        async def traced_process_msg(sid: int, subject: bytes, reply: bytes, data: bytes, headers: Any) -> None:
            if subject.startswith(b"loom.task_wake.") and not data.startswith(hub._prefix):
                org, inbox = subject.decode().split(".")[2:4]
                if (org, inbox) in hub.queues:
                    for op in json.loads(data).get("ops", []):
                        if op.get("op") == "ready":
                            stamp(str(op["row"].get("title", "")), "wake_read")
            await process_msg(sid, subject, reply, data, headers)

        nc._process_msg = traced_process_msg

        create = posting.create

        async def traced_create(ctx: Any, req: Any) -> Any:
            stamp(req.title, "create_in")
            out = await create(ctx, req)
            stamp(req.title, "create_out")
            return out

        write = truth.write

        async def traced_write(row: Any, event: Any, last: int) -> int:
            step = "create" if not last else "claim" if row.status == "in_progress" else ""
            if step:
                stamp(row.title, f"{step}_write")
            rev: int = await write(row, event, last)
            if step:
                stamp(row.title, f"{step}_written")
            return rev

        publish = hub._publish

        async def traced_publish(org: str, inbox: str, ops: list[dict[str, Any]]) -> None:
            for op in ops:
                if op.get("op") == "ready":
                    stamp(str(op["row"].get("title", "")), "wake_sent")
            await publish(org, inbox, ops)

        pull = working.pull

        async def traced_pull(*args: Any, **kwargs: Any) -> Any:
            rows = await pull(*args, **kwargs)
            for row in rows:
                stamp(row.title, "pull_out")
            return rows

        for obj, name, traced in (
            (posting, "create", traced_create),
            (truth, "write", traced_write),
            (hub, "_publish", traced_publish),
            (working, "pull", traced_pull),
        ):
            wrap(obj, name, traced)
        from loom_tasks.service.wake import InboxQueue

        if self._offer is None:
            # `WakeHub.apply` hands another replica's row to its queue (whichever reader calls it).
            self._offer = offer = InboxQueue.offer

            def traced_offer(q: Any, row: Any, revision: int = 0, *, remote: bool = False, promised: bool = False) -> None:
                if remote:
                    stamp(row.title, "applied")
                offer(q, row, revision, remote=remote, promised=promised)

            InboxQueue.offer = traced_offer  # type: ignore[method-assign,assignment]

    def merge(self, stamps: dict[str, dict[str, float]]) -> None:
        """Another process's stamps (a replica of its own: CLOCK_MONOTONIC is the machine's), each
        step's first stamp kept."""
        for title, steps in stamps.items():
            mine = self.stamps[title]
            for step, at in steps.items():
                mine[step] = min(at, mine.get(step, at))

    def spans(self, client_rounds: list[dict[str, Any]]) -> list[tuple[str, float, int]]:
        """(step, p50 ms, rounds that took it) for every step some round took; `client_rounds` are
        the client's stamps of each round (its title, `sent`, `create_answered`, `pull_answered`)."""
        for r in client_rounds:
            self.stamps[r["title"]].update({k: v for k, v in r.items() if k != "title"})
        out = []
        for label, start, end in STEPS:
            # A round woken by another replica's wake-up took the step from its write through `applied`.
            rounds = [
                s
                for s in self.stamps.values()
                if start in s and end in s and not (start == "create_written" and end == "claim_write" and "applied" in s)
            ]
            took = [s[end] - s[start] for s in rounds]
            if took:
                out.append((label, statistics.median(took) * 1000, len(took)))
        return out

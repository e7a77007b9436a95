"""The spec's Python examples ("Register an inbox", "Post a task", "Pull, work, finish", "Follow
the outcome"), run as written through the SDK against a running Loom. docs/tasks.md carries the
same text, checked here too."""

from __future__ import annotations

import asyncio
import re
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from loom import Agent
from loom_core.identity.tokens import Principal, new_token_id
from loom_gateway.identity import bootstrap_org
from loom_runner.embedded import Instance

# Verbatim from spec 003, "Task inbox".
SPEC: dict[str, str] = {
    "register": """from loom import Agent

async with Agent(org="acme", namespace="private", agent="admin", api_key=ADMIN_TOKEN) as a:
    await a.tasks.register_inbox(
        "private-bot",
        owner_agent="private-bot",
        posters=["sa:public-bot"],  # may post without holding the namespace
        accept_disclosure=["confidential", "internal"],
        default_lease_seconds=1800,
        max_attempts=3,
    )
    await a.tasks.set_policy(
        "private-bot",
        poster="sa:public-bot",
        kind="security_finding",
        mode="review",
        require_evidence=["inputs.finding_id", "inputs.test"],
    )
    await a.tasks.set_policy("private-bot", poster="sa:public-bot", kind="*", mode="deny")
""",
    "post": """async with Agent(org="acme", namespace="public", agent="public-bot", api_key=PUBLIC_TOKEN) as a:
    out = await a.tasks.create(
        "private-bot",  # the target inbox
        kind="security_finding",
        title="Out-of-bounds read in the JSON reader",
        brief={
            "objective": "confirm and file in the private repository",
            "inputs": {"finding_id": "f-77", "test": "json_oob.sql"},
        },
        disclosure="confidential",
        idempotency_key="f-77",  # a retried create lands once
    )
    out["task"]["status"]  # "triage", or "todo" when the poster is trusted
""",
    "work": """async with Agent(org="acme", namespace="private", agent="private-bot", api_key=PRIVATE_TOKEN) as a:
    async for task in a.tasks.stream("private-bot", kinds=["security_finding"]):
        fence = task["fence"]
        try:
            result = await work(
                task["brief"], heartbeat=lambda: a.tasks.heartbeat(task["task_id"], fence=fence)
            )
            await a.tasks.complete(task["task_id"], fence=fence, outcome={"issue_url": result.url})
        except Exception as e:
            await a.tasks.fail(task["task_id"], fence=fence, reason=str(e)[:500])
""",
    "follow": """upd = await a.tasks.updates(since_seq=cursor, wait_seconds=30)
for ev in upd["events"]:  # accepted, claimed, done, wont_do, blocked, ...
    reconcile(ev)
if upd["events"]:
    cursor = upd["next_seq"]  # save only after reconcile succeeds
""",
}


class StopWorker(BaseException):
    pass


DOC = Path(__file__).resolve().parents[2] / "docs" / "tasks.md"


def doc_examples() -> dict[str, str]:
    text = DOC.read_text()
    found = re.findall(r"<!-- example: (\w+) -->\n```python\n(.*?)```", text, flags=re.S)
    return dict(found)


async def run(code: str, params: tuple[str, ...] = (), /, **names: Any) -> dict[str, Any]:
    """Run an example as written: its lines become the body of an async function."""
    source = f"async def __example__({', '.join(params)}):\n{textwrap.indent(code, '    ')}\n    return locals()\n"
    scope: dict[str, Any] = dict(names)
    exec(compile(source, "<spec example>", "exec"), scope)
    result = await scope["__example__"](*(names[p] for p in params))
    return dict(result)


def test_docs_carry_the_spec_examples_verbatim() -> None:
    assert doc_examples() == SPEC


@pytest.fixture
async def acme(tasks_a: Instance, transport: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The spec's cast in org "acme": an admin, private-bot (writer on private), public-bot
    (writer on public only)."""
    if transport != "inproc":
        # The spec's examples name org "acme" and a fixed idempotency key, as written: they run
        # once per store (both transports share it); the ops they call run on both in the other tests.
        pytest.skip("the spec's examples run once per store, on the default transport")
    rt = tasks_a.runtime
    admin, _ = await bootstrap_org(rt.identity, rt.codec, "acme", "private", 3600)
    await rt.identity.create_namespace("acme", "public", "")
    tokens = {"ADMIN_TOKEN": admin}
    for name, ns in (("private-bot", "private"), ("public-bot", "public")):
        await rt.identity.set_grant("acme", ns, f"sa:{name}", "writer")
        await rt.auth.publish_grant_change("acme", f"sa:{name}")
        now = int(time.time())
        p = Principal(
            jti=new_token_id("test-"), sub=f"sa:{name}", org="acme", roles={ns: "writer"}, iat=now, exp=now + 3600, default_namespace=ns
        )
        tokens[f"{name.split('-')[0].upper()}_TOKEN"] = rt.codec.encode(p)
    monkeypatch.setenv("LOOM_URL", tasks_a.base_url)
    return tokens


async def test_the_spec_examples_run_as_written(acme: dict[str, str]) -> None:
    await run(doc_examples()["register"], ADMIN_TOKEN=acme["ADMIN_TOKEN"])

    posted = await run(doc_examples()["post"], Agent=Agent, PUBLIC_TOKEN=acme["PUBLIC_TOKEN"])
    task = posted["out"]["task"]
    assert posted["out"]["created"] is True and task["status"] == "triage"
    again = await run(doc_examples()["post"], Agent=Agent, PUBLIC_TOKEN=acme["PUBLIC_TOKEN"])
    assert again["out"]["created"] is False and again["out"]["task"]["task_id"] == task["task_id"]

    async with Agent(org="acme", namespace="private", agent="admin", api_key=acme["ADMIN_TOKEN"]) as admin:
        await admin.tasks.accept(task["task_id"], reason="a real finding")
        # A second finding whose work fails, so the example's except branch runs too.
        async with Agent(org="acme", namespace="public", agent="public-bot", api_key=acme["PUBLIC_TOKEN"]) as pub:
            bad = (
                await pub.tasks.create(
                    "private-bot", kind="security_finding", title="flaky", brief={"inputs": {"finding_id": "f-78", "test": "flaky.sql"}},
                    disclosure="internal",
                )
            )["task"]  # fmt: skip
        await admin.tasks.accept(bad["task_id"])

        beats: list[str] = []

        async def work(brief: dict[str, Any], heartbeat: Any) -> SimpleNamespace:
            await heartbeat()
            if brief["inputs"]["finding_id"] == "stop":
                raise StopWorker()  # not an Exception: it leaves the example's loop
            beats.append(brief["inputs"]["finding_id"])
            if brief["inputs"]["finding_id"] == "f-78":
                raise RuntimeError("could not reproduce " + "x" * 1000)
            return SimpleNamespace(url="https://issues.example.com/private/77")

        worker = asyncio.create_task(run(doc_examples()["work"], Agent=Agent, PRIVATE_TOKEN=acme["PRIVATE_TOKEN"], work=work))

        async def finished() -> bool:
            a = (await admin.tasks.get(task["task_id"]))["task"]["status"]
            b = (await admin.tasks.get(bad["task_id"]))["task"]["status"]
            return a == "done" and b == "failed"

        deadline = time.monotonic() + 20
        while not await finished():
            assert time.monotonic() < deadline and not worker.done(), "the worker did not finish both tasks"
            await asyncio.sleep(0.05)
        # Stop the worker between pulls (a cancelled long poll would linger on the server).
        stop = await admin.tasks.create(
            "private-bot", kind="security_finding", title="stop", brief={"inputs": {"finding_id": "stop", "test": "-"}}
        )
        assert stop["task"]["status"] == "todo"
        with pytest.raises(StopWorker):
            await asyncio.wait_for(worker, 20)
        done = (await admin.tasks.get(task["task_id"]))["task"]
        failed = (await admin.tasks.get(bad["task_id"]))["task"]
    assert done["outcome"] == {"issue_url": "https://issues.example.com/private/77"}
    assert failed["reason"].startswith("could not reproduce") and len(failed["reason"]) == 500
    assert sorted(beats) == ["f-77", "f-78"]

    seen: list[dict[str, Any]] = []
    cursor = 0
    async with Agent(org="acme", namespace="public", agent="public-bot", api_key=acme["PUBLIC_TOKEN"]) as a:
        while not any(e["kind"] == "done" and e["task_id"] == task["task_id"] for e in seen):
            out = await run(doc_examples()["follow"], ("a", "cursor", "reconcile"), a=a, cursor=cursor, reconcile=seen.append)
            assert out["cursor"] >= cursor
            cursor = out["cursor"]
        # Nothing new: a short wait comes back empty and the cursor stays.
        assert (await a.tasks.updates(since_seq=cursor, wait_seconds=1))["events"] == []
    mine = [e for e in seen if e["task_id"] == task["task_id"]]
    assert [e["kind"] for e in mine] == ["created", "accepted", "claimed", "done"]
    assert mine[-1]["data"]["outcome"] == {"issue_url": "https://issues.example.com/private/77"}
    assert len({e["seq"] for e in seen}) == len(seen)

"""Batch ops: task.create_many, task.pull with max_tasks, task.complete_many — per-item answers,
one ledger row per item."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from loom_runner.embedded import Instance
from loom_tasks.domain.validate import MAX_JSON_BYTES

from tests.tasks.conftest import ApiError, Org, register


async def test_create_many_answers_each_item_and_keeps_one_task_per_key(org: Org) -> None:
    admin = await org.admin()
    await register(admin)
    owner = await org.owner()
    items: list[dict[str, Any]] = [
        {"inbox": "private-bot", "kind": "chore", "title": "a", "idempotency_key": "k-1"},
        {"inbox": "no-such-inbox", "kind": "chore", "title": "b"},
        {"inbox": "private-bot", "kind": "chore", "title": "a again", "idempotency_key": "k-1"},
        # Refused by the plane, item by item (no schema can state a brief's encoded size).
        {"inbox": "private-bot", "kind": "chore", "title": "c", "brief": {"blob": "x" * (MAX_JSON_BYTES + 1)}},
        {"inbox": "private-bot", "kind": "chore", "title": "d"},
    ]
    out = (await owner("task.create_many", tasks=items))["results"]
    assert len(out) == 5
    assert out[1]["error"]["code"] == "RESOURCE_NOT_FOUND" and out[1]["error"]["http_status"] == 404
    assert out[3]["error"]["code"] == "VALIDATION_FAILED"
    assert out[0]["task"]["task_id"] == out[2]["task"]["task_id"]
    assert sorted([out[0].get("created", False), out[2].get("created", False)]) == [False, True]
    assert out[4]["created"] is True and out[4]["task"]["status"] == "todo"
    listed = (await owner("task.list", inbox="private-bot"))["tasks"]
    assert len(listed) == 2


async def test_create_many_naming_a_key_used_before_writes_the_others_and_answers_the_old_task(org: Org) -> None:
    # The batch's one atomic write is refused (the key's task exists): each create is written on its own.
    admin = await org.admin()
    await register(admin)
    owner = await org.owner()
    before = await owner("task.create", inbox="private-bot", kind="chore", title="first", idempotency_key="k-old")
    items = [
        {"inbox": "private-bot", "kind": "chore", "title": "new 1"},
        {"inbox": "private-bot", "kind": "chore", "title": "first again", "idempotency_key": "k-old"},
        {"inbox": "private-bot", "kind": "chore", "title": "new 2"},
    ]
    out = (await owner("task.create_many", tasks=items))["results"]
    assert [r.get("created", False) for r in out] == [True, False, True]
    assert out[1]["task"]["task_id"] == before["task"]["task_id"] and out[1]["task"]["title"] == "first"
    listed = (await owner("task.list", inbox="private-bot"))["tasks"]
    assert sorted(t["title"] for t in listed) == ["first", "new 1", "new 2"]


async def test_create_many_with_an_item_the_schema_refuses_is_refused_whole_and_writes_nothing(org: Org) -> None:
    admin = await org.admin()
    await register(admin)
    owner = await org.owner()
    items = [
        {"inbox": "private-bot", "kind": "chore", "title": "fine"},
        {"inbox": "private-bot", "kind": "chore", "title": "out of range", "priority": 9},
    ]
    with pytest.raises(ApiError) as refused:
        await owner("task.create_many", tasks=items)
    assert "422" in str(refused.value) and "tasks[1].priority" in str(refused.value)
    assert (await owner("task.list", inbox="private-bot"))["tasks"] == []


async def test_create_many_refuses_an_empty_or_oversized_batch(org: Org) -> None:
    admin = await org.admin()
    await register(admin)
    owner = await org.owner()
    await owner.refused(422, "VALIDATION_FAILED", "task.create_many", tasks=[])
    many = [{"inbox": "private-bot", "kind": "chore", "title": f"t{i}"} for i in range(101)]
    await owner.refused(422, "VALIDATION_FAILED", "task.create_many", tasks=many)


async def test_pull_claims_up_to_max_tasks_and_complete_many_answers_each_fence(org: Org, tasks_b: Instance) -> None:
    admin = await org.admin()
    await register(admin)
    owner = await org.owner()
    items = [{"inbox": "private-bot", "kind": "chore", "title": f"t{i}"} for i in range(100)]
    created = (await owner("task.create_many", tasks=items))["results"]
    assert all(r["created"] for r in created)
    got = (await owner("task.pull", inbox="private-bot", max_tasks=100))["tasks"]
    assert len(got) == 100 and len({g["task_id"] for g in got}) == 100
    done = [{"task_id": g["task_id"], "fence": g["fence"], "outcome": {"n": i}} for i, g in enumerate(got[:99])]
    done.append({"task_id": got[99]["task_id"], "fence": got[99]["fence"] + 1})  # a stale fence
    other = await org.owner(via=tasks_b)
    out = (await other("task.complete_many", tasks=done))["results"]
    assert [r["task"]["status"] for r in out[:99]] == ["done"] * 99
    assert out[99]["error"]["code"] == "TASK_FENCE_STALE" and "task" not in out[99]
    counts = (await owner("task.counts", inbox="private-bot"))["counts"]
    assert counts == {"done": 99, "in_progress": 1}


async def test_a_batch_writes_one_ledger_row_per_item(org: Org) -> None:
    admin = await org.admin()
    await register(admin)
    owner = await org.owner()
    items = [{"inbox": "private-bot", "kind": "chore", "title": f"t{i}"} for i in range(3)] + [{"inbox": "nope", "kind": "chore"}]
    await owner("task.create_many", tasks=items)
    rt = org.inst.runtime
    rows: list[dict[str, Any]] = []
    for _ in range(100):
        await rt.ledger.flush()
        rows = await rt.store.query(
            "SELECT op, ok, error_code FROM {db}.agent_events WHERE org = {org:String} AND op LIKE 'task.create%'", {"org": org.name}
        )
        if len(rows) >= 4:
            break
        await asyncio.sleep(0.05)
    assert sorted((r["op"], int(r["ok"]), r["error_code"]) for r in rows) == [
        ("task.create", 0, "RESOURCE_NOT_FOUND"),
        ("task.create", 1, ""),
        ("task.create", 1, ""),
        ("task.create", 1, ""),
    ]

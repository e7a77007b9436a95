"""Triage and repair over REST: accept, wont_do, unblock, resume, reopen, update, reassign."""

from __future__ import annotations

from tests.tasks.conftest import Api, Org, register


async def triaged(org: Org) -> tuple[Api, Api, Api, dict]:
    admin = await org.admin()
    await register(admin, posters=["sa:public-bot"])
    owner, public = await org.owner(), await org.outsider()
    t = (await public("task.create", inbox="private-bot", kind="chore", title="please"))["task"]
    assert t["status"] == "triage"
    return admin, owner, public, dict(t)


async def test_accept_moves_triage_to_todo_and_pull_gets_it(org: Org) -> None:
    _, owner, _, t = await triaged(org)
    out = (await owner("task.accept", task_id=t["task_id"], reason="looks real"))["task"]
    assert out["status"] == "todo"
    assert (await owner("task.pull", inbox="private-bot"))["tasks"][0]["task_id"] == t["task_id"]


async def test_poster_may_not_accept_its_own_task(org: Org) -> None:
    admin = await org.admin()
    await register(admin, posters=["sa:helper"])
    # A writer of the owner namespace whose task landed in triage by a review row.
    await admin("inbox.policy_set", inbox="private-bot", poster="user:writer", mode="review")
    writer = await org.member("user:writer", {org.private: "writer"})
    t = (await writer("task.create", inbox="private-bot", kind="chore", title="mine"))["task"]
    assert t["status"] == "triage"
    await writer.refused(403, "TASK_SELF_ACCEPT", "task.accept", task_id=t["task_id"])


async def test_outside_poster_may_not_accept_or_work(org: Org) -> None:
    _, _, public, t = await triaged(org)
    await public.refused(403, "AUTH_INSUFFICIENT", "task.accept", task_id=t["task_id"])
    await public.refused(404, "RESOURCE_NOT_FOUND", "task.pull", inbox="private-bot")


async def test_wont_do_from_triage_needs_a_reason(org: Org) -> None:
    _, owner, _, t = await triaged(org)
    await owner.refused(422, "VALIDATION_FAILED", "task.wont_do", task_id=t["task_id"])
    out = (await owner("task.wont_do", task_id=t["task_id"], reason="out of scope"))["task"]
    assert (out["status"], out["reason"]) == ("wont_do", "out of scope")


async def test_wont_do_ends_a_claim_and_its_fence(org: Org) -> None:
    _, owner, _, t = await triaged(org)
    await owner("task.accept", task_id=t["task_id"])
    got = (await owner("task.pull", inbox="private-bot"))["tasks"][0]
    await owner("task.wont_do", task_id=t["task_id"], reason="no")
    await owner.refused(409, "TASK_TERMINAL", "task.complete", task_id=t["task_id"], fence=got["fence"])


async def test_reopen_brings_failed_wont_do_cancelled_back(org: Org) -> None:
    _, owner, public, t = await triaged(org)
    await owner("task.wont_do", task_id=t["task_id"], reason="no")
    assert (await owner("task.reopen", task_id=t["task_id"], reason="yes after all"))["task"]["status"] == "todo"
    await public("task.cancel", task_id=t["task_id"], reason="withdrawn")
    assert (await owner("task.reopen", task_id=t["task_id"]))["task"]["status"] == "todo"
    got = (await owner("task.pull", inbox="private-bot"))["tasks"][0]
    await owner("task.fail", task_id=t["task_id"], fence=got["fence"], reason="broke")
    assert (await owner("task.reopen", task_id=t["task_id"]))["task"]["status"] == "todo"
    got = (await owner("task.pull", inbox="private-bot"))["tasks"][0]
    await owner("task.complete", task_id=t["task_id"], fence=got["fence"])
    await owner.refused(409, "TASK_TERMINAL", "task.reopen", task_id=t["task_id"])  # done is final


async def test_reopen_of_a_done_task_is_409_task_terminal(org: Org) -> None:
    _, owner, _, t = await triaged(org)
    await owner("task.accept", task_id=t["task_id"])
    got = (await owner("task.pull", inbox="private-bot"))["tasks"][0]
    await owner("task.complete", task_id=t["task_id"], fence=got["fence"])
    err = await owner.refused(409, "TASK_TERMINAL", "task.reopen", task_id=t["task_id"], reason="again")
    assert err["detail"]["status"] == "done"


async def test_resume_returns_a_deferred_task_early(org: Org) -> None:
    _, owner, _, t = await triaged(org)
    await owner("task.accept", task_id=t["task_id"])
    got = (await owner("task.pull", inbox="private-bot"))["tasks"][0]
    await owner("task.defer", task_id=t["task_id"], fence=got["fence"], resume_at="2099-01-01T00:00:00Z", reason="later")
    await owner.refused(409, "PRECONDITION_FAILED", "task.unblock", task_id=t["task_id"])
    assert (await owner("task.resume", task_id=t["task_id"]))["task"]["status"] == "todo"


async def test_update_with_if_match_version(org: Org) -> None:
    _, owner, _, t = await triaged(org)
    v = t["version"]
    out = (await owner("task.update", task_id=t["task_id"], if_match_version=v, title="better title", priority=1))["task"]
    assert (out["title"], out["priority"], out["version"], out["status"]) == ("better title", 1, v + 1, "triage")
    err = await owner.refused(409, "PRECONDITION_FAILED", "task.update", task_id=t["task_id"], if_match_version=v, title="stale")
    assert err["detail"]["version"] == v + 1
    await owner.refused(422, "VALIDATION_FAILED", "task.update", task_id=t["task_id"], if_match_version=v + 1)


async def test_update_keeps_a_claim_and_its_fence(org: Org) -> None:
    _, owner, _, t = await triaged(org)
    await owner("task.accept", task_id=t["task_id"])
    got = (await owner("task.pull", inbox="private-bot"))["tasks"][0]
    await owner("task.update", task_id=t["task_id"], if_match_version=got["version"], brief={"more": "context"})
    await owner("task.heartbeat", task_id=t["task_id"], fence=got["fence"])
    done = (await owner("task.complete", task_id=t["task_id"], fence=got["fence"]))["task"]
    assert done["status"] == "done" and done["brief"] == {"more": "context"}


async def test_reassign_hands_the_task_to_another_inbox(org: Org) -> None:
    admin, owner, _public, t = await triaged(org)
    await register(admin, inbox="other-bot", owner_agent="other-bot")
    await owner("task.accept", task_id=t["task_id"])
    got = (await owner("task.pull", inbox="private-bot"))["tasks"][0]
    out = (await owner("task.reassign", task_id=t["task_id"], to_inbox="other-bot", reason="theirs"))["task"]
    assert (out["inbox"], out["status"], out["poster"]) == ("other-bot", "todo", "sa:public-bot")
    await owner.refused(409, "TASK_FENCE_STALE", "task.complete", task_id=t["task_id"], fence=got["fence"])
    assert (await owner("task.pull", inbox="private-bot"))["tasks"] == []
    assert (await owner("task.pull", inbox="other-bot"))["tasks"][0]["task_id"] == t["task_id"]
    await owner.refused(404, "RESOURCE_NOT_FOUND", "task.reassign", task_id=t["task_id"], to_inbox="nowhere", reason="x")


async def test_reassign_refused_by_the_tasks_state_is_a_409_conflict(org: Org) -> None:
    """What only the task's state refuses (it is in that inbox already; the target does not take
    its disclosure) is a 409 PRECONDITION_FAILED, not a refusal of a well-formed request."""
    admin, owner, _public, t = await triaged(org)
    await register(admin, inbox="public-only", owner_agent="other-bot", accept_disclosure=["public_ok"])
    same = await owner.refused(409, "PRECONDITION_FAILED", "task.reassign", task_id=t["task_id"], to_inbox="private-bot", reason="x")
    assert same["detail"]["reason"] == "same_inbox"
    closed = await owner.refused(409, "PRECONDITION_FAILED", "task.reassign", task_id=t["task_id"], to_inbox="public-only", reason="x")
    assert (closed["detail"]["reason"], closed["detail"]["disclosure"], closed["detail"]["accepted"]) == (
        "disclosure",
        "internal",
        ["public_ok"],
    )

"""Spec 003 details: a claim by id honours not_before, each event carries its own reason, and a
poster's cancel of a held task is refused for good (not retryable) naming the holder."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tests.tasks.conftest import Org, eventually, register


def iso(seconds_from_now: float) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds_from_now)).isoformat().replace("+00:00", "Z")


async def test_claim_by_id_before_not_before_is_refused_with_the_time_it_opens(org: Org) -> None:
    admin = await org.admin()
    await register(admin)
    owner = await org.owner()
    opens = iso(3600)
    t = (await owner("task.create", inbox="private-bot", kind="chore", title="later", not_before=opens))["task"]
    err = await owner.refused(409, "PRECONDITION_FAILED", "task.claim", task_id=t["task_id"])
    assert err["detail"]["reason"] == "not_before"
    assert err["detail"]["not_before"] == t["not_before"]
    assert datetime.fromisoformat(err["detail"]["not_before"]) == datetime.fromisoformat(opens)
    assert 3500 < err["detail"]["retry_after_s"] <= 3600
    assert err["retryable"] is True  # it opens later
    # Nothing written: the task is still todo at its version, unclaimed.
    now = (await owner("task.get", task_id=t["task_id"]))["task"]
    assert (now["status"], now["version"], now["claimed_by"]) == ("todo", t["version"], "")
    # A task whose not_before has passed is claimed as any other.
    past = (await owner("task.create", inbox="private-bot", kind="chore", title="due", not_before=iso(-5)))["task"]
    claimed = (await owner("task.claim", task_id=past["task_id"]))["task"]
    assert claimed["status"] == "in_progress" and claimed["fence"] > 0


async def test_each_event_carries_its_own_reason(org: Org) -> None:
    admin = await org.admin()
    await register(admin, posters=["sa:public-bot"])
    owner = await org.owner()
    public = await org.outsider()
    t = (await public("task.create", inbox="private-bot", kind="chore", title="review me"))["task"]
    assert t["status"] == "triage"
    accepted = (await owner("task.accept", task_id=t["task_id"], reason="in scope for this sprint"))["task"]
    assert accepted["reason"] == "in scope for this sprint"
    held = (await owner("task.claim", task_id=t["task_id"]))["task"]
    assert held["reason"] == ""  # a claim gives none; the accept's is not carried along
    done = (await owner("task.complete", task_id=t["task_id"], fence=held["fence"], outcome={"ok": True}, reason="fixed in 4.2"))["task"]
    assert done["status"] == "done" and done["reason"] == "fixed in 4.2"
    events = (await owner("task.history", task_id=t["task_id"]))["events"]
    assert [(e["kind"], e["reason"]) for e in events] == [
        ("created", ""),
        ("accepted", "in scope for this sprint"),
        ("claimed", ""),
        ("done", "fixed in 4.2"),
    ]
    # The poster's cursor reads the same reasons.
    updates = (await public("task.updates", since_seq=0))["events"]
    assert [(e["kind"], e["reason"]) for e in updates if e["task_id"] == t["task_id"]] == [(e["kind"], e["reason"]) for e in events]


async def test_complete_without_a_reason_leaves_none_and_a_long_reason_is_refused(org: Org) -> None:
    admin = await org.admin()
    await register(admin)
    owner = await org.owner()
    t = (await owner("task.create", inbox="private-bot", kind="chore", title="t"))["task"]
    held = (await owner("task.claim", task_id=t["task_id"]))["task"]
    err = await owner.refused(422, "VALIDATION_FAILED", "task.complete", task_id=t["task_id"], fence=held["fence"], reason="x" * 2001)
    assert err["detail"]["field"] == "reason"
    assert (await owner("task.get", task_id=t["task_id"]))["task"]["status"] == "in_progress"
    done = (await owner("task.complete", task_id=t["task_id"], fence=held["fence"]))["task"]
    assert done["reason"] == ""
    # complete_many takes each item's own reason.
    a = (await owner("task.create", inbox="private-bot", kind="chore", title="a"))["task"]
    b = (await owner("task.create", inbox="private-bot", kind="chore", title="b"))["task"]
    ha = (await owner("task.claim", task_id=a["task_id"]))["task"]
    hb = (await owner("task.claim", task_id=b["task_id"]))["task"]
    out = await owner(
        "task.complete_many",
        tasks=[{"task_id": a["task_id"], "fence": ha["fence"], "reason": "first"}, {"task_id": b["task_id"], "fence": hb["fence"]}],
    )
    assert [r["task"]["reason"] for r in out["results"]] == ["first", ""]


async def test_a_released_task_claimed_again_does_not_carry_the_expiry_reason(org: Org) -> None:
    admin = await org.admin()
    await register(admin)
    owner = await org.owner()
    t = (await owner("task.create", inbox="private-bot", kind="chore", title="t"))["task"]
    await owner("task.claim", task_id=t["task_id"], lease_seconds=1)

    async def released() -> bool:
        return (await owner("task.get", task_id=t["task_id"]))["task"]["status"] == "todo"

    await eventually(released, within=15)
    again = (await owner("task.claim", task_id=t["task_id"]))["task"]
    assert again["reason"] == ""
    kinds = [(e["kind"], e["reason"]) for e in (await owner("task.history", task_id=t["task_id"]))["events"]]
    assert kinds[-2][0] == "released" and kinds[-2][1].startswith("lease expired")
    assert kinds[-1] == ("claimed", "")


async def test_a_posters_cancel_of_a_held_task_is_not_retryable_and_names_the_holder(org: Org) -> None:
    admin = await org.admin()
    await register(admin, posters=["sa:public-bot"])
    await admin("inbox.policy_set", inbox="private-bot", poster="sa:public-bot", kind="*", mode="auto")
    owner = await org.owner(agent="worker-7")
    public = await org.outsider()
    t = (await public("task.create", inbox="private-bot", kind="chore", title="t"))["task"]
    held = (await owner("task.claim", task_id=t["task_id"]))["task"]
    err = await public.refused(409, "PRECONDITION_FAILED", "task.cancel", task_id=t["task_id"], reason="not needed")
    assert err["retryable"] is False
    assert err["detail"]["reason"] == "claimed"
    assert (err["detail"]["claimed_by"], err["detail"]["claimed_agent"]) == ("sa:private-bot", "worker-7")
    assert "sa:private-bot" in err["message"]
    # Nothing written: still held under the same fence.
    now = (await owner("task.get", task_id=t["task_id"]))["task"]
    assert (now["status"], now["version"]) == ("in_progress", held["version"])
    # The owner may cancel it; the poster, once nobody holds it.
    await owner("task.fail", task_id=t["task_id"], fence=held["fence"], reason="flaky")
    await owner("task.reopen", task_id=t["task_id"], reason="try again")
    assert (await public("task.cancel", task_id=t["task_id"], reason="not needed"))["task"]["status"] == "cancelled"

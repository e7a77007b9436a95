"""Posting over REST: trust, the Refusal table, disclosure, evidence, idempotency, cancel."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from loom_core.bus import NatsServer
from loom_runner.embedded import Instance

from tests.tasks.conftest import Api, Org, eventually, register, retire, sweep_passes

SECURITY = {"objective": "confirm", "inputs": {"finding_id": "f-77", "test": "json_oob.sql"}}


async def setup_spec_inbox(org: Org) -> tuple[Api, Api, Api]:
    """The spec's "Register an inbox": public-bot may post security findings (review, with
    evidence) and nothing else."""
    admin = await org.admin()
    await register(
        admin, posters=["sa:public-bot"], accept_disclosure=["confidential", "internal"], default_lease_seconds=1800, max_attempts=3
    )
    await admin(
        "inbox.policy_set", inbox="private-bot", poster="sa:public-bot", kind="security_finding", mode="review",
        require_evidence=["inputs.finding_id", "inputs.test"],
    )  # fmt: skip
    await admin("inbox.policy_set", inbox="private-bot", poster="sa:public-bot", kind="*", mode="deny")
    return admin, await org.owner(), await org.outsider()


async def test_outside_poster_lands_in_triage_without_holding_the_namespace(org: Org) -> None:
    _, _, public = await setup_spec_inbox(org)
    out = await public(
        "task.create", inbox="private-bot", kind="security_finding", title="OOB read", brief=SECURITY, disclosure="confidential"
    )
    t = out["task"]
    assert out["created"] is True
    assert t["status"] == "triage"
    assert (t["poster"], t["poster_agent"], t["poster_namespace"], t["namespace"]) == (
        "sa:public-bot",
        "public-bot",
        org.public,
        org.private,
    )


async def test_writer_on_the_owner_namespace_posts_auto_with_no_row(org: Org) -> None:
    _admin, owner, _ = await setup_spec_inbox(org)
    out = await owner("task.create", inbox="private-bot", kind="chore", title="t")
    assert out["task"]["status"] == "todo"


async def test_anyone_else_posts_review_with_no_row(org: Org) -> None:
    admin = await org.admin()
    await register(admin, posters=["sa:helper"])
    helper = await org.member("sa:helper", {org.public: "writer"}, agent="helper")
    assert (await helper("task.create", inbox="private-bot", kind="chore", title="t"))["task"]["status"] == "triage"


async def test_policy_denies_this_poster_or_kind(org: Org) -> None:
    _, _, public = await setup_spec_inbox(org)
    err = await public.refused(403, "TASK_POSTER_DENIED", "task.create", inbox="private-bot", kind="chore", title="t")
    assert err["detail"]["kind"] == "chore"


async def test_may_not_post_but_reads_the_inbox_is_403(org: Org) -> None:
    await setup_spec_inbox(org)
    reader = await org.member("user:reader", {org.private: "viewer", org.public: "writer"}, namespace=org.public)
    await reader.refused(403, "AUTH_INSUFFICIENT", "task.create", inbox="private-bot", kind="chore", title="t")


async def test_may_neither_post_nor_read_is_404_like_an_unregistered_inbox(org: Org) -> None:
    await setup_spec_inbox(org)
    stranger = await org.member("sa:stranger", {org.public: "writer"})
    a = await stranger.refused(404, "RESOURCE_NOT_FOUND", "task.create", inbox="private-bot", kind="chore", title="t")
    b = await stranger.refused(404, "RESOURCE_NOT_FOUND", "task.create", inbox="no-such-inbox", kind="chore", title="t")
    assert a["message"].replace("private-bot", "X") == b["message"].replace("no-such-inbox", "X")


async def test_disclosure_not_accepted_is_422_with_the_accepted_values(org: Org) -> None:
    _, _, public = await setup_spec_inbox(org)
    err = await public.refused(
        422,
        "VALIDATION_FAILED",
        "task.create",
        inbox="private-bot",
        kind="security_finding",
        title="t",
        brief=SECURITY,
        disclosure="public_ok",
    )
    assert err["detail"]["accepted"] == ["confidential", "internal"]


async def test_brief_missing_required_evidence_is_422_naming_the_fields(org: Org) -> None:
    _, _, public = await setup_spec_inbox(org)
    err = await public.refused(
        422,
        "VALIDATION_FAILED",
        "task.create",
        inbox="private-bot",
        kind="security_finding",
        title="t",
        brief={"inputs": {"finding_id": "f-1"}},
    )
    assert err["detail"]["missing"] == ["inputs.test"]


async def test_agent_label_row_does_not_make_an_outsider_auto(org: Org) -> None:
    admin = await org.admin()
    await register(admin, posters=["sa:public-bot"])
    await admin("inbox.policy_set", inbox="private-bot", poster="public-bot", kind="*", mode="auto")
    public = await org.outsider()
    assert (await public("task.create", inbox="private-bot", kind="chore", title="t"))["task"]["status"] == "triage"
    # The same label on a writer of the owner namespace does grant auto.
    writer = await org.member("user:w", {org.private: "writer"}, agent="public-bot")
    assert (await writer("task.create", inbox="private-bot", kind="chore", title="t"))["task"]["status"] == "todo"


async def test_subject_row_auto_makes_an_outsider_auto(org: Org) -> None:
    admin = await org.admin()
    await register(admin, posters=["sa:public-bot"])
    await admin("inbox.policy_set", inbox="private-bot", poster="sa:public-bot", kind="*", mode="auto")
    public = await org.outsider()
    assert (await public("task.create", inbox="private-bot", kind="chore", title="t"))["task"]["status"] == "todo"


async def test_nothing_auto_accepts_a_triaged_task(org: Org, tasks_a: Instance) -> None:
    admin, owner, public = await setup_spec_inbox(org)
    await admin(
        "inbox.register", inbox="private-bot", owner_agent="private-bot", posters=["sa:public-bot"], triage_escalate_after_seconds=1
    )
    t = (await public("task.create", inbox="private-bot", kind="security_finding", title="t", brief=SECURITY))["task"]

    async def escalated() -> bool:
        return bool((await owner("task.get", task_id=t["task_id"]))["task"]["escalated_time"])

    await eventually(escalated, within=10)  # the sweep ran on it, past its escalation time
    await sweep_passes(2)  # and ran again since
    got = (await owner("task.get", task_id=t["task_id"]))["task"]
    assert got["status"] == "triage"
    assert (await owner("task.pull", inbox="private-bot"))["tasks"] == []


# --- idempotency ------------------------------------------------------------------------------


async def test_idempotency_key_stores_one_task_and_only_the_first_says_created(org: Org) -> None:
    admin = await org.admin()
    await register(admin)
    owner = await org.owner()
    a = await owner("task.create", inbox="private-bot", kind="chore", title="t", idempotency_key="k-1")
    b = await owner("task.create", inbox="private-bot", kind="chore", title="t", idempotency_key="k-1")
    assert a["created"] is True and b["created"] is False
    assert a["task"]["task_id"] == b["task"]["task_id"]


async def test_another_posters_same_key_stores_its_own_task(org: Org) -> None:
    admin = await org.admin()
    await register(admin)
    owner = await org.owner()
    other = await org.member("user:other", {org.private: "writer"})
    a = await owner("task.create", inbox="private-bot", kind="chore", title="t", idempotency_key="same")
    b = await other("task.create", inbox="private-bot", kind="chore", title="t", idempotency_key="same")
    assert a["created"] and b["created"] and a["task"]["task_id"] != b["task"]["task_id"]


async def test_racing_creates_with_one_key_store_one_task(org: Org, tasks_b: Instance) -> None:
    admin = await org.admin()
    await register(admin)
    owners = [await org.owner(), await org.owner(via=tasks_b)]
    results = await asyncio.gather(
        *(owners[i % 2]("task.create", inbox="private-bot", kind="chore", title="race", idempotency_key="race-1") for i in range(50))
    )
    assert len({r["task"]["task_id"] for r in results}) == 1
    assert sum(1 for r in results if r["created"]) == 1
    listed = await owners[0]("task.list", inbox="private-bot", limit=100)
    assert len(listed["tasks"]) == 1


async def test_a_finished_idempotent_task_that_left_nats_still_answers_its_key(org: Org) -> None:
    admin = await org.admin()
    await register(admin)
    owner = await org.owner()
    first = await owner("task.create", inbox="private-bot", kind="chore", title="once", idempotency_key="retired-1")
    t = first["task"]
    got = (await owner("task.pull", inbox="private-bot"))["tasks"][0]
    await owner("task.complete", task_id=t["task_id"], fence=got["fence"])
    # Retire it from NATS (a sweep with no retention), then create with the same key again.
    await retire(org, t["task_id"])
    again = await owner("task.create", inbox="private-bot", kind="chore", title="once", idempotency_key="retired-1")
    assert again["created"] is False and again["task"]["task_id"] == t["task_id"] and again["task"]["status"] == "done"


async def test_create_is_503_when_the_lease_store_does_not_answer(
    org: Org, make_instance: Callable[..., Awaitable[Instance]], tmp_path: object
) -> None:
    from pathlib import Path

    async with NatsServer(Path(str(tmp_path)) / "nats-down") as own_nats:
        # Its own bus, so its sweep (which would judge the shared store's tasks by lease rows it
        # cannot see) and webhook consumer stay off; the lease request's wait for an answer from
        # the stopped bus is cut to half a second.
        inst = await make_instance(
            nats_url=own_nats.url, task_lease_sweep_enabled=False, task_webhook_deliver_enabled=False, nats_request_timeout_seconds=0.5
        )
        admin = await org.admin(via=inst)
        await register(admin)
        owner = await org.owner(via=inst)
        await owner("task.create", inbox="private-bot", kind="chore", title="warm-up")
    # The bus is gone now; the inbox and grants are cached, so the create reaches the lease.
    err = await owner.refused(503, "BACKEND_UNAVAILABLE", "task.create", inbox="private-bot", kind="chore", title="t", idempotency_key="k")
    assert err["retryable"] is True


# --- cancel -----------------------------------------------------------------------------------


async def test_poster_cancels_its_task_while_nobody_holds_it(org: Org) -> None:
    admin = await org.admin()
    await register(admin, posters=["sa:public-bot"])
    public = await org.outsider()
    t = (await public("task.create", inbox="private-bot", kind="chore", title="t"))["task"]
    out = await public("task.cancel", task_id=t["task_id"], reason="not needed")
    assert out["task"]["status"] == "cancelled" and out["task"]["reason"] == "not needed"
    await public.refused(409, "TASK_TERMINAL", "task.cancel", task_id=t["task_id"], reason="again")


async def test_poster_may_not_cancel_a_claimed_task_but_the_owner_may(org: Org) -> None:
    admin = await org.admin()
    await register(admin, posters=["sa:public-bot"])
    await admin("inbox.policy_set", inbox="private-bot", poster="sa:public-bot", mode="auto")
    public, owner = await org.outsider(), await org.owner()
    t = (await public("task.create", inbox="private-bot", kind="chore", title="t"))["task"]
    assert (await owner("task.pull", inbox="private-bot"))["tasks"][0]["task_id"] == t["task_id"]
    await public.refused(409, "PRECONDITION_FAILED", "task.cancel", task_id=t["task_id"], reason="stop")
    assert (await owner("task.cancel", task_id=t["task_id"], reason="stop"))["task"]["status"] == "cancelled"


async def test_poster_cancel_right_after_a_claim_on_another_replica_is_refused(org: Org, tasks_b: Instance) -> None:
    admin = await org.admin()
    await register(admin, posters=["sa:public-bot"])
    await admin("inbox.policy_set", inbox="private-bot", poster="sa:public-bot", mode="auto")
    public, owner_b = await org.outsider(), await org.owner(via=tasks_b)
    for i in range(5):
        t = (await public("task.create", inbox="private-bot", kind="chore", title=f"t{i}"))["task"]
        claimed = (await owner_b("task.claim", task_id=t["task_id"]))["task"]
        assert claimed["status"] == "in_progress"
        # The decision reads the task's state on NATS, where the claim already is.
        await public.refused(409, "PRECONDITION_FAILED", "task.cancel", task_id=t["task_id"], reason="stop")
        await owner_b("task.complete", task_id=t["task_id"], fence=claimed["fence"])


async def test_cancel_needs_a_reason(org: Org) -> None:
    admin = await org.admin()
    await register(admin)
    owner = await org.owner()
    t = (await owner("task.create", inbox="private-bot", kind="chore", title="t"))["task"]
    err = await owner.refused(422, "VALIDATION_FAILED", "task.cancel", task_id=t["task_id"])
    assert err["detail"]["field"] == "reason"


async def test_a_stranger_cannot_see_or_cancel_a_task(org: Org) -> None:
    admin = await org.admin()
    await register(admin)
    owner = await org.owner()
    t = (await owner("task.create", inbox="private-bot", kind="chore", title="t"))["task"]
    stranger = await org.member("sa:stranger", {org.public: "writer"})
    await stranger.refused(404, "RESOURCE_NOT_FOUND", "task.cancel", task_id=t["task_id"], reason="x")
    await stranger.refused(404, "RESOURCE_NOT_FOUND", "task.get", task_id=t["task_id"])

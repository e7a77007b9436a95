"""Inbox setup and reading over REST: register, policy_set, principals, list, policy_list,
deliveries, and who may call them."""

from __future__ import annotations

from loom_tasks.webhooks import encode_org

from tests.tasks.conftest import Org, register


async def test_register_applies_the_spec_defaults(org: Org) -> None:
    admin = await org.admin()
    out = await admin("inbox.register", inbox="private-bot")
    assert out["created"] is True
    ib = out["inbox"]
    assert (ib["owner_agent"], ib["namespace"]) == ("private-bot", org.private)
    assert (ib["default_lease_seconds"], ib["max_attempts"], ib["max_defers"], ib["triage_escalate_after_seconds"]) == (1800, 3, 5, 14400)
    assert ib["accept_disclosure"] == ["confidential", "internal", "public_ok"]
    assert ib["webhook_url"] == "" and ib["webhook_secret_ref"] == ""


async def test_register_again_updates_and_says_not_created(org: Org) -> None:
    admin = await org.admin()
    await register(admin)
    out = await admin("inbox.register", inbox="private-bot", owner_agent="bot-2", max_attempts=7)
    assert out["created"] is False and out["inbox"]["owner_agent"] == "bot-2" and out["inbox"]["max_attempts"] == 7


async def test_inbox_names_are_unique_in_the_org(org: Org) -> None:
    admin = await org.admin()
    await register(admin)
    other_admin = await org.member("user:other-admin", {org.public: "admin"})
    await other_admin.refused(409, "ALREADY_EXISTS", "inbox.register", inbox="private-bot")


async def test_register_needs_admin_on_the_namespace(org: Org) -> None:
    owner = await org.owner()
    await owner.refused(403, "AUTH_INSUFFICIENT", "inbox.register", inbox="private-bot")


async def test_register_refuses_bad_posters_disclosures_and_numbers(org: Org) -> None:
    admin = await org.admin()
    assert (await admin.refused(422, "VALIDATION_FAILED", "inbox.register", inbox="x", posters=["public-bot"]))["detail"][
        "field"
    ] == "posters[0]"
    err = await admin.refused(422, "VALIDATION_FAILED", "inbox.register", inbox="x", accept_disclosure=["secret"])
    assert err["detail"]["accepted"] == ["confidential", "internal", "public_ok"]
    await admin.refused(422, "VALIDATION_FAILED", "inbox.register", inbox="x", max_attempts=-1)
    await admin.refused(422, "VALIDATION_FAILED", "inbox.register", inbox="Bad Name")


async def test_register_takes_the_orgs_own_webhook_secret_and_refuses_another_orgs(org: Org) -> None:
    admin = await org.admin()
    own = f"LOOM_WEBHOOK_SECRET_{encode_org(org.name)}__HOOK"
    out = await admin("inbox.register", inbox="private-bot", webhook_url="https://hooks.example.com/loom", webhook_secret_ref=own)
    assert out["inbox"]["webhook_secret_ref"] == own
    err = await admin.refused(
        422, "VALIDATION_FAILED", "inbox.register", inbox="private-bot", webhook_url="https://hooks.example.com/loom",
        webhook_secret_ref="LOOM_WEBHOOK_SECRET_ACME__HOOK",
    )  # fmt: skip
    assert err["detail"]["field"] == "webhook_secret_ref"
    await admin.refused(422, "VALIDATION_FAILED", "inbox.register", inbox="private-bot", webhook_url="ftp://x", webhook_secret_ref=own)


async def test_policy_set_and_list(org: Org) -> None:
    admin = await org.admin()
    await register(admin)
    out = await admin(
        "inbox.policy_set",
        inbox="private-bot",
        poster="sa:public-bot",
        kind="security_finding",
        mode="review",
        require_evidence=["inputs.finding_id"],
    )
    assert out["policy"]["mode"] == "review"
    await admin("inbox.policy_set", inbox="private-bot", poster="sa:public-bot", mode="deny")
    viewer = await org.member("user:viewer", {org.private: "viewer"})
    rows = (await viewer("inbox.policy_list", inbox="private-bot"))["policies"]
    assert {(r["poster"], r["kind"], r["mode"]) for r in rows} == {
        ("sa:public-bot", "security_finding", "review"),
        ("sa:public-bot", "*", "deny"),
    }
    removed = await admin("inbox.policy_set", inbox="private-bot", poster="sa:public-bot", kind="*", remove=True)
    assert removed["removed"] is True
    assert len((await viewer("inbox.policy_list", inbox="private-bot"))["policies"]) == 1


async def test_policy_set_refuses_bad_mode_and_needs_admin(org: Org) -> None:
    admin = await org.admin()
    await register(admin)
    err = await admin.refused(422, "VALIDATION_FAILED", "inbox.policy_set", inbox="private-bot", poster="sa:x", mode="maybe")
    assert err["detail"]["accepted"] == ["deny", "review", "auto"]
    owner = await org.owner()
    await owner.refused(403, "AUTH_INSUFFICIENT", "inbox.policy_set", inbox="private-bot", poster="sa:x", mode="auto")


async def test_a_policy_change_applies_to_the_next_create(org: Org) -> None:
    admin = await org.admin()
    await register(admin, posters=["sa:public-bot"])
    public = await org.outsider()
    assert (await public("task.create", inbox="private-bot", kind="chore", title="t"))["task"]["status"] == "triage"
    await admin("inbox.policy_set", inbox="private-bot", poster="sa:public-bot", mode="auto")
    assert (await public("task.create", inbox="private-bot", kind="chore", title="t"))["task"]["status"] == "todo"
    await admin("inbox.policy_set", inbox="private-bot", poster="sa:public-bot", mode="deny")
    await public.refused(403, "TASK_POSTER_DENIED", "task.create", inbox="private-bot", kind="chore", title="t")


async def test_principals_lists_the_orgs_identities_for_admins(org: Org) -> None:
    admin = await org.admin()
    await org.outsider()
    await org.owner()
    out = await admin("inbox.principals")
    subjects = {p["subject"]: p["type"] for p in out["principals"]}
    assert subjects["sa:public-bot"] == "sa" and subjects["user:admin"] == "user"
    owner = await org.owner()
    await owner.refused(403, "AUTH_INSUFFICIENT", "inbox.principals")


async def test_inbox_list_shows_the_namespaces_inboxes_with_open_counts(org: Org) -> None:
    admin = await org.admin()
    own = f"LOOM_WEBHOOK_SECRET_{encode_org(org.name)}__HOOK"
    await register(admin, webhook_url="https://hooks.example.com/x", webhook_secret_ref=own)
    await register(admin, inbox="other-bot")
    owner = await org.owner()
    await owner("task.create", inbox="private-bot", kind="chore", title="t")
    listed = {i["inbox"]: i for i in (await owner("inbox.list"))["inboxes"]}
    assert set(listed) == {"private-bot", "other-bot"}
    assert listed["private-bot"]["counts"] == {"todo": 1}
    # The webhook settings are shown to admins only.
    assert listed["private-bot"]["webhook_url"] == ""
    assert {i["inbox"]: i for i in (await admin("inbox.list"))["inboxes"]}["private-bot"]["webhook_secret_ref"] == own


async def test_deliveries_is_admin_only_and_empty_without_a_webhook(org: Org) -> None:
    admin = await org.admin()
    await register(admin)
    assert (await admin("inbox.deliveries", inbox="private-bot"))["deliveries"] == []
    owner = await org.owner()
    await owner.refused(403, "AUTH_INSUFFICIENT", "inbox.deliveries", inbox="private-bot")

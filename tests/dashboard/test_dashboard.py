"""The dashboard in a real browser (Debian's chromium through Playwright) against a live
`./loom up`: sign-in with a login link, the Tasks page live and through every move a person
makes, drag between groups, a viewer's page, Policies, a Help deep link, sign-out. Each test
also takes the screenshots docs/dashboard.md shows."""

from __future__ import annotations

import re
import subprocess
import time
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from playwright.sync_api import expect

from tests.dashboard.conftest import NS, ROOT, Browser, Server, expect_console_error, requests_to, shoot

pytestmark = pytest.mark.slow

INBOX = "ops"
POSTER = "sa:agent-bot"


@pytest.fixture(scope="module")
def agent_token(server: Server) -> str:
    """An agent that posts to the `ops` inbox, whose posts wait for a person's review (triage)."""
    server.call("sa.create", name="agent-bot", role="writer")
    token = server.call("token.mint", subject=POSTER, roles={NS: "writer"}, default_namespace=NS, ttl_seconds=3600)["token"]
    server.call("inbox.register", inbox=INBOX, owner_agent="ops-bot", posters=[POSTER], description="Operations requests")
    server.call("inbox.policy_set", inbox=INBOX, poster=POSTER, kind="*", mode="review")
    return str(token)


def post_task(server: Server, token: str, title: str, **extra: Any) -> dict[str, Any]:
    return server.call("task.create", token=token, agent="agent-bot", inbox=INBOX, kind="chore", title=title, **extra)["task"]


def history_kinds(server: Server, task_id: str) -> list[str]:
    return [e["kind"] for e in server.call("task.history", task_id=task_id)["events"]]


def row(page: Any, title: str, scope: Any = None) -> Any:
    """The task row titled `title` (within `scope`, a group, when given)."""
    return (scope or page).get_by_role("listitem").filter(has=page.get_by_role("link", name=title, exact=True))


def group(page: Any, label: str) -> Any:
    return page.get_by_role("region", name=re.compile(rf"^{re.escape(label)}\b"))


def test_sign_in_with_a_login_link_opens_a_session_cookie(ui: Browser, server: Server) -> None:
    page = ui.page()
    page.goto(server.login_link("user:admin"))
    page.wait_for_url("**/tasks")
    assert page.get_by_test_id("subject").inner_text() == "user:admin"
    nav = page.get_by_role("navigation", name="Main")
    for name in ("Tasks", "Decisions", "Policies", "Help"):
        assert nav.get_by_role("link", name=name, exact=True).is_visible()
    assert page.get_by_role("searchbox", name="Search").is_visible()
    (cookie,) = [c for c in page.context.cookies() if c["name"] == "loom_session"]
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    # The code was used: the address bar no longer holds it.
    assert "code=" not in page.url
    # Keyboard: the first Tab stops are the skip link, then the navigation.
    page.locator("body").focus()
    focused = []
    for _ in range(6):
        page.keyboard.press("Tab")
        focused.append(page.evaluate("document.activeElement.textContent || document.activeElement.getAttribute('aria-label') || ''"))
    assert focused[:5] == ["Skip to content", "Tasks", "Decisions", "Policies", "Help"], focused
    shoot(page, "tasks-empty")


def test_a_task_an_agent_creates_appears_live_then_accept_start_mark_done(ui: Browser, server: Server, agent_token: str) -> None:
    page = ui.sign_in("user:admin")
    to_do = group(page, "To do")
    to_do.get_by_text("Nothing to do").wait_for()

    # The page follows the inbox's event stream (GET /v1/task/watch, the cookie alone) ...
    def watching() -> list[str]:
        return [u for u in requests_to(page, "/v1/task/watch") if f"inbox={INBOX}" in u]

    while not watching():
        page.wait_for_timeout(100)
    assert f"namespace={NS}" in watching()[0] and "start=now" in watching()[0]
    # ... and, while it is open and nothing happens, reads nothing again (no polling every second).
    page.wait_for_timeout(1_000)  # the reads the stream's opening asks for
    quiet = time.monotonic()
    page.wait_for_timeout(3_000)
    assert requests_to(page, "/v1/task.list", since=quiet) == [] and requests_to(page, "/v1/task.counts", since=quiet) == []
    posted = time.monotonic()
    task = post_task(server, agent_token, "Rotate the staging keys", brief={"why": "quarterly"})
    assert task["status"] == "triage"
    # No reload: the task's `created` event makes the page read the groups again.
    row(page, "Rotate the staging keys").wait_for(timeout=10_000)
    print(f"\ntask visible {time.monotonic() - posted:.2f}s after task.create")  # a measured figure, printed with -s
    assert requests_to(page, "/v1/task.list", since=posted)
    assert len(watching()) == 1  # one stream, kept open
    shoot(page, "tasks")

    row(page, "Rotate the staging keys").get_by_role("button", name="Accept", exact=True).click()
    row(page, "Rotate the staging keys").get_by_text("todo").wait_for()
    page.get_by_role("link", name="Rotate the staging keys").click()
    page.wait_for_url(f"**/tasks/{task['task_id']}")
    panel = page.get_by_role("complementary", name="Rotate the staging keys")
    panel.get_by_role("button", name="Start", exact=True).click()
    panel.get_by_test_id("task-status").filter(has_text="in_progress").wait_for()
    panel.get_by_role("list", name="Task history").get_by_text("claimed", exact=True).wait_for()
    # The move shows in its group at once, before the next read.
    row(page, "Rotate the staging keys", group(page, "In progress")).wait_for()
    shoot(page, "task-panel")

    # A reloaded page still holds the fence: Mark done works after a reload.
    page.reload()
    panel = page.get_by_role("complementary", name="Rotate the staging keys")
    # The open panel follows the task's events: an edit made elsewhere shows without a reload.
    version = server.call("task.get", task_id=task["task_id"])["task"]["version"]
    server.call("task.update", task_id=task["task_id"], if_match_version=version, title="Rotate the staging keys (agent)")
    page.get_by_role("complementary", name="Rotate the staging keys (agent)").wait_for(timeout=10_000)
    panel.get_by_role("list", name="Task history").get_by_text("updated", exact=True).wait_for()
    panel.get_by_role("button", name="Mark done", exact=True).click()
    panel.get_by_test_id("task-status").filter(has_text="done").wait_for()
    panel.get_by_role("list", name="Task history").get_by_text("done", exact=True).wait_for()

    kinds = history_kinds(server, task["task_id"])
    assert kinds == ["created", "accepted", "claimed", "updated", "done"], kinds
    events = server.call("task.history", task_id=task["task_id"])["events"]
    claimed = next(e for e in events if e["kind"] == "claimed")
    assert claimed["actor"] == "user:admin" and claimed["actor_agent"] == "loom-ui"
    assert claimed["data"].get("lease_seconds") == 86400


def test_drag_a_task_between_groups_dims_what_it_cannot_reach(ui: Browser, server: Server, agent_token: str) -> None:
    task = post_task(server, agent_token, "Drag me along")
    server.call("task.accept", task_id=task["task_id"])
    page = ui.sign_in("user:admin")
    source = row(page, "Drag me along")
    source.wait_for()
    target = group(page, "In progress")
    # Hold the row: Waiting cannot be reached from To do in one step and dims; In progress does not.
    source.hover()
    page.mouse.down()
    box = target.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + 40, steps=8)
    assert "dimmed" in (group(page, "Waiting").get_attribute("class") or "")
    assert "dimmed" not in (target.get_attribute("class") or "")
    shoot(page, "tasks-dragging")
    page.mouse.up()
    row(page, "Drag me along", target).wait_for()
    got = server.call("task.get", task_id=task["task_id"])["task"]
    assert got["status"] == "in_progress" and got["claimed_agent"] == "loom-ui"
    assert history_kinds(server, task["task_id"])[-1] == "claimed"


def test_a_viewer_sees_no_write_buttons_and_a_forged_write_is_refused(ui: Browser, server: Server, agent_token: str) -> None:
    task = post_task(server, agent_token, "Viewer looks only")
    server.call("grants.set", subject="user:vic", role="viewer")
    page = ui.sign_in("user:vic")
    the_row = row(page, "Viewer looks only")
    the_row.wait_for()
    for name in ("Accept", "Won't do", "Start", "Mark done", "Fail"):
        assert page.get_by_role("button", name=name, exact=True).count() == 0, name
    assert page.get_by_role("navigation", name="Main").get_by_role("link", name="Policies").count() == 0
    page.get_by_role("link", name="Viewer looks only").click()
    page.get_by_role("complementary", name="Viewer looks only").get_by_test_id("task-status").wait_for()
    assert page.get_by_role("button", name="Accept", exact=True).count() == 0
    shoot(page, "viewer")

    # The same write, forged with the viewer's own cookie and CSRF token: the server refuses it.
    session = page.request.get("/v1/session").json()
    forged = page.request.post(
        "/v1/task.accept",
        data={"task_id": task["task_id"]},
        headers={"X-Loom-CSRF": session["csrf_token"], "Origin": server.base_url, "X-Loom-Namespace": NS},
    )
    assert forged.status == 403, forged.text()
    assert forged.json()["error"]["code"] == "AUTH_INSUFFICIENT"
    assert server.call("task.get", task_id=task["task_id"])["task"]["status"] == "triage"


def test_create_a_policy_rule_dry_run_it_and_see_it_refuse(ui: Browser, server: Server, agent_token: str) -> None:
    page = ui.sign_in("user:admin")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Policies").click()
    page.wait_for_url("**/policies")
    assert page.get_by_test_id("policy-mode").text_content() == "enforce"
    page.get_by_role("button", name="New rule").click()
    form = page.get_by_role("form", name="New rule")
    form.get_by_label("Name", exact=True).fill("no-posts-to-frozen")
    form.get_by_label("Actions").fill("task.create")
    form.get_by_label("Condition (JSON)").fill(
        '{"op": "count_within", "within": "1h", "operation": "task.create", "cmp": "gte", "value": 0}'
    )
    form.get_by_label("Effect").select_option("forbid")
    form.get_by_role("button", name="Save rule").click()
    page.get_by_role("table", name="Rules").get_by_role("rowheader", name=re.compile("no-posts-to-frozen")).wait_for()

    dry = page.get_by_role("region", name="Dry run")
    dry.get_by_label("Operation").fill("task.create")
    dry.get_by_role("button", name="Check").click()
    verdict = page.get_by_test_id("dry-run-verdict")
    verdict.filter(has_text="Refused").wait_for()
    assert "no-posts-to-frozen" in verdict.inner_text()

    # The rule refuses the real call too, and the ledger shows it.
    r = httpx.post(
        f"{server.base_url}/v1/task.create",
        json={"inbox": INBOX, "kind": "chore", "title": "blocked"},
        headers={"Authorization": f"Bearer {agent_token}", "X-Loom-Namespace": NS},
        timeout=30,
    )
    assert r.status_code == 403, r.text
    # The gate writes its decision row in the background: wait until the ledger has it.
    for _ in range(300):
        denied = server.call("policy.decisions", decision="deny")["decisions"]
        if any("no-posts-to-frozen" in d["determining_rules"] for d in denied):
            break
        time.sleep(0.1)
    assert any("no-posts-to-frozen" in d["determining_rules"] for d in denied), denied
    ledger = page.get_by_role("region", name="Decisions ledger")
    ledger.get_by_label("Show").select_option("deny")
    ledger.get_by_role("table", name="Policy decisions").get_by_role("cell", name="no-posts-to-frozen").first.wait_for()
    shoot(page, "policies")
    # Delete it from the page, so the other tests' agent may post again.
    page.on("dialog", lambda d: d.accept())
    page.get_by_role("row", name=re.compile("no-posts-to-frozen")).get_by_role("button", name="Delete").click()
    page.get_by_text("No rules in").wait_for()
    assert server.call("policy.list")["rules"] == []


def test_a_policy_rule_the_server_refuses_shows_its_error_inline(ui: Browser, server: Server) -> None:
    page = ui.sign_in("user:admin")
    page.goto("/policies")
    page.get_by_role("button", name="New rule").click()
    form = page.get_by_role("form", name="New rule")
    form.get_by_label("Name", exact=True).fill("bad-window")
    form.get_by_label("Actions").fill("task.create")
    form.get_by_label("Condition (JSON)").fill('{"op": "formerly", "within": "forever"}')
    expect_console_error(page, r"status of 422")
    form.get_by_role("button", name="Save rule").click()
    alert = form.get_by_role("alert")
    alert.wait_for()
    assert "condition" in alert.inner_text() and "VALIDATION_FAILED" in alert.inner_text()
    form.get_by_label("Condition (JSON)").fill("{not json")
    form.get_by_role("button", name="Save rule").click()
    form.get_by_role("alert").filter(has_text="Not JSON").wait_for()


def test_a_help_deep_link_opens_the_page_at_its_section(ui: Browser, server: Server) -> None:
    outline = server.call("help.get", page="tasks.md")["outline"]
    section = next(o for o in outline if o["level"] == 2)
    page = ui.sign_in("user:admin")
    page.goto(f"/help?page=tasks.md#{section['anchor']}")
    heading = page.locator(f"[id='{section['anchor']}']")
    heading.wait_for()
    assert heading.evaluate("el => el === document.activeElement")
    assert heading.is_visible() and heading.evaluate("el => el.getBoundingClientRect().top < window.innerHeight")
    aside = page.get_by_role("navigation", name="On this page")
    assert aside.get_by_role("link", name=section["breadcrumb"][-1], exact=True).count() >= 1
    shoot(page, "help")
    # The header's search answers from the docs and opens a section on the Help page.
    page.get_by_role("searchbox", name="Search").fill("task.claim")
    results = page.get_by_role("list", name="Search results")
    results.get_by_role("link").first.wait_for()
    results.get_by_role("link").first.click()
    page.wait_for_url(re.compile(r"/help\?page=.+#.+"))


def test_decisions_page_searches_and_links_a_decision(ui: Browser, server: Server) -> None:
    first = dict(category="vendor", scenario="Which queue for the billing events", alternatives=["Kafka"], confidence=0.8)
    rec = server.call("decision.record", **first, reasoning="the team runs it already", outcome="NATS JetStream")
    key = rec["memory_key"]
    # Deciding it again supersedes the first version; a later decision names it as its cause.
    again = server.call("decision.record", **first, reasoning="it replays from a sequence", outcome="NATS JetStream with a replay")
    assert again["superseded_prior"] is True
    later = server.call(
        "decision.record",
        category="operations",
        scenario="How to replay billing events after an outage",
        reasoning="JetStream keeps them by sequence",
        outcome="replay from the last acked sequence",
        caused_by=[key],
    )
    page = ui.sign_in("user:admin")
    page.goto("/decisions")
    page.get_by_label("Find decisions like…").fill("queue for billing events")
    page.get_by_role("link", name="Which queue for the billing events").click()
    page.get_by_role("heading", name="Statement").wait_for()
    assert "Decided NATS JetStream with a replay" in page.locator(".statement").inner_text()
    versions = page.get_by_role("list", name="Superseded versions")
    versions.get_by_text("Decided NATS JetStream because").wait_for()
    chain = page.get_by_role("list", name="Chain")
    chain.get_by_role("link", name=later["memory_key"]).wait_for()
    page.get_by_role("list", name="Precedents").get_by_role("link").first.wait_for()
    shoot(page, "decisions")
    chain.get_by_role("link", name=later["memory_key"]).click()
    page.get_by_role("heading", name="How to replay billing events after an outage").wait_for()
    page.get_by_role("list", name="Chain").get_by_role("link", name=key).wait_for()


def test_the_shell_reads_at_390px_and_the_api_pages_render_offline(ui: Browser, server: Server) -> None:
    page = ui.sign_in("user:admin", width=390, height=844)
    assert page.get_by_role("button", name="Sign out").is_visible()
    expect(page.get_by_role("status").filter(has_text="Loading")).to_have_count(0)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    shoot(page, "tasks-390")
    page.goto("/api")
    page.get_by_role("heading", name=re.compile("reference")).wait_for()
    page.get_by_role("region", name="POST /v1/task.claim").wait_for()
    page.goto("/asyncapi")
    page.get_by_role("heading", level=1).wait_for()
    assert page.get_by_text("Could not read").count() == 0


def test_sign_out_ends_the_session_and_its_cookie_is_refused(ui: Browser, server: Server, agent_token: str) -> None:
    page = ui.sign_in("user:admin")
    # The `ops` inbox's stream is open while signing out: its end (the session's revocation) and
    # the page's going must log no error.
    while not requests_to(page, "/v1/task/watch"):
        page.wait_for_timeout(100)
    (cookie,) = [c for c in page.context.cookies() if c["name"] == "loom_session"]
    session = page.request.get("/v1/session").json()
    page.get_by_role("button", name="Sign out").click()
    page.get_by_role("heading", name="Sign in to Loom").wait_for()
    jar = {"loom_session": cookie["value"]}
    assert httpx.get(f"{server.base_url}/v1/session", cookies=jar, timeout=10).status_code == 401
    r = httpx.post(
        f"{server.base_url}/v1/auth.whoami",
        cookies=jar,
        headers={"X-Loom-CSRF": session["csrf_token"], "Origin": server.base_url},
        json={},
        timeout=10,
    )
    assert r.status_code == 401, r.text


def test_loom_login_is_approved_on_the_cli_login_page(ui: Browser, server: Server, tmp_path: Any) -> None:
    env = {**server.env, "XDG_CONFIG_HOME": str(tmp_path)}
    cli = subprocess.Popen(
        [str(ROOT / "loom"), "login", "--url", server.base_url],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert cli.stdout is not None
        link = ""
        for line in cli.stdout:
            found = re.search(r"https?://\S+/cli-login#code=\S+", line)
            if found:
                link = found.group(0)
                break
        assert link, "loom login printed no approve link"
        page = ui.sign_in("user:admin")
        parts = urlsplit(link)
        page.goto(f"{parts.path}#{parts.fragment}")
        page.get_by_role("heading", name="Approve a command-line sign-in").wait_for()
        shoot(page, "cli-login")
        page.get_by_role("button", name="Approve").click()
        page.get_by_role("status").filter(has_text="Approved").wait_for()
        out, _ = cli.communicate(timeout=60)
        assert cli.returncode == 0, out
        assert "signed in as user:admin" in out
        assert (tmp_path / "loom" / "credentials.json").stat().st_mode & 0o777 == 0o600
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()


def test_a_cookie_post_without_the_csrf_token_or_from_a_foreign_origin_is_403(server: Server, agent_token: str) -> None:
    code = urlsplit(server.login_link("user:admin")).fragment.removeprefix("code=")
    with httpx.Client(base_url=server.base_url, timeout=30) as http:
        session = http.post("/v1/session/login", json={"code": code}, headers={"Origin": server.base_url})
        assert session.status_code == 200, session.text
        csrf = session.json()["csrf_token"]
        args = {"inbox": INBOX, "kind": "chore", "title": "forged"}
        ns = {"X-Loom-Namespace": NS}
        no_token = http.post("/v1/task.create", json=args, headers={**ns, "Origin": server.base_url})
        foreign = http.post("/v1/task.create", json=args, headers={**ns, "Origin": "http://evil.example", "X-Loom-CSRF": csrf})
        assert (no_token.status_code, foreign.status_code) == (403, 403)
        assert no_token.json()["error"]["code"] == foreign.json()["error"]["code"] == "CSRF_REJECTED"
        ok = http.post("/v1/auth.whoami", json={}, headers={"Origin": server.base_url, "X-Loom-CSRF": csrf})
        assert ok.status_code == 200 and ok.json()["subject"] == "user:admin"
    assert not [t for t in server.call("task.list", inbox=INBOX)["tasks"] if t["title"] == "forged"]


def test_an_edit_made_on_a_stale_version_says_so_and_reloads(ui: Browser, server: Server, agent_token: str) -> None:
    task = post_task(server, agent_token, "Edit me twice")
    server.call("task.accept", task_id=task["task_id"])
    page = ui.sign_in("user:admin")
    page.goto(f"/tasks/{task['task_id']}")
    form = page.get_by_role("form", name="Edit task")
    form.get_by_label("Title").fill("My new title")
    version = server.call("task.get", task_id=task["task_id"])["task"]["version"]
    server.call("task.update", task_id=task["task_id"], if_match_version=version, title="Changed elsewhere")
    expect_console_error(page, r"status of 409")
    form.get_by_role("button", name="Save").click()
    form.get_by_role("alert").filter(has_text="changed since you opened it").wait_for()
    expect(form.get_by_label("Title")).to_have_value("Changed elsewhere")
    form.get_by_label("Title").fill("My new title")
    form.get_by_role("button", name="Save").click()
    page.get_by_role("heading", name="My new title").wait_for()
    assert server.call("task.get", task_id=task["task_id"])["task"]["title"] == "My new title"


def test_inbox_settings_pick_posters_from_the_orgs_identities(ui: Browser, server: Server, agent_token: str) -> None:
    server.call("sa.create", name="reporter", role="viewer")
    page = ui.sign_in("user:admin")
    page.get_by_label("Inbox").select_option(INBOX)
    page.get_by_role("button", name="Inbox settings").click()
    posters = page.get_by_role("group", name="Posters (who may post tasks here)")
    expect(posters.get_by_role("checkbox", name=POSTER)).to_be_checked()
    posters.get_by_role("checkbox", name="sa:reporter").check()
    shoot(page, "inbox-settings")
    page.get_by_role("button", name="Save settings").click()
    expect(page.get_by_role("button", name="Save settings")).to_have_count(0)
    (inbox,) = [i for i in server.call("inbox.list")["inboxes"] if i["inbox"] == INBOX]
    assert sorted(inbox["posters"]) == sorted([POSTER, "sa:reporter"])
    assert inbox["owner_agent"] == "ops-bot" and inbox["description"] == "Operations requests"


def test_ask_ai_with_no_assistant_configured_shows_the_starters_cards_without_chat(ui: Browser, server: Server, agent_token: str) -> None:
    waiting = post_task(server, agent_token, "Review the quarterly access list")
    page = ui.sign_in("user:admin")
    # The boot snippet says no assistant is configured on this server.
    assert page.evaluate("window.__LOOM_ASSISTANT") == {"configured": False}
    page.get_by_role("button", name="Ask AI", exact=True).click()
    panel = page.get_by_role("complementary", name="Ask AI")
    panel.get_by_text("No assistant is configured on this Loom").wait_for()
    assert "LOOM_ASSISTANT_LIBRECHAT_URL" in panel.get_by_role("note").inner_text()
    # Cards only: no question field, no "Also ask the model", no "Ask about this".
    assert panel.get_by_role("textbox").count() == 0
    assert panel.get_by_label("Also ask the model").count() == 0
    # A starter's card is read with the person's own session: the tasks that need a person.
    panel.get_by_role("button", name="Tasks that need a person").click()
    card = panel.get_by_role("region", name="Tasks that need a person")
    card.get_by_text("Loom's own read").wait_for()
    card.get_by_role("link", name="Review the quarterly access list").wait_for()
    assert requests_to(page, "/v1/task.list")
    assert not requests_to(page, "/v1/assistant/chat/completions")
    shoot(page, "ask-ai-cards")
    card.get_by_role("link", name="Review the quarterly access list").click()
    page.wait_for_url(f"**/tasks/{waiting['task_id']}")
    assert page.get_by_role("button", name="Ask about this").count() == 0

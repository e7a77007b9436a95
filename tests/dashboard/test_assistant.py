"""The Ask AI panel in a real browser against a live `./loom up` whose assistant is the test
LibreChat emulator (tests/assistant/emulator.py, run on a loop of its own in this process and
pointed at by LOOM_ASSISTANT_LIBRECHAT_URL): ask and watch it stream, Stop mid-answer, the
working line, numbered citations and their Sources, a citation that fails, the support label,
and an answer whose text carries HTML, an image or a raw link. A deployment with no assistant
is in test_dashboard.py (the suite's plain server)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import httpx
import pytest
from loom_runner.http import HttpServer
from playwright.sync_api import expect

from tests.assistant.emulator import Emulator, Turn
from tests.dashboard.conftest import Browser, Server, expect_console_error, running_loom

pytestmark = pytest.mark.slow

SCRIPT_WAIT_S = 60.0


class EmulatorThread:
    """The emulator's app served on an event loop of its own thread: the sync Playwright API
    holds this thread's loop, and the answers stream while a test waits on the browser."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="librechat-emulator", daemon=True)
        self.thread.start()
        self.emu = Emulator(loom_url="")
        self.http = HttpServer(self.emu.app())
        self.run(self.http.start())

    def run(self, coro: Awaitable[Any], timeout: float = SCRIPT_WAIT_S) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)  # type: ignore[arg-type]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http.port}"

    def gate(self) -> Gate:
        return Gate(self)

    def close(self) -> None:
        self.run(self.http.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


class Gate:
    """An event a script waits on in the emulator's loop, opened from the test's thread."""

    def __init__(self, owner: EmulatorThread) -> None:
        self.owner = owner
        self.event = owner.run(_new_event())

    async def wait(self) -> None:
        await self.event.wait()

    def open(self) -> None:
        self.owner.loop.call_soon_threadsafe(self.event.set)


async def _new_event() -> asyncio.Event:
    return asyncio.Event()


@pytest.fixture(scope="module")
def librechat() -> Iterator[EmulatorThread]:
    emu = EmulatorThread()
    yield emu
    emu.close()


@pytest.fixture(scope="module")
def server(librechat: EmulatorThread) -> Iterator[Server]:
    """This module's Loom: its assistant is the emulator."""
    with running_loom(LOOM_ASSISTANT_LIBRECHAT_URL=librechat.url, LOOM_ASSISTANT_SETUP_RETRY_S="0.2") as s:
        librechat.emu.loom_url = s.base_url
        deadline = time.monotonic() + 120
        while True:
            checks = httpx.get(f"{s.base_url}/v1/health", timeout=10).json().get("checks", {})
            if checks.get("assistant", {}).get("ok"):
                break
            assert time.monotonic() < deadline, f"the assistant did not set up: {checks.get('assistant')}"
            time.sleep(0.2)
        yield s


PERSON = "user:ann"


@pytest.fixture(scope="module")
def person(server: Server) -> str:
    """A writer on the namespace itself (an org-wide grant cannot ask: an answer reads one namespace)."""
    server.call("grants.set", subject=PERSON, role="writer")
    return PERSON


@pytest.fixture(scope="module")
def task_id(server: Server) -> str:
    server.call("inbox.register", inbox="review", owner_agent="review-bot", description="Reviews")
    task = server.call("task.create", inbox="review", kind="chore", title="Check the vendor contract")["task"]
    return str(task["task_id"])


def scripted(librechat: EmulatorThread, script: Callable[[Turn], Awaitable[None]]) -> None:
    librechat.emu.script = script


def open_panel(ui: Browser) -> Any:
    page = ui.sign_in(PERSON)
    page.get_by_role("button", name="Ask AI", exact=True).click()
    panel = page.get_by_role("complementary", name="Ask AI")
    expect(panel).to_be_visible()
    return page, panel


def ask(panel: Any, question: str) -> None:
    panel.get_by_role("textbox", name="Your question").fill(question)
    panel.get_by_role("button", name="Ask", exact=True).click()


def test_an_answer_streams_in_and_stop_closes_the_request(ui: Browser, person: str, librechat: EmulatorThread) -> None:
    gate = librechat.gate()
    aborted = librechat.run(_new_event())
    librechat.emu.aborted = aborted

    async def script(turn: Turn) -> None:
        await turn.say("The first part of the answer. ")
        await gate.wait()
        await turn.say("The second part.")

    scripted(librechat, script)
    _page, panel = open_panel(ui)
    # The page's context chip goes with the question, and can be removed.
    expect(panel.get_by_test_id("context-chip")).to_contain_text("Context: Tasks page")
    ask(panel, "What is going on?")
    answer = panel.get_by_role("listitem").filter(has_text="What is going on?")
    expect(answer.get_by_text("The first part of the answer.")).to_be_visible()
    expect(answer.get_by_text("The second part.")).to_have_count(0)
    answer.get_by_role("button", name="Stop").click()
    # Stop closed the request: LibreChat saw the client go (and aborts the run).
    librechat.run(asyncio.wait_for(aborted.wait(), SCRIPT_WAIT_S))
    expect(answer.get_by_text("Stopped.")).to_be_visible()
    expect(answer.get_by_text("The first part of the answer.")).to_be_visible()
    gate.open()
    # Ask again answers the turn once more; this time it runs to its end.
    scripted(librechat, _says("A whole answer this time."))
    answer.get_by_role("button", name="Ask again").click()
    expect(answer.get_by_text("A whole answer this time.")).to_be_visible()
    expect(answer.get_by_text("The first part of the answer.")).to_have_count(0)
    # It cites nothing and read nothing: a greeting-like answer carries no label.
    expect(answer.get_by_role("button", name="Copy")).to_be_visible()


def _says(text: str) -> Callable[[Turn], Awaitable[None]]:
    async def script(turn: Turn) -> None:
        await turn.say(text)

    return script


def test_answering_shows_the_latest_step_then_the_text(ui: Browser, person: str, librechat: EmulatorThread, task_id: str) -> None:
    gate = librechat.gate()

    async def script(turn: Turn) -> None:
        await turn.call("task.get", {"task_id": task_id})
        await gate.wait()
        await turn.say(f"It waits for a person [task:{task_id}].")

    scripted(librechat, script)
    _page, panel = open_panel(ui)
    ask(panel, "What does the vendor task need?")
    working = panel.get_by_role("status").filter(has_text="Answering…")
    expect(working).to_be_visible()
    # The latest step is the working line, once its ledger row has landed.
    expect(working).to_contain_text("Read a task", timeout=30_000)
    gate.open()
    expect(panel.get_by_text("It waits for a person")).to_be_visible()
    expect(panel.get_by_test_id("support-label")).to_have_text("Checked against what Loom holds", timeout=30_000)


def test_citations_are_numbered_and_open_their_sources_a_failing_one_is_not_confirmed(
    ui: Browser, person: str, librechat: EmulatorThread, task_id: str
) -> None:
    async def script(turn: Turn) -> None:
        await turn.call("task.get", {"task_id": task_id})
        await turn.say(f"The vendor task is in triage [task:{task_id}]. ")
        await turn.say("Triage is where a person reviews it [help:tasks.md]. ")
        await turn.say(f"It was posted today [task:no-such-task], as the task says [task:{task_id}].")

    scripted(librechat, script)
    page, panel = open_panel(ui)
    ask(panel, "Where is the vendor task?")
    label = panel.get_by_test_id("support-label")
    expect(label).to_have_text("Partly confirmed: 2 of 3 sources found in Loom", timeout=30_000)
    text = panel.locator(".answer-text")
    # Numbered by first appearance: the repeated task citation keeps its 1.
    expect(text.locator("sup")).to_have_text(["[1]", "[2]", "[3]", "[1]"])
    sources = panel.get_by_role("region", name="Sources")
    rows = sources.get_by_role("listitem")
    expect(rows).to_have_count(3)
    expect(rows.nth(0).get_by_role("link", name=f"Task {task_id}")).to_have_attribute("href", f"/tasks/{task_id}")
    expect(rows.nth(1).get_by_role("link", name="Help: tasks.md")).to_have_attribute("href", "/help?page=tasks.md")
    expect(rows.nth(2)).to_contain_text("not confirmed")
    expect(rows.nth(2)).to_contain_text("no call of this answer returned this task")
    expect(rows.nth(2).get_by_role("link")).to_have_count(0)
    # A number links to its Sources row.
    expect(text.get_by_role("link", name="Source 3")).to_have_attribute("href", _href_of(rows.nth(2)))
    panel.get_by_role("button", name="Why this label").click()
    expect(panel.get_by_text("Some sources were found in Loom")).to_be_visible()
    # A source opens where it lives: the task's panel.
    rows.nth(0).get_by_role("link").click()
    page.wait_for_url(f"**/tasks/{task_id}")
    expect(page.get_by_role("heading", name="Check the vendor contract")).to_be_visible()


def _href_of(row: Any) -> str:
    return "#" + str(row.get_attribute("id"))


def test_html_an_image_or_a_raw_link_in_an_answer_render_as_text(ui: Browser, person: str, librechat: EmulatorThread) -> None:
    scripted(
        librechat,
        _says(
            'Look <img src="https://evil.example/x.png?rows=1"> here, '
            "[click me](https://evil.example/y) or https://evil.example/z and "
            "![chart](https://evil.example/c.png) <script>alert(1)</script>"
        ),
    )
    _page, panel = open_panel(ui)
    ask(panel, "Show me something")
    text = panel.locator(".answer-text")
    expect(text).to_contain_text('<img src="https://evil.example/x.png?rows=1">')
    expect(text).to_contain_text("https://evil.example/z")
    expect(text).to_contain_text("click me")
    assert text.locator("img").count() == 0
    assert text.locator("a").count() == 0
    assert text.locator("script").count() == 0
    # Nothing was fetched from evil.example either (the suite fails on any foreign request).


def test_ask_about_this_puts_the_task_on_the_chip_and_the_conversation_is_kept_until_sign_out(
    ui: Browser, person: str, librechat: EmulatorThread, task_id: str
) -> None:
    scripted(librechat, _says("Noted."))
    page = ui.sign_in(PERSON)
    page.goto(f"/tasks/{task_id}")
    expect(page.get_by_role("heading", name="Check the vendor contract")).to_be_visible()
    page.get_by_role("button", name="Ask about this").click()
    panel = page.get_by_role("complementary", name="Ask AI")
    chip = panel.get_by_test_id("context-chip")
    expect(chip).to_contain_text(f'Context: Tasks page, task "{task_id}" (title "Check the vendor contract")')
    ask(panel, "Why is it waiting?")
    expect(panel.get_by_text("Noted.")).to_be_visible()
    # The question went with the chip's line, as its first line; no wire field carries it.
    sent = librechat.emu.chat_bodies[-1]["messages"][-1]["content"]
    assert sent.startswith(f'Context: Tasks page, task "{task_id}"'), sent
    assert sent.splitlines()[1] == "Why is it waiting?"
    # Kept in this browser: a reload shows it under History.
    page.reload()
    page.get_by_role("button", name="Ask AI", exact=True).click()
    panel.get_by_role("button", name="History").click()
    expect(panel.get_by_role("button", name="Why is it waiting?", exact=True)).to_be_visible()
    stored = page.evaluate("window.localStorage.getItem('loom.assistant.conversations')")
    assert "Why is it waiting?" in stored
    # Sign-out deletes them from this browser (from the Tasks page: a task's panel covers the
    # header's right end).
    page.goto("/tasks")
    page.get_by_role("button", name="Sign out").click()
    page.get_by_role("heading", name="Sign in to Loom").wait_for()
    assert page.evaluate("window.localStorage.getItem('loom.assistant.conversations')") is None


def test_the_header_search_answers_in_place_and_goes_on_in_the_panel(ui: Browser, person: str, librechat: EmulatorThread) -> None:
    scripted(librechat, _says("Tasks move from triage to todo when a person accepts them."))
    page = ui.sign_in(PERSON)
    page.get_by_role("searchbox", name="Search").fill("how do tasks move")
    page.get_by_role("button", name="Ask AI: “how do tasks move”").click()
    preview = page.get_by_label("Ask AI answer")
    expect(preview.get_by_text("when a person accepts them")).to_be_visible()
    preview.get_by_role("button", name="Continue in Ask AI").click()
    panel = page.get_by_role("complementary", name="Ask AI")
    expect(panel.get_by_text("how do tasks move")).to_be_visible()
    expect(panel.get_by_text("when a person accepts them")).to_be_visible()
    # A question asked there follows on in the same conversation, with the first as history.
    scripted(librechat, _says("Yes."))
    ask(panel, "And back?")
    expect(panel.get_by_text("Yes.")).to_be_visible()
    messages = librechat.emu.chat_bodies[-1]["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]


def test_a_refusal_reads_as_its_reason_with_what_to_do(ui: Browser, server: Server, librechat: EmulatorThread) -> None:
    scripted(librechat, _says("never asked"))
    page = ui.sign_in("user:admin")  # the org's bootstrap admin: an org-wide grant
    expect_console_error(page, r"403 \(Forbidden\) @ .*/v1/assistant/chat/completions")
    page.get_by_role("button", name="Ask AI", exact=True).click()
    panel = page.get_by_role("complementary", name="Ask AI")
    asked = len(librechat.emu.chat_bodies)
    ask(panel, "What is here?")
    refusal = panel.get_by_role("alert")
    expect(refusal).to_contain_text("An org-wide grant cannot ask the assistant")
    expect(refusal).to_contain_text("Ask an admin for a role on this namespace itself")
    expect(refusal.locator("code")).to_have_text("AUTH_INSUFFICIENT")
    # Refused before LibreChat was called.
    assert len(librechat.emu.chat_bodies) == asked


def test_a_starter_shows_its_card_and_also_asks_the_model(ui: Browser, person: str, librechat: EmulatorThread) -> None:
    scripted(librechat, _says("Nothing waits for a person. Nothing stored in Loom answers this."))
    _page, panel = open_panel(ui)
    expect(panel.get_by_label("Also ask the model")).to_be_checked()
    asked = len(librechat.emu.chat_bodies)
    panel.get_by_role("button", name="What the policies refused").click()
    card = panel.get_by_role("region", name="What the policies refused")
    expect(card.get_by_text("Loom's own read")).to_be_visible()
    expect(card.get_by_text("The policies refused nothing in that time.")).to_be_visible()
    expect(panel.get_by_text("Nothing waits for a person.")).to_be_visible()
    # The question names the window the card was read with.
    question = librechat.emu.chat_bodies[asked]["messages"][-1]["content"]
    assert "in the last 7d" in question, question
    # With "Also ask the model" off, a starter is its card alone: no model call.
    panel.get_by_label("Also ask the model").uncheck()
    panel.get_by_role("button", name="Tasks that need a person").click()
    expect(panel.get_by_role("region", name="Tasks that need a person").get_by_text("Loom's own read")).to_be_visible()
    assert len(librechat.emu.chat_bodies) == asked + 1

"""The dashboard's browser suite: a live `./loom up` on a temp data dir and a free port, Debian's
chromium driven by Playwright for Python (executable_path: Playwright downloads no browser),
people signed in with `loom admin login-link`.

Every page a test opens fails the test on a console error, an uncaught page error, or a request
to any host but the server under test (`Browser.page`); a refusal a test causes on purpose is
named with `expect_console_error` first.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from loom_core.bus.natsserver import free_port

from tests import loom_up

ROOT = Path(__file__).resolve().parents[2]
SECRET = "dashboard-suite-secret-0123456789abcdef0123456789"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SHOTS = ROOT / "docs" / "images"
ORG = "acme"
NS = "private"


@dataclass
class Server:
    port: int
    data: Path
    proc: subprocess.Popen[bytes]
    log: Path
    admin_token: str
    env: dict[str, str]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def call(self, op: str, token: str | None = None, agent: str = "", **args: Any) -> dict[str, Any]:
        """An op over REST with a bearer token (the admin's unless given); raises on an error answer."""
        headers = {"Authorization": f"Bearer {token or self.admin_token}", "X-Loom-Namespace": NS}
        if agent:
            headers["X-Loom-Agent"] = agent
        r = httpx.post(f"{self.base_url}/v1/{op}", json=args, headers=headers, timeout=30)
        assert r.status_code == 200, f"{op}: {r.status_code} {r.text}"
        return dict(r.json())

    def loom(self, *args: str) -> str:
        """Run the `loom` command against this server's data dir; its stdout. The venv's `loom`, as
        `loom up` here: the `./loom` script's install check costs each call ~0.1 CPU-s more."""
        done = subprocess.run(
            [str(loom_up.BIN / "loom"), *args], cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=120, check=False
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    def login_link(self, subject: str) -> str:
        """`loom admin login-link`: the one-time sign-in URL it prints, pointed at this server."""
        out = self.loom("admin", "login-link", "--org", ORG, "--subject", subject)
        found = re.search(r"https?://\S+/login#code=\S+", out)
        assert found, out
        link = urlsplit(found.group(0))
        return f"{self.base_url}{link.path}#{link.fragment}"


@contextmanager
def running_loom(**extra_env: str) -> Iterator[Server]:
    """`loom up` on a temp data dir and a free port, with org ORG and namespace NS bootstrapped;
    stopped (its process group: nats-server too) and its data removed afterwards."""
    data = Path(tempfile.mkdtemp(prefix="loom-dashboard-"))
    port = free_port()
    # Rules refuse: the policy test sees a refusal, not only a logged decision.
    env = loom_up.loom_env(data, port, LOOM_JWT_SECRET=SECRET, LOOM_POLICY_MODE="enforce", **extra_env)
    log = data / "loom-up.log"
    proc = loom_up.start(env, log)
    try:
        loom_up.wait_healthy(proc, f"http://127.0.0.1:{port}", log)
        yield Server(port, data, proc, log, loom_up.bootstrap(env, ORG, NS), env)
    finally:
        loom_up.stop(proc)
        shutil.rmtree(data, ignore_errors=True)


# Module scope: the sync Playwright API runs an event loop in this thread while it is open,
# so it must close before any other test module (pytest-asyncio's) runs.
@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with running_loom() as s:
        yield s


@dataclass
class Watch:
    """What a page did that fails a test: console errors, page errors, foreign requests; and
    every request it made, with when (a test reads how the page keeps itself live)."""

    origin: str
    errors: list[str] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)
    allowed: list[re.Pattern[str]] = field(default_factory=list)
    requests: list[tuple[float, str]] = field(default_factory=list)

    def console(self, msg: Any) -> None:
        if msg.type == "error":
            text = f"{msg.text} @ {msg.location.get('url', '')}"
            if not any(p.search(text) for p in self.allowed):
                self.errors.append(text)

    def request(self, req: Any) -> None:
        self.requests.append((time.monotonic(), req.url))
        parts = urlsplit(req.url)
        if parts.scheme in ("data", "blob", "about"):
            return
        if f"{parts.scheme}://{parts.netloc}" != self.origin:
            self.foreign.append(req.url)


@dataclass
class Browser:
    server: Server
    playwright: Any
    browser: Any
    watches: list[Watch] = field(default_factory=list)
    contexts: list[Any] = field(default_factory=list)

    def context(self, width: int = 1280, height: int = 900) -> Any:
        ctx = self.browser.new_context(viewport={"width": width, "height": height}, base_url=self.server.base_url)
        self.contexts.append(ctx)
        return ctx

    def page(self, context: Any | None = None, width: int = 1280, height: int = 900) -> Any:
        ctx = context or self.context(width, height)
        page = ctx.new_page()
        watch = Watch(self.server.base_url)
        page.on("console", watch.console)
        page.on("pageerror", lambda exc: watch.errors.append(f"page error: {exc}"))
        page.on("request", watch.request)
        page._loom_watch = watch
        self.watches.append(watch)
        return page

    def sign_in(self, subject: str, width: int = 1280, height: int = 900) -> Any:
        """A fresh browser context signed in as `subject` with a login link; its page on /tasks."""
        page = self.page(width=width, height=height)
        page.goto(self.server.login_link(subject))
        page.wait_for_url("**/tasks")
        page.get_by_role("button", name="Sign out").wait_for()
        return page


def requests_to(page: Any, path: str, since: float = 0.0) -> list[str]:
    """The page's requests to `path` (the URL's path) made after `since` (time.monotonic())."""
    return [url for at, url in page._loom_watch.requests if at > since and urlsplit(url).path == path]


def expect_console_error(page: Any, pattern: str) -> None:
    """A console error the test causes on purpose (a refusal it asserts on) does not fail it."""
    page._loom_watch.allowed.append(re.compile(pattern))


def shoot(page: Any, name: str) -> None:
    """A screenshot of the page as the test left it: always taken (a page that cannot be drawn
    fails here), and written over docs/images/ (docs/dashboard.md shows them) when
    LOOM_DASHBOARD_SCREENSHOTS=1, so an ordinary run leaves the tree as it was."""
    png = page.screenshot()
    assert png.startswith(b"\x89PNG")
    if os.environ.get("LOOM_DASHBOARD_SCREENSHOTS") == "1":
        SHOTS.mkdir(parents=True, exist_ok=True)
        (SHOTS / f"dashboard-{name}.png").write_bytes(png)


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    assert Path(CHROMIUM).exists(), f"{CHROMIUM} is missing: ./loom test installs it with apt-get (apt-get install chromium)"
    with sync_playwright() as p:
        # launch() gives chromium a fresh temporary user-data-dir of its own, removed at close.
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield p, browser
        finally:
            browser.close()


@pytest.fixture
def ui(server: Server, chromium: Any) -> Iterator[Browser]:
    p, browser = chromium
    b = Browser(server, p, browser)
    yield b
    for ctx in b.contexts:
        ctx.close()
    for w in b.watches:
        assert not w.errors, f"console errors: {w.errors}"
        assert not w.foreign, f"requests to another host: {w.foreign}"

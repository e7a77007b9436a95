"""The dashboard served by the gateway (loom_gateway/web.py), over real HTTP on loopback: the
app's routes answer index.html with a fresh nonce'd boot snippet and a strict CSP, hashed assets
are cached for good, the API's paths stay the API's, and without a build `/` says how to make one."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from loom_gateway.app import create_app
from loom_gateway.settings import GatewaySettings
from loom_gateway.web import BOOT_PLACEHOLDER
from loom_runner.embedded import Instance
from loom_runner.http import HttpServer

INDEX = f"""<!doctype html><html><head><meta charset="utf-8">{BOOT_PLACEHOLDER}
<script type="module" src="/assets/index-abc123.js"></script></head><body><div id="root"></div></body></html>"""


async def serve(stack: Instance, frontend_dir: Path) -> AsyncIterator[str]:
    assert stack.relay is not None
    app = create_app(stack.relay, {}, version="9.9.9", gateway=GatewaySettings(frontend_dir=str(frontend_dir)))
    http = HttpServer(app)
    await http.start()
    try:
        yield f"http://127.0.0.1:{http.port}"
    finally:
        await http.stop()


@pytest.fixture
async def built(stack: Instance, tmp_path: Path) -> AsyncIterator[str]:
    (tmp_path / "assets").mkdir()
    (tmp_path / "index.html").write_text(INDEX)
    (tmp_path / "assets" / "index-abc123.js").write_text("console.log('loom')")
    (tmp_path / "assets" / "index-abc123.css").write_text("body{}")
    (tmp_path / "robots.txt").write_text("User-agent: *\nDisallow: /\n")
    async for url in serve(stack, tmp_path):
        yield url


@pytest.fixture
async def unbuilt(stack: Instance, tmp_path: Path) -> AsyncIterator[str]:
    async for url in serve(stack, tmp_path / "no-such-build"):
        yield url


def nonce_of(r: httpx.Response) -> str:
    m = re.search(r"'nonce-([A-Za-z0-9_-]+)'", r.headers["content-security-policy"])
    assert m, r.headers["content-security-policy"]
    return m.group(1)


@pytest.mark.parametrize(
    "path",
    ["/", "/login", "/cli-login", "/tasks", "/tasks/t-123", "/decisions/d-1", "/policies", "/help?page=tasks.md", "/asyncapi", "/api"],
)
async def test_the_apps_routes_answer_index_html_with_a_nonced_boot_snippet(built: str, path: str) -> None:
    async with httpx.AsyncClient(base_url=built) as c:
        r = await c.get(path)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    nonce = nonce_of(r)
    assert (
        f'<script nonce="{nonce}">window.__LOOM = {{"version":"9.9.9"}}; window.__LOOM_ASSISTANT = {{"configured":false}}</script>'
        in r.text
    )
    assert BOOT_PLACEHOLDER not in r.text
    csp = r.headers["content-security-policy"]
    for directive in (
        "default-src 'self'",
        "img-src 'self' data: blob:",
        f"script-src 'self' 'nonce-{nonce}'",
        "style-src 'self'",
        "connect-src 'self'",
        "frame-ancestors 'none'",
        "base-uri 'self'",
        "form-action 'self'",
    ):
        assert directive in csp
    assert "unsafe-inline" not in csp and "http" not in csp
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["referrer-policy"] == "same-origin"
    assert "no-cache" in r.headers["cache-control"]


async def test_each_response_has_its_own_nonce(built: str) -> None:
    async with httpx.AsyncClient(base_url=built) as c:
        first, second = await c.get("/"), await c.get("/")
    assert nonce_of(first) != nonce_of(second)


async def test_hashed_assets_are_cached_for_good_and_typed(built: str) -> None:
    async with httpx.AsyncClient(base_url=built) as c:
        js, css = await c.get("/assets/index-abc123.js"), await c.get("/assets/index-abc123.css")
        missing = await c.get("/assets/index-nope.js")
        escape = await c.get("/assets/..%2f..%2fetc%2fpasswd")
    assert js.status_code == 200 and js.text == "console.log('loom')"
    assert js.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert "javascript" in js.headers["content-type"] and css.headers["content-type"].startswith("text/css")
    assert js.headers["x-content-type-options"] == "nosniff"
    assert missing.status_code == 404 and escape.status_code == 404


async def test_a_browser_deep_link_answers_the_app_and_a_scripts_unknown_path_stays_404(built: str) -> None:
    async with httpx.AsyncClient(base_url=built) as c:
        page = await c.get("/some/page", headers={"Accept": "text/html,application/xhtml+xml"})
        script = await c.get("/some/page")
        dotfile = await c.get("/.env", headers={"Accept": "text/html"})
        robots = await c.get("/robots.txt")
    assert page.status_code == 200 and "window.__LOOM" in page.text
    assert script.status_code == 404 and script.json()["error"]["code"] == "RESOURCE_NOT_FOUND"
    assert dotfile.status_code == 404
    assert robots.status_code == 200 and robots.text.startswith("User-agent")


@pytest.mark.parametrize("path", ["/v1/nope/extra", "/v1", "/mcp/nope", "/v1/session/nope", "/.well-known/nope"])
async def test_the_apis_paths_are_never_the_app(built: str, path: str) -> None:
    async with httpx.AsyncClient(base_url=built) as c:
        r = await c.get(path, headers={"Accept": "text/html"})
    assert r.status_code in (404, 405) and r.headers["content-type"] == "application/json", (path, r.text[:200])


async def test_the_api_documents_are_served_beside_the_app(built: str) -> None:
    async with httpx.AsyncClient(base_url=built) as c:
        asyncapi, openapi = await c.get("/asyncapi.json"), await c.get("/openapi.json")
        ops = await c.get("/v1/ops")
    assert asyncapi.status_code == 200 and "channels" in asyncapi.json()
    assert openapi.status_code == 200 and openapi.json()["openapi"].startswith("3.")
    assert ops.status_code == 200


async def test_without_a_build_root_says_how_to_build_and_a_favicon_is_served(unbuilt: str) -> None:
    async with httpx.AsyncClient(base_url=unbuilt) as c:
        root = await c.get("/")
        icon = await c.get("/favicon.ico")
    assert root.status_code == 200 and root.headers["content-type"].startswith("text/html")
    assert "npm ci" in root.text and "npm run build" in root.text and "<script" not in root.text
    assert "default-src 'self'" in root.headers["content-security-policy"]
    assert icon.status_code == 200 and icon.headers["content-type"].startswith("image/")


async def test_the_builds_favicon_wins(built: str, tmp_path: Path) -> None:
    (tmp_path / "favicon.ico").write_bytes(b"\x00\x00\x01\x00")
    async with httpx.AsyncClient(base_url=built) as c:
        icon = await c.get("/favicon.ico")
    assert icon.status_code == 200 and icon.content == b"\x00\x00\x01\x00" and icon.headers["content-type"] == "image/x-icon"

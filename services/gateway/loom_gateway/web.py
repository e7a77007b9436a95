"""The dashboard, served from its build (frontend/dist, LOOM_FRONTEND_DIR) at `/`.

- `/assets/*`: the build's hashed files, cached for a year (immutable).
- `/favicon.ico`: the build's, or Loom's own mark when there is no build (a browser asks for it
  on every page, and a 404 there is a console error).
- The app's routes (`/`, `/tasks/<id>`, `/help`, ... and any other GET a browser navigates to,
  i.e. that accepts text/html): index.html, not cached, with its `<!--loom-boot-->` placeholder
  replaced by a script carrying this response's nonce, which the Content-Security-Policy names.
  Without a build, `/` says how to make one.
- The API's paths (`/v1/*`, `/mcp`, `/metrics`, `/openapi.json`, `/asyncapi.json`, ...) are never
  the app's: an unknown one stays a JSON 404.
"""

from __future__ import annotations

import json
import mimetypes
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from loom_core import inproc
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, Response

from .session_http import is_api_path
from .settings import GatewaySettings

BOOT_PLACEHOLDER = "<!--loom-boot-->"
# The app's own routes: they answer index.html to any client (curl included).
APP_ROUTES = ("/", "/login", "/cli-login", "/tasks", "/decisions", "/policies", "/help", "/asyncapi", "/api")
_API_FILES = frozenset({"/metrics", "/openapi.json", "/asyncapi.json", "/favicon.ico"})
_API_PREFIXES = ("/.well-known/",)
IMMUTABLE = "public, max-age=31536000, immutable"
# Loom's mark, for a browser's /favicon.ico when the build has none (or there is no build).
FAVICON_SVG = (
    b'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="6" fill="#1f2937"/>'
    b'<path d="M9 8v16h14" stroke="#f9fafb" stroke-width="3" fill="none" stroke-linecap="round" stroke-linejoin="round"/></svg>'
)
NO_BUILD = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Loom</title></head>
<body><main><h1>Loom is running; its dashboard is not built</h1>
<p>The gateway serves the dashboard from <code>{dir}</code>, which holds no <code>index.html</code>.
Build it with <code>./loom up</code> (its install step runs <code>npm ci</code> and <code>npm run build</code> in
<code>frontend/</code>), or by hand: <code>cd frontend &amp;&amp; npm ci &amp;&amp; npm run build</code>.
Point <code>LOOM_FRONTEND_DIR</code> at another build if it lives elsewhere.</p>
<p>The API answers meanwhile: <a href="/v1/ops">/v1/ops</a>, <a href="/openapi.json">/openapi.json</a>,
<a href="/asyncapi.json">/asyncapi.json</a>.</p></main></body></html>
"""


def default_frontend_dir() -> Path:
    """The repository's frontend/dist (this file is services/gateway/loom_gateway/web.py)."""
    return Path(__file__).resolve().parents[3] / "frontend" / "dist"


def csp(nonce: str) -> str:
    return (
        "default-src 'self'; img-src 'self' data: blob:; "
        f"script-src 'self' 'nonce-{nonce}'; style-src 'self'; connect-src 'self'; "
        "frame-ancestors 'none'; base-uri 'self'; form-action 'self'"
    )


def page_headers(nonce: str) -> dict[str, str]:
    return {
        "Content-Security-Policy": csp(nonce),
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "same-origin",
        "X-Frame-Options": "DENY",
        "Cache-Control": "no-cache, no-store, must-revalidate",
    }


def boot_script(nonce: str, boot: dict[str, Any], assistant: dict[str, Any]) -> str:
    def js(value: Any) -> str:
        # JSON inside a <script>: `<` escaped so no value can close the element.
        return json.dumps(value, separators=(",", ":")).replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")

    return f'<script nonce="{nonce}">window.__LOOM = {js(boot)}; window.__LOOM_ASSISTANT = {js(assistant)}</script>'


def is_app_path(path: str) -> bool:
    """Not one of the API's own paths: a page of the app (or a file of its build)."""
    return not (is_api_path(path) or path in _API_FILES or path.startswith(_API_PREFIXES))


class Frontend:
    """The built app on disk, read per request (a rebuild shows without a restart)."""

    def __init__(self, directory: Path, boot: Callable[[], dict[str, Any]], assistant: Callable[[], dict[str, Any]]) -> None:
        self.directory = directory.resolve()
        self.boot = boot
        self.assistant = assistant

    def file(self, relative: str) -> Path | None:
        """A file of the build, never outside it."""
        candidate = (self.directory / relative).resolve()
        if not candidate.is_relative_to(self.directory) or not candidate.is_file():
            return None
        return candidate

    def index(self) -> Response:
        nonce = secrets.token_urlsafe(18)
        index = self.file("index.html")
        if index is None:
            return HTMLResponse(NO_BUILD.format(dir=self.directory), headers=page_headers(nonce))
        html = index.read_text(encoding="utf-8")
        html = html.replace(BOOT_PLACEHOLDER, boot_script(nonce, self.boot(), self.assistant()), 1)
        return HTMLResponse(html, headers=page_headers(nonce))


def web_frontend(gateway: GatewaySettings, version: str, replica: object | None) -> Frontend:
    """The app as this gateway serves it; its boot snippet says whether an assistant is configured.
    `replica`: the replica the gateway's relay serves (core's in-process registry names it)."""

    def assistant() -> dict[str, Any]:
        plane = inproc.find("assistant", replica) if replica is not None else None
        configured = getattr(plane, "client", None) is not None if plane is not None else bool(gateway.assistant_bridge_url)
        return {"configured": configured}

    directory = Path(gateway.frontend_dir) if gateway.frontend_dir else default_frontend_dir()
    return Frontend(directory, lambda: {"version": version}, assistant)


def register(app: FastAPI, frontend: Frontend) -> None:
    """The app's routes; registered last, after every API route."""

    async def favicon(request: Request) -> Response:
        built = frontend.file("favicon.ico")
        headers = {"Cache-Control": "public, max-age=86400", "X-Content-Type-Options": "nosniff"}
        if built is not None:
            return FileResponse(built, media_type="image/x-icon", headers=headers)
        return Response(FAVICON_SVG, media_type="image/svg+xml", headers=headers)

    async def asset(request: Request) -> Response:
        found = frontend.file(f"assets/{request.path_params['path']}")
        if found is None:
            raise StarletteHTTPException(404)
        media = mimetypes.guess_type(found.name)[0] or "application/octet-stream"
        return FileResponse(found, media_type=media, headers={"Cache-Control": IMMUTABLE, "X-Content-Type-Options": "nosniff"})

    async def page(request: Request) -> Response:
        path = request.url.path
        if request.method not in ("GET", "HEAD") or not is_app_path(path):
            raise StarletteHTTPException(404)
        top = path.rstrip("/") or "/"
        if top in APP_ROUTES or any(path.startswith(f"{r}/") for r in APP_ROUTES if r != "/"):
            return frontend.index()
        # A top-level file of the build (robots.txt, a manifest): as it is, revalidated.
        if path.count("/") == 1 and path != "/index.html" and (built := frontend.file(path.lstrip("/"))) is not None:
            return FileResponse(built, headers={"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"})
        # Any other page a browser navigates to is the app's to answer (its own "not found");
        # a script's GET of an unknown path stays a 404.
        if "text/html" in request.headers.get("accept", "") and "." not in path.rsplit("/", 1)[-1]:
            return frontend.index()
        raise StarletteHTTPException(404)

    app.add_route("/favicon.ico", favicon, methods=["GET", "HEAD"], include_in_schema=False)
    app.add_route("/assets/{path:path}", asset, methods=["GET", "HEAD"], include_in_schema=False)
    # Every method, so another method on an unknown path stays the 404 it was (not a 405).
    app.add_route("/{path:path}", page, methods=["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"], include_in_schema=False)

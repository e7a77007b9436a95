"""The sign-in session's HTTP side (docs/dashboard-api.md): the `/v1/session*` routes, and
`SessionCookies`, the outermost middleware that turns a `loom_session` cookie into the
session's own access token on every API request.

A cookie request that changes state (anything but GET, HEAD, OPTIONS) must carry the
session's CSRF token in `X-Loom-CSRF` and come from this origin (`Origin`, or `Referer` when a
browser sends no Origin): else 403 CSRF_REJECTED before anything runs. A request with an
`Authorization` header is left alone, cookie or not: a Bearer caller is unaffected.

A GET that reads as the session (`GET /v1/task/watch`, which a browser's `EventSource` opens
with the cookie and no way to add a header) needs no CSRF token, but when it names an Origin
(a cross-origin `EventSource` does; a same-origin one sends none) that must be this origin.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

from fastapi import FastAPI
from loom_core.chain.context import MD_AUTHORIZATION, MD_SESSION
from loom_core.errors import ErrorCode, Forbidden, LoomError, Unauthenticated, Unavailable
from starlette.requests import Request, cookie_parser
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from .errors import error_response
from .limits import parse_json
from .sessions import BROWSER, CLI, CSRF_HEADER, SESSION_COOKIE, Session, SessionService, body_field, browser_base
from .watch import WATCH_PATH

PREFIX = "/v1/session"
LOGIN, STATE, LOGOUT = f"{PREFIX}/login", PREFIX, f"{PREFIX}/logout"
CLI_START, CLI_POLL, CLI_APPROVE, REFRESH = f"{PREFIX}/cli_start", f"{PREFIX}/cli_poll", f"{PREFIX}/cli_approve", f"{PREFIX}/refresh"
# Routes that take no session (their own credential is in the body): the cookie is not read.
_NO_COOKIE = frozenset({LOGIN, CLI_START, CLI_POLL, REFRESH})
# Routes that read the cookie themselves; the middleware only checks CSRF and Origin.
_OWN_COOKIE = frozenset({STATE, LOGOUT, CLI_APPROVE})
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# GET routes that read as the session (every other GET needs no credential).
_SESSION_READS = frozenset({WATCH_PATH})


def is_api_path(path: str) -> bool:
    """Paths the API answers (never the dashboard's pages)."""
    return path == "/v1" or path.startswith("/v1/") or path == "/mcp" or path.startswith("/mcp/")


def _origin_of(headers: dict[str, str]) -> str:
    origin = headers.get("origin", "")
    if origin and origin != "null":
        return origin
    referer = urlsplit(headers.get("referer", ""))
    return f"{referer.scheme}://{referer.netloc}" if referer.scheme and referer.netloc else ""


def same_origin(headers: dict[str, str], scheme: str, public_url: str) -> bool:
    """The request comes from this server's own pages: its Origin (or Referer) is the public
    URL's origin when one is set, else the origin the request was sent to."""
    origin = _origin_of(headers).rstrip("/").lower()
    if not origin:
        return False
    if public_url:
        u = urlsplit(public_url)
        return origin == f"{u.scheme}://{u.netloc}".lower()
    host = headers.get("host", "")
    return bool(host) and origin == f"{scheme}://{host}".lower()


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}


def cookie_value(headers: dict[str, str]) -> str:
    return cookie_parser(headers.get("cookie", "")).get(SESSION_COOKIE, "")


def _secure(scheme: str, public_url: str) -> bool:
    return scheme == "https" or public_url.startswith("https://")


def set_cookie(response: Response, secret: str, max_age: int, secure: bool) -> None:
    response.set_cookie(SESSION_COOKIE, secret, max_age=max_age, path="/", httponly=True, samesite="strict", secure=secure)


def clear_cookie(response: Response, secure: bool) -> None:
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict", secure=secure)


def csrf_refusal(sessions: SessionService, scope: Scope, headers: dict[str, str], secret: str, public_url: str) -> LoomError | None:
    """403 CSRF_REJECTED for a state-changing cookie request without the token or from elsewhere."""
    if scope["method"] in _SAFE_METHODS:
        return None
    given = headers.get(CSRF_HEADER, "")
    if not given:
        return Forbidden(
            ErrorCode.CSRF_REJECTED, f"a request signed in with the session cookie must send {CSRF_HEADER}", {"reason": "csrf_missing"}
        )
    if not sessions.csrf_ok(secret, given):
        return Forbidden(ErrorCode.CSRF_REJECTED, f"{CSRF_HEADER} does not match this session", {"reason": "csrf_mismatch"})
    if not same_origin(headers, scope["scheme"], public_url):
        return Forbidden(
            ErrorCode.CSRF_REJECTED, "a request signed in with the session cookie must come from Loom's own origin", {"reason": "origin"}
        )
    return None


class SessionCookies:
    """ASGI middleware (outermost): a cookie API request runs as the session's subject."""

    def __init__(self, app: ASGIApp, sessions: SessionService, public_url: str) -> None:
        self.app = app
        self.sessions = sessions
        self.public_url = public_url

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        # An agent's call carries no cookie: pass it on without decoding its headers (the
        # server hands header names lower-cased).
        if scope["type"] != "http" or not is_api_path(path) or path in _NO_COOKIE or not any(k == b"cookie" for k, _ in scope["headers"]):
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        secret = cookie_value(headers)
        if not secret or MD_AUTHORIZATION in headers:
            await self.app(scope, receive, send)
            return
        try:
            refusal = csrf_refusal(self.sessions, scope, headers, secret, self.public_url)
            if refusal is not None:
                raise refusal
            session_read = scope["method"] == "GET" and path in _SESSION_READS
            if session_read and headers.get("origin") and not same_origin(headers, scope["scheme"], self.public_url):
                raise Forbidden(
                    ErrorCode.CSRF_REJECTED,
                    "a request signed in with the session cookie must come from Loom's own origin",
                    {"reason": "origin"},
                )
            # Op calls (POST), MCP and the session's reads run as the session; a read like
            # GET /v1/ops or /v1/health needs no credential, and a stale cookie must not make it fail.
            if path not in _OWN_COOKIE and (scope["method"] == "POST" or path.startswith("/mcp") or session_read):
                session = await self.sessions.resolve(secret, BROWSER)
                token, _ = await self.sessions.access_token(session)
                # The call runs under the session's token; its ledger row names the session.
                kept = [(k, v) for k, v in scope["headers"] if k.lower() not in (b"authorization", MD_SESSION.encode())]
                kept += [(b"authorization", f"Bearer {token}".encode()), (MD_SESSION.encode(), session.session_id.encode())]
                scope = {**scope, "headers": kept}
        except LoomError as err:
            await self._refuse(err, scope, receive, send)
            return
        await self.app(scope, receive, send)

    async def _refuse(self, err: LoomError, scope: Scope, receive: Receive, send: Send) -> None:
        response = error_response(err)
        if response.status_code == 401:
            clear_cookie(response, _secure(scope["scheme"], self.public_url))
        await response(scope, receive, send)


def register(app: FastAPI, sessions: SessionService | None, public_url: str, session_ttl_seconds: int) -> None:
    """The `/v1/session*` routes, registered ahead of `/v1/{op}` (which would take GET /v1/session)."""

    def route(path: str, method: str, fn: Callable[[Request, SessionService], Awaitable[Response]]) -> None:
        async def endpoint(request: Request) -> Response:
            try:
                if sessions is None:
                    raise Unavailable(
                        ErrorCode.BACKEND_UNAVAILABLE,
                        "sign-in sessions need a gateway that holds the store (loom up, or loom serve --gateway --planes identity)",
                        {"reason": "no_sessions"},
                    )
                if path in _NO_COOKIE:
                    sessions.admit(request.client.host if request.client else "")
                return await fn(request, sessions)
            except LoomError as err:
                response = error_response(err)
                if response.status_code == 401 and path in _OWN_COOKIE and cookie_value(dict(request.headers)):
                    clear_cookie(response, secure(request))
                return response

        app.add_route(path, endpoint, methods=[method], include_in_schema=False)

    def secure(request: Request) -> bool:
        return _secure(request.url.scheme, public_url)

    async def body(request: Request) -> Any:
        return parse_json(await request.body())

    async def signed_in(request: Request, s: SessionService) -> tuple[Session, str]:
        secret = cookie_value(dict(request.headers))
        if not secret:
            raise Unauthenticated(ErrorCode.AUTH_REQUIRED, "not signed in", {"reason": "no_session"})
        session = await s.resolve(secret, BROWSER)
        await s.access_token(session)  # 401 once the session was revoked on any replica
        return session, secret

    async def session_answer(s: SessionService, session: Session, secret: str) -> dict[str, Any]:
        return {**await s.describe(session), "csrf_token": s.csrf_token(secret)}

    async def login(request: Request, s: SessionService) -> Response:
        headers = dict(request.headers)
        # A browser always sends Origin on a POST: one from elsewhere may not sign this browser in.
        if (headers.get("origin") or headers.get("referer")) and not same_origin(headers, request.url.scheme, public_url):
            raise Forbidden(ErrorCode.CSRF_REJECTED, "sign in from Loom's own origin", {"reason": "origin"})
        session, secret = await s.login(body_field(await body(request), "code"))
        response = JSONResponse(await session_answer(s, session, secret))
        set_cookie(response, secret, session_ttl_seconds, secure(request))
        return response

    async def state(request: Request, s: SessionService) -> Response:
        session, secret = await signed_in(request, s)
        return JSONResponse(await session_answer(s, session, secret))

    async def logout(request: Request, s: SessionService) -> Response:
        secret = cookie_value(dict(request.headers))
        if secret:
            session = await s.resolve(secret, BROWSER)
        else:
            session = await s.resolve(body_field(await body(request), "refresh_token"), CLI)
        await s.end(session)
        response = Response(status_code=204)
        if secret:
            clear_cookie(response, secure(request))
        return response

    async def cli_start(request: Request, s: SessionService) -> Response:
        started = await s.cli_start()
        base = public_url or browser_base(str(request.base_url))
        return JSONResponse({**started, "approve_url": f"{base.rstrip('/')}/cli-login#code={started['code']}"})

    async def cli_poll(request: Request, s: SessionService) -> Response:
        return JSONResponse(await s.cli_poll(body_field(await body(request), "poll_token")))

    async def cli_approve(request: Request, s: SessionService) -> Response:
        session, _ = await signed_in(request, s)
        return JSONResponse(await s.cli_approve(body_field(await body(request), "code"), session))

    async def refresh(request: Request, s: SessionService) -> Response:
        session = await s.resolve(body_field(await body(request), "refresh_token"), CLI)
        return JSONResponse(await s.refresh_answer(session))

    route(LOGIN, "POST", login)
    route(STATE, "GET", state)
    route(LOGOUT, "POST", logout)
    route(CLI_START, "POST", cli_start)
    route(CLI_POLL, "POST", cli_poll)
    route(CLI_APPROVE, "POST", cli_approve)
    route(REFRESH, "POST", refresh)

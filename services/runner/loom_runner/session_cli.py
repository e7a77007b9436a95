"""Sign-in for people from the command line (docs/dashboard-api.md):

- `loom admin login-link --org ORG --subject user:alice [--base-url URL]`: a single-use sign-in
  link for the dashboard, made through the running server's admin socket, or directly on the
  store when no server holds the data dir (as `loom admin bootstrap` does).
- `loom login [--url URL]`: prints a link a signed-in person approves in the dashboard, waits,
  and keeps the session's refresh token in the user's config dir (mode 0600).
- `loom logout [--url URL]`: ends that session (revoking every token under it) and forgets it.
- `loom token [--url URL]`: prints a fresh access token from that session, for scripts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loom_core.settings import Settings

# httpx and the gateway load in the commands that use them: `loom --help` and every other
# command import this module to build their parser.
if TYPE_CHECKING:
    import httpx

COMMANDS = ("login", "logout", "token")
ADMIN_COMMANDS = ("login-link",)
CREDENTIALS_FILE = "credentials.json"


def add_commands(sub: Any) -> None:
    login = sub.add_parser("login", help="sign the CLI and SDKs in: approve the printed link in the dashboard")
    logout = sub.add_parser("logout", help="end the session `loom login` started and forget it")
    token = sub.add_parser("token", help="print a fresh access token from the `loom login` session")
    for p in (login, logout, token):
        p.add_argument("--url", default="", help="Loom's URL (default: LOOM_URL, else http://127.0.0.1:LOOM_HTTP_PORT)")


def add_admin_commands(admin_sub: Any) -> None:
    link = admin_sub.add_parser("login-link", help="print a single-use sign-in link for a person")
    link.add_argument("--org", required=True)
    link.add_argument("--subject", required=True, help="who signs in, e.g. user:alice (needs a grant in the org)")
    link.add_argument(
        "--base-url", default="", help="the URL people open Loom at (default: LOOM_PUBLIC_URL, else http://localhost:LOOM_HTTP_PORT)"
    )


def config_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "loom"


def _url(args: argparse.Namespace, settings: Settings) -> str:
    return str(args.url or os.environ.get("LOOM_URL") or f"http://127.0.0.1:{settings.http_port}").rstrip("/")


def read_credentials() -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads((config_dir() / CREDENTIALS_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return data


def write_credentials(data: dict[str, Any]) -> Path:
    """The credentials file, readable by its owner alone (the directory too)."""
    directory = config_dir()
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = directory / CREDENTIALS_FILE
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=2)
    os.chmod(tmp, 0o600)
    tmp.replace(path)
    return path


def _error(r: httpx.Response) -> str:
    try:
        err = r.json()["error"]
        return f"{err['message']} ({err['code']})"
    except (ValueError, KeyError, TypeError):
        return f"HTTP {r.status_code}"


def run_command(args: argparse.Namespace, settings: Settings) -> int:
    url = _url(args, settings)
    if args.cmd == "login":
        return login(url)
    if args.cmd == "logout":
        return logout(url)
    return print_token(url)


def login(url: str, *, out: Any = None) -> int:
    import httpx

    with httpx.Client(base_url=url, timeout=30) as client:
        r = client.post("/v1/session/cli_start")
        if r.status_code != 200:
            raise SystemExit(f"loom login: {_error(r)}")
        started = r.json()
        print(f"Open this link where you are signed in to Loom and approve code {started['code']}:", flush=True, file=out)
        print(f"  {started['approve_url']}", flush=True, file=out)
        while True:
            time.sleep(float(started.get("interval_s") or 2))
            r = client.post("/v1/session/cli_poll", json={"poll_token": started["poll_token"]})
            if r.status_code != 200:
                raise SystemExit(f"loom login: {_error(r)}")
            answer = r.json()
            if answer["status"] == "approved":
                break
    creds = read_credentials()
    creds[url] = {k: answer[k] for k in ("refresh_token", "session_id", "session_expires_at", "subject", "org", "token", "expires_at")}
    path = write_credentials(creds)
    print(f"loom: signed in as {answer['subject']} (org {answer['org']}); credential kept in {path}", flush=True, file=out)
    return 0


def logout(url: str) -> int:
    import httpx

    creds = read_credentials()
    entry = creds.pop(url, None)
    if entry is None:
        print(f"loom: not signed in to {url}", flush=True)
        return 0
    with httpx.Client(base_url=url, timeout=30) as client:
        r = client.post("/v1/session/logout", json={"refresh_token": entry["refresh_token"]})
    # 401: the session had ended already (signed out elsewhere, expired): forgotten all the same.
    if r.status_code not in (204, 401):
        raise SystemExit(f"loom logout: {_error(r)}")
    write_credentials(creds)
    print(f"loom: signed out of {url} (session {entry['session_id']} ended)", flush=True)
    return 0


def print_token(url: str) -> int:
    import httpx

    entry = read_credentials().get(url)
    if entry is None:
        raise SystemExit(f"loom token: not signed in to {url}: run `loom login --url {url}`")
    with httpx.Client(base_url=url, timeout=30) as client:
        r = client.post("/v1/session/refresh", json={"refresh_token": entry["refresh_token"]})
    if r.status_code != 200:
        raise SystemExit(f"loom token: {_error(r)}")
    print(r.json()["token"], flush=True)
    return 0


def run_login_link(args: argparse.Namespace, settings: Settings) -> int:
    from loom_gateway import GatewaySettings, login_url

    gateway = settings.plane(GatewaySettings)
    base = args.base_url or gateway.public_url or f"http://localhost:{settings.http_port}"
    answer = asyncio.run(_login_code(settings, args.org, args.subject, gateway.login_link_ttl_seconds))
    print(login_url(base, answer["code"]), flush=True)
    return 0


async def _login_code(settings: Settings, org: str, subject: str, ttl_seconds: int) -> dict[str, Any]:
    """Through the running server's admin socket when one holds the data dir; else directly."""
    import httpx
    from loom_core.data_dir import server_lock, socket_path
    from loom_core.local_secrets import WeakSecret, with_local_secrets

    if not settings.clickhouse_url:
        try:
            settings = with_local_secrets(settings)  # sign with the key `loom up` on this data dir uses
        except WeakSecret as exc:
            raise SystemExit(f"loom: {exc}") from None
        sock = socket_path(settings.data_dir)
        if sock.exists():
            try:
                async with httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(uds=str(sock)), base_url="http://loom") as client:
                    r = await client.post("/login-link", json={"org": org, "subject": subject}, timeout=30)
            except httpx.TransportError:
                pass  # a server that died left its socket behind: open the store below
            else:
                if r.status_code != 200:
                    raise SystemExit(f"loom: login-link refused: {_error(r)}")
                return dict(r.json())
    from loom_core.errors import LoomError
    from loom_core.identity.store import IdentityStore
    from loom_core.runtime import CORE_MIGRATIONS
    from loom_core.store import open_store, run_migrations
    from loom_gateway import issue_login_code

    lock = None if settings.clickhouse_url else server_lock(settings.data_dir, wait=False)
    if lock is None and not settings.clickhouse_url:
        raise SystemExit(f"loom: a server is starting on {settings.data_dir}: run this again once it is up")
    store = await open_store(settings)
    try:
        await run_migrations(store, CORE_MIGRATIONS)
        return await issue_login_code(IdentityStore(store), settings.jwt_secret, org, subject, ttl_seconds)
    except LoomError as exc:
        raise SystemExit(f"loom: login-link refused: {exc.message}") from None
    finally:
        await store.close()
        if lock is not None:
            lock.close()

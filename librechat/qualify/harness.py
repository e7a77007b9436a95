"""Qualify a real LibreChat for Loom's assistant (spec 000; /work/shared/librechat-protocol.md).

    LOOM_QUALIFY_LIBRECHAT_URL=http://librechat:3080 python -m librechat.qualify.harness

Optional: LOOM_QUALIFY_LOOM_URL and LOOM_QUALIFY_LOOM_TOKEN (a viewer token of one namespace)
to ask through Loom's chat route and report which placeholder behaviour LibreChat shows;
LOOM_QUALIFY_LIBRECHAT_LOGS (a directory) and LOOM_QUALIFY_MONGO_DUMP (a file, e.g. a
`mongodump --archive`) to search for a password, key or token LibreChat was sent. Without the
URL every case says it skipped. It registers one probe user (loom-qualify-…) and deletes the
key and agent it makes.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import yaml

BROWSER_UA = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0 Safari/537.36"
JWT_PREFIX = "eyJhbGciOiJIUzI1NiIs"  # every Loom token (HS256 JWT) starts so
AGENT_YAML = Path(__file__).resolve().parents[1] / "agent.yaml"
# LibreChat's name for an MCP server's tool: `<tool>` + Constants.mcp_delimiter + `<server>`
# (packages/data-provider/src/config.ts; packages/api/src/mcp/registry/MCPServerInspector.ts).
MCP_DELIMITER = "_mcp_"
MCP_SERVER = "loom"


def agent_tools() -> list[str]:
    return [str(t) for t in yaml.safe_load(AGENT_YAML.read_text()).get("tools") or []]


@dataclass
class Case:
    name: str
    outcome: str  # passed | failed | skipped
    note: str = ""


@dataclass
class Report:
    cases: list[Case] = field(default_factory=list)
    placeholder: str = "unknown"

    @property
    def ok(self) -> bool:
        return all(c.outcome != "failed" for c in self.cases)

    def render(self) -> str:
        lines = [f"{c.outcome.upper():8} {c.name}" + (f"  ({c.note})" if c.note else "") for c in self.cases]
        lines.append(f"placeholder behaviour: {self.placeholder}")
        return "\n".join(lines)


class _Probe:
    def __init__(self, http: httpx.AsyncClient) -> None:
        self.http = http
        self.email = f"loom-qualify-{secrets.token_hex(4)}@loom.local"
        self.password = secrets.token_urlsafe(18)
        self.jwt = ""
        self.key = ""
        self.key_id = ""
        self.agent_id = ""

    def signed(self) -> dict[str, str]:
        return {"User-Agent": BROWSER_UA, "Authorization": f"Bearer {self.jwt}"}


def _msg(r: httpx.Response) -> str:
    try:
        b = r.json()
    except ValueError:
        return r.text
    if isinstance(b, dict) and isinstance(b.get("error"), dict):
        return str(b["error"].get("message"))
    return str(b.get("message") if isinstance(b, dict) else b)


async def qualify(
    librechat_url: str | None,
    *,
    loom_url: str | None = None,
    loom_token: str | None = None,
    logs_dir: Path | None = None,
    db_dump: Path | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> Report:
    report = Report()
    names = [
        "health",
        "unknown email is 404 'Email does not exist.'",
        "non-browser client gets 200 Illegal request",
        "register then wrong password is 404 'Incorrect password.'",
        "api key create/list",
        "agents api auth errors",
        "agent create needs provider and model",
        "agents list and model shapes",
        "conversation_id is 404 Conversation not found",
        "an agent keeps agent.yaml's tool names",
        "agent.yaml names the assistant toolset as LibreChat does",
        "placeholder behaviour through Loom",
        "no password, key or token in logs",
        "no password, key or token in the database",
        "cleanup",
    ]
    if not librechat_url:
        report.cases = [Case(n, "skipped", "LOOM_QUALIFY_LIBRECHAT_URL is not set") for n in names]
        return report
    async with httpx.AsyncClient(base_url=librechat_url.rstrip("/"), timeout=30, transport=transport) as http:
        p = _Probe(http)

        async def case(name: str, fn: Callable[[], Awaitable[str | None]]) -> None:
            try:
                note = await fn()
                report.cases.append(Case(name, "passed", note or ""))
            except _Skip as s:
                report.cases.append(Case(name, "skipped", str(s)))
            except Exception as exc:  # noqa: BLE001 - every case reports, none stops the run
                report.cases.append(Case(name, "failed", f"{type(exc).__name__}: {exc}"))

        async def health() -> None:
            r = await http.get("/health")
            _expect(r.status_code == 200, f"status {r.status_code}")

        async def unknown_email() -> None:
            r = await http.post("/api/auth/login", json={"email": p.email, "password": p.password}, headers={"User-Agent": BROWSER_UA})
            _expect(r.status_code == 404 and _msg(r) == "Email does not exist.", f"{r.status_code} {_msg(r)!r}")

        async def not_browser() -> None:
            r = await http.get("/api/agents", headers={"User-Agent": "loom-qualify"})
            _expect(r.status_code == 200 and "Illegal request" in r.text, f"{r.status_code}")

        async def register() -> None:
            body = {
                "name": "loom-qualify",
                "username": "loom-qualify",
                "email": p.email,
                "password": p.password,
                "confirm_password": p.password,
            }
            r = await http.post("/api/auth/register", json=body, headers={"User-Agent": BROWSER_UA})
            _expect(r.status_code == 200, f"register {r.status_code}")
            r = await http.post(
                "/api/auth/login", json={"email": p.email, "password": p.password + "x"}, headers={"User-Agent": BROWSER_UA}
            )
            _expect(r.status_code == 404 and _msg(r) == "Incorrect password.", f"{r.status_code} {_msg(r)!r}")
            r = await http.post("/api/auth/login", json={"email": p.email, "password": p.password}, headers={"User-Agent": BROWSER_UA})
            _expect(r.status_code == 200, f"login {r.status_code}")
            p.jwt = str(r.json()["token"])

        async def keys() -> None:
            r = await http.post("/api/api-keys", json={"name": "loom-qualify"}, headers=p.signed())
            _expect(r.status_code == 201 and {"id", "name", "key", "keyPrefix"} <= set(r.json()), f"{r.status_code}")
            p.key, p.key_id = str(r.json()["key"]), str(r.json()["id"])
            r = await http.get("/api/api-keys", headers=p.signed())
            _expect("key" not in json.dumps(r.json()["keys"][0]).replace('"keyPrefix"', ""), "a listed key shows its secret")

        async def auth_errors() -> None:
            r1 = await http.post("/api/agents/v1/chat/completions", json={})
            r2 = await http.post("/api/agents/v1/chat/completions", json={}, headers={"Authorization": "Bearer sk-not-a-key"})
            _expect(r1.status_code == 401 and r1.json()["error"]["code"] == "missing_api_key", f"{r1.status_code}")
            _expect(r2.status_code == 401 and r2.json()["error"]["code"] == "invalid_api_key", f"{r2.status_code}")

        async def agent_create() -> None:
            r = await http.post("/api/agents", json={"name": "loom-qualify"}, headers=p.signed())
            _expect(r.status_code == 400, f"without provider: {r.status_code}")
            body = {"name": "loom-qualify", "provider": "anthropic", "model": "claude-haiku-4-5", "instructions": "Say hello.", "tools": []}
            r = await http.post("/api/agents", json=body, headers=p.signed())
            _expect(r.status_code == 201 and str(r.json()["id"]).startswith("agent_"), f"{r.status_code}")
            p.agent_id = str(r.json()["id"])

        async def shapes() -> None:
            r = await http.get("/api/agents", params={"search": "loom-qualify"}, headers=p.signed())
            _expect({"object", "data", "has_more"} <= set(r.json()), "list shape")
            auth = {"Authorization": f"Bearer {p.key}"}
            m = await http.get(f"/api/agents/v1/models/{p.agent_id}", headers=auth)
            _expect(m.status_code == 200 and m.json()["id"] == p.agent_id, f"model {m.status_code}")
            u = await http.get("/api/agents/v1/models/agent_unknown", headers=auth)
            _expect(u.status_code == 404, f"unknown model {u.status_code}")

        async def conversation() -> None:
            body = {"model": p.agent_id, "messages": [{"role": "user", "content": "hi"}], "conversation_id": "loom-qualify"}
            r = await http.post("/api/agents/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {p.key}"})
            _expect(r.status_code == 404 and _msg(r) == "Conversation not found", f"{r.status_code} {_msg(r)!r}")

        async def tool_names_kept() -> str:
            # LibreChat stores an agent's tools by the names it gives tools; one it does not
            # know as a tool of the `loom` MCP server would not come back as written.
            body = {"name": "loom-qualify-tools", "provider": "anthropic", "model": "claude-haiku-4-5", "tools": agent_tools()}
            r = await http.post("/api/agents", json=body, headers=p.signed())
            _expect(r.status_code == 201, f"create {r.status_code}")
            agent_id = str(r.json()["id"])
            try:
                got = await http.get(f"/api/agents/{agent_id}", headers=p.signed())
                kept = list(got.json().get("tools") or [])
            finally:
                await http.delete(f"/api/agents/{agent_id}", headers=p.signed())
            _expect(kept == agent_tools(), f"LibreChat kept {kept}")
            return f"{len(kept)} tools"

        async def toolset_names() -> str:
            if not (loom_url and loom_token):
                raise _Skip("LOOM_QUALIFY_LOOM_URL / LOOM_QUALIFY_LOOM_TOKEN not set")
            async with httpx.AsyncClient(base_url=loom_url.rstrip("/"), timeout=30, transport=transport) as loom:
                r = await loom.get("/v1/ops", params={"toolset": "assistant"}, headers={"Authorization": f"Bearer {loom_token}"})
            exposed = {f"{op['tool']}{MCP_DELIMITER}{MCP_SERVER}" for op in r.json()["ops"]}
            named = set(agent_tools())
            _expect(exposed == named, f"only listed: {sorted(exposed - named)}; only named: {sorted(named - exposed)}")
            return f"{len(named)} tools"

        async def placeholder() -> str:
            if not (loom_url and loom_token):
                raise _Skip("LOOM_QUALIFY_LOOM_URL / LOOM_QUALIFY_LOOM_TOKEN not set")
            async with httpx.AsyncClient(base_url=loom_url.rstrip("/"), timeout=120, transport=transport) as loom:
                body = {"messages": [{"role": "user", "content": "Who holds a role here? Call grants.list."}], "stream": True}
                r = await loom.post("/v1/assistant/chat/completions", json=body, headers={"Authorization": f"Bearer {loom_token}"})
            events = [json.loads(x[6:]) for x in r.text.splitlines() if x.startswith("data: {")]
            final = [e for e in events if e.get("loom_event") == "loom.citations"]
            _expect(bool(final), "the chat route sent no loom.citations event")
            # A call under no token is ledgered under no org, so it is no step of the answer:
            # with the question asking for a call, no step means no call reached Loom with it.
            steps = final[0].get("steps") or []
            token_passed = any(s.get("ok") for s in steps)
            report.placeholder = "v0.8.8: the answer token reaches Loom" if token_passed else "v0.8.7: empty token, every tool call 401"
            return report.placeholder

        def needles() -> list[str]:
            return [n for n in (p.password, p.key, JWT_PREFIX) if n]

        async def logs() -> None:
            if logs_dir is None:
                raise _Skip("LOOM_QUALIFY_LIBRECHAT_LOGS not set")
            found = await asyncio.to_thread(_files_holding, logs_dir, needles())
            _expect(not found, f"a secret appears in {', '.join(found)}")

        async def database() -> None:
            if db_dump is None:
                raise _Skip("LOOM_QUALIFY_MONGO_DUMP not set")
            # The key is stored as its SHA-256 only; the password hashed; no Loom token at all.
            _expect(not await asyncio.to_thread(_files_holding, db_dump, needles()), "a secret appears in the database dump")

        async def cleanup() -> None:
            if p.agent_id:
                await http.delete(f"/api/agents/{p.agent_id}", headers=p.signed())
            if p.key_id:
                await http.delete(f"/api/api-keys/{p.key_id}", headers=p.signed())

        for name, fn in zip(
            names,
            [
                health,
                unknown_email,
                not_browser,
                register,
                keys,
                auth_errors,
                agent_create,
                shapes,
                conversation,
                tool_names_kept,
                toolset_names,
                placeholder,
                logs,
                database,
                cleanup,
            ],
            strict=True,
        ):
            await case(name, fn)  # type: ignore[arg-type]
    return report


def _files_holding(root: Path, needles: list[str]) -> list[str]:
    """Names of the files under `root` (or `root` itself) that hold any needle."""
    files = [root] if root.is_file() else [f for f in root.rglob("*") if f.is_file()]
    return [f.name for f in files if any(n.encode() in f.read_bytes() for n in needles)]


class _Skip(Exception):
    pass


def _expect(cond: bool, why: str) -> None:
    if not cond:
        raise AssertionError(why)


def main() -> int:
    env = os.environ.get
    report = asyncio.run(
        qualify(
            env("LOOM_QUALIFY_LIBRECHAT_URL"),
            loom_url=env("LOOM_QUALIFY_LOOM_URL"),
            loom_token=env("LOOM_QUALIFY_LOOM_TOKEN"),
            logs_dir=Path(env("LOOM_QUALIFY_LIBRECHAT_LOGS", "")) if env("LOOM_QUALIFY_LIBRECHAT_LOGS") else None,
            db_dump=Path(env("LOOM_QUALIFY_MONGO_DUMP", "")) if env("LOOM_QUALIFY_MONGO_DUMP") else None,
        )
    )
    if not env("LOOM_QUALIFY_LIBRECHAT_URL"):
        print("SKIPPED: LOOM_QUALIFY_LIBRECHAT_URL is not set; no LibreChat was qualified.")
    print(report.render())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())

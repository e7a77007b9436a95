"""A protocol-faithful LibreChat for tests (every route, status and body of
/work/shared/librechat-protocol.md, v0.8.7 and v0.8.8 placeholder behaviour).

Its scripted model makes real MCP tool calls to Loom's `/mcp?toolset=assistant`, with the
headers resolved as LibreChat resolves `{{LIBRECHAT_BODY_PARENTMESSAGEID}}` and
`{{LIBRECHAT_BODY_MESSAGEID}}` (one connection per request: initialize, tools/list, calls),
and streams LibreChat's exact SSE chunks.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import yaml
from loom_assistant.http import EventStream
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

ROLES = ("system", "user", "assistant", "tool")
SIGN_IN_LIMIT = 7
SIGN_IN_WINDOW_S = 300.0
# LibreChat's Constants.mcp_delimiter (packages/data-provider/src/config.ts): an agent knows an
# MCP server's tool as `<tool>_mcp_<server>` (packages/api/src/mcp/registry/MCPServerInspector.ts).
MCP_DELIMITER = "_mcp_"
MCP_SERVER = "loom"
AGENT_YAML = Path(__file__).resolve().parents[2] / "librechat" / "agent.yaml"
# How many pieces a streamed tool call's arguments are cut into, as a model streams them.
ARGUMENT_PIECES = 4


def agent_yaml_tools(path: Path = AGENT_YAML) -> list[str]:
    """The tools librechat/agent.yaml gives the agent, read as LibreChat would be given them."""
    return [str(t) for t in yaml.safe_load(path.read_text()).get("tools") or []]


def librechat_name(tool: str) -> str:
    """What a script names a tool by (a LibreChat name, an MCP tool name or a dotted op name)
    as LibreChat's agent knows it."""
    if tool.endswith(MCP_DELIMITER + MCP_SERVER):
        return tool
    mcp_name = tool if tool.startswith("loom_") else "loom_" + tool.replace(".", "_")
    return mcp_name + MCP_DELIMITER + MCP_SERVER


class ToolNotOffered(Exception):
    """The script's model called a tool the agent was not given: a real model cannot."""


def _err(status: int, message: str, type_: str = "invalid_request_error", code: str | None = None) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": type_, "param": None, "code": code}}, status_code=status)


def _nanoid(n: int = 21) -> str:
    return secrets.token_urlsafe(n)[:n]


@dataclass
class ToolResult:
    ok: bool
    body: dict[str, Any]


@dataclass
class Turn:
    """What a script sees: the request's messages and a way to call tools and write text."""

    messages: list[dict[str, Any]]
    call: Callable[[str, dict[str, Any]], Awaitable[ToolResult]]
    say: Callable[[str], Awaitable[None]]
    # The tools offered to the model, as LibreChat names them (`loom_task_get_mcp_loom`).
    tools: list[str] = field(default_factory=list)
    # The answer's message id: what its tool calls carry as X-Loom-Run-Id.
    run_id: str = ""


Script = Callable[[Turn], Awaitable[None]]


async def greeting(turn: Turn) -> None:
    await turn.say("Hello! Ask me about this namespace.")


@dataclass
class Emulator:
    loom_url: str
    # "0.8.8": {{LIBRECHAT_BODY_PARENTMESSAGEID}} is the request's parent_message_id;
    # "0.8.7": the OpenAI-compatible path leaves it "" (the header goes out as "Bearer").
    version: str = "0.8.8"
    script: Script = greeting
    usage: tuple[int, int] = (1200, 300)
    chunk_delay_s: float = 0.0
    # False: the MCP server's Authorization goes out on every request but tools/list (a token
    # put under LibreChat's chat-only requestHeaders): the listing fails and the agent has no tools.
    listing_auth: bool = True
    registration: bool = True
    # False: a misconfigured LibreChat whose agents API serves a caller without a key, which
    # `loom doctor` names (librechat.auth).
    agents_api_auth: bool = True
    users: dict[str, dict[str, Any]] = field(default_factory=dict)
    keys: dict[str, dict[str, Any]] = field(default_factory=dict)
    agents: dict[str, dict[str, Any]] = field(default_factory=dict)
    sessions: dict[str, str] = field(default_factory=dict)
    sign_ins: list[float] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    chat_bodies: list[dict[str, Any]] = field(default_factory=list)
    chat_headers: list[dict[str, str]] = field(default_factory=list)
    mcp_headers: list[dict[str, str]] = field(default_factory=list)
    tool_results: list[ToolResult] = field(default_factory=list)
    aborted: asyncio.Event = field(default_factory=asyncio.Event)
    calls_done: asyncio.Event = field(default_factory=asyncio.Event)
    gate: asyncio.Event | None = None  # when set, a script's `say` waits for it
    fail_next_login: int = 0
    chat_seen: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(0))

    # -- helpers for tests -------------------------------------------------------------------

    def wipe_keys(self) -> None:
        self.keys.clear()

    def wipe_agents(self) -> None:
        self.agents.clear()

    def wipe_database(self) -> None:
        for d in (self.users, self.keys, self.agents, self.sessions):
            d.clear()

    # -- app -----------------------------------------------------------------------------------

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/health", self._health, methods=["GET"]),
                Route("/api/agents/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/api/agents/v1/models", self._models, methods=["GET"]),
                Route("/api/agents/v1/models/{id}", self._model, methods=["GET"]),
                Route("/api/auth/login", self._login, methods=["POST"]),
                Route("/api/auth/register", self._register, methods=["POST"]),
                Route("/api/api-keys", self._keys, methods=["GET", "POST"]),
                Route("/api/api-keys/{id}", self._key_delete, methods=["DELETE"]),
                Route("/api/agents", self._agents, methods=["GET", "POST"]),
                Route("/api/agents/{id}", self._agent, methods=["GET", "PATCH", "DELETE"]),
            ]
        )

    async def _health(self, _: Request) -> Response:
        return PlainTextResponse("OK")

    # -- agents API (API key) ------------------------------------------------------------------

    def _key_user(self, request: Request) -> tuple[str | None, JSONResponse | None]:
        auth = request.headers.get("authorization", "")
        if not self.agents_api_auth and not auth.strip():
            return "anonymous", None
        if not auth.startswith("Bearer ") or not auth[7:].strip():
            return None, _err(401, "Missing or invalid Authorization header. Expected: Bearer <api_key>", code="missing_api_key")
        digest = hashlib.sha256(auth[7:].strip().encode()).hexdigest()
        for k in self.keys.values():
            if k["sha256"] == digest:
                return str(k["user"]), None
        return None, _err(401, "Invalid API key", code="invalid_api_key")

    def _agent_for(self, user: str, agent_id: str, not_found: str) -> tuple[dict[str, Any] | None, JSONResponse | None]:
        agent = self.agents.get(agent_id)
        if agent is None:
            return None, _err(404, f"{not_found}: {agent_id}", code="model_not_found")
        if agent["author"] != user:
            return None, _err(403, "You do not have access to this agent", type_="permission_error", code="access_denied")
        return agent, None

    async def _models(self, request: Request) -> Response:
        user, bad = self._key_user(request)
        if bad:
            return bad
        data = [self._model_obj(a) for a in self.agents.values() if a["author"] == user]
        return JSONResponse({"object": "list", "data": data})

    def _model_obj(self, a: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": a["id"],
            "object": "model",
            "created": a["created"],
            "owned_by": "librechat",
            "name": a["name"],
            "description": a.get("description", ""),
            "provider": a["provider"],
        }

    async def _model(self, request: Request) -> Response:
        user, bad = self._key_user(request)
        if bad:
            return bad
        agent, bad = self._agent_for(str(user), request.path_params["id"], "Model not found")
        return bad or JSONResponse(self._model_obj(agent or {}))

    async def _chat(self, request: Request) -> Response:
        user, bad = self._key_user(request)
        if bad:
            return bad
        body = await request.json()
        self.chat_bodies.append(body)
        self.chat_seen.release()
        self.chat_headers.append({k.lower(): v for k, v in request.headers.items() if k.lower() != "authorization"})
        if not body.get("model"):
            return _err(400, "model (agent_id) is required")
        msgs = body.get("messages")
        if not isinstance(msgs, list):
            return _err(400, "messages array is required")
        if not msgs:
            return _err(400, "messages array cannot be empty")
        for i, m in enumerate(msgs):
            if not isinstance(m, dict) or m.get("role") not in ROLES:
                return _err(400, f"messages[{i}].role must be one of: {', '.join(ROLES)}")
        agent, bad = self._agent_for(str(user), str(body["model"]), "Agent not found")
        if bad:
            return bad
        if body.get("conversation_id"):
            return _err(404, "Conversation not found")
        message_id = f"chatcmpl-{_nanoid()}"
        # LibreChat keeps no message: only token counts (its transactions).
        self.log.append(f"agents api: user={user} agent={body['model']} message={message_id}")
        parent = str(body.get("parent_message_id") or "") if self.version >= "0.8.8" else ""
        headers = {"Authorization": f"Bearer {parent}".strip(), "X-Loom-Run-Id": message_id}
        if body.get("stream"):
            return EventStream(self._stream(agent or {}, msgs, headers, message_id), media_type="text/event-stream")
        text, _, calls = await self._run(agent or {}, msgs, headers, None)
        return JSONResponse(
            {
                "id": message_id,
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text, **({"tool_calls": calls} if calls else {})},
                        "finish_reason": "stop",
                    }
                ],
                "usage": self._usage(),
            }
        )

    def _usage(self) -> dict[str, int]:
        p, c = self.usage
        return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}

    def _chunk(self, message_id: str, agent_id: str, delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
        c = {
            "id": message_id,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": agent_id,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            **extra,
        }
        return f"data: {json.dumps(c)}\n\n"

    async def _stream(self, agent: dict[str, Any], msgs: list[dict[str, Any]], headers: dict[str, str], message_id: str) -> Any:
        queue: asyncio.Queue[str | None] = asyncio.Queue()
        agent_id = str(agent.get("id", ""))

        async def emit(delta: dict[str, Any]) -> None:
            await queue.put(self._chunk(message_id, agent_id, delta))

        async def work() -> None:
            try:
                await self._run(agent, msgs, headers, emit)
                await queue.put(self._chunk(message_id, agent_id, {}, "stop", usage=self._usage()))
            except Exception as exc:  # noqa: BLE001 - LibreChat's in-stream error shape
                await queue.put(self._chunk(message_id, agent_id, {"content": f"\n\nError: {type(exc).__name__}"}, "stop"))
            await queue.put("data: [DONE]\n\n")
            await queue.put(None)

        task = asyncio.create_task(work())
        try:
            yield self._chunk(message_id, agent_id, {"role": "assistant"})
            while True:
                item = await queue.get()
                if item is None:
                    break
                yield item
                if self.chunk_delay_s:
                    await asyncio.sleep(self.chunk_delay_s)
        except BaseException:
            # The client closed the request: LibreChat aborts the run.
            self.aborted.set()
            raise
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _run(
        self,
        agent: dict[str, Any],
        msgs: list[dict[str, Any]],
        headers: dict[str, str],
        emit: Callable[[dict[str, Any]], Awaitable[None]] | None,
    ) -> tuple[str, list[ToolResult], list[dict[str, Any]]]:
        """Run the script as the agent's model: it is offered only the tools the agent names
        (`agent.tools`) that Loom's MCP server lists, as LibreChat offers an agent's tools."""
        text: list[str] = []
        results: list[ToolResult] = []
        tool_calls: list[dict[str, Any]] = []
        n = 0

        agent_tools = [str(t) for t in agent.get("tools") or []]

        def offer(listed: list[str] | None) -> list[str]:
            # With no listing (the connection refused), LibreChat's cached definitions still offer them.
            names = set(agent_tools) if listed is None else {t + MCP_DELIMITER + MCP_SERVER for t in listed}
            return [t for t in agent_tools if t in names]

        def record(name: str, args: dict[str, Any], offered: list[str]) -> str:
            """The model's call of `name` (its LibreChat name); the MCP tool it calls."""
            nonlocal n
            if name not in offered:
                raise ToolNotOffered(f"{name} is not among the agent's tools {offered}")
            fn = {"name": name, "arguments": json.dumps(args)}
            tc = {"index": n, "id": f"call_{_nanoid(8)}", "type": "function", "function": fn}
            tool_calls.append(tc)
            n += 1
            self.mcp_headers.append(dict(headers))
            return name[: -len(MCP_DELIMITER + MCP_SERVER)]

        async def stream_call(tc: dict[str, Any]) -> None:
            """A tool call as OpenAI streams it: id, type and name first, then only the index with
            a piece of the arguments."""
            if emit is None:
                return
            first = {
                "index": tc["index"],
                "id": tc["id"],
                "type": "function",
                "function": {"name": tc["function"]["name"], "arguments": ""},
            }
            await emit({"tool_calls": [first]})
            raw = tc["function"]["arguments"]
            step = max(1, -(-len(raw) // ARGUMENT_PIECES))
            for i in range(0, len(raw), step):
                await emit({"tool_calls": [{"index": tc["index"], "function": {"arguments": raw[i : i + step]}}]})

        def keep(r: ToolResult) -> ToolResult:
            results.append(r)
            self.tool_results.append(r)
            return r

        async def refused(http: httpx2.AsyncClient, tool: str, args: dict[str, Any]) -> ToolResult:
            # Loom refused the MCP request at the HTTP layer (401 + WWW-Authenticate): LibreChat's
            # MCP client gets no tool result, the model an error; the refusal's body is kept.
            r = await http.post(
                f"{self.loom_url}/mcp?toolset=assistant",
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": args}},
                headers={"Accept": "application/json, text/event-stream"},
            )
            body = r.json() if r.headers.get("content-type", "").startswith("application/json") else {}
            if not isinstance(body, dict):
                body = {}
            # A JSON-RPC error object: Loom's own error body is its `data`.
            error = body.get("error")
            if isinstance(error, dict) and isinstance(error.get("data"), dict):
                body = {"error": error["data"]}
            return keep(ToolResult(False, body))

        async def say(chunk: str) -> None:
            self.calls_done.set()
            if self.gate is not None:
                await self.gate.wait()
            text.append(chunk)
            if emit is not None:
                await emit({"content": chunk})

        listing_ok = False

        async def strip_listing_auth(request: httpx2.Request) -> None:
            if not self.listing_auth and b'"tools/list"' in request.content:
                request.headers.pop("Authorization", None)

        async with httpx2.AsyncClient(headers=headers, timeout=30, event_hooks={"request": [strip_listing_auth]}) as http:
            self.mcp_headers.append(dict(headers))
            try:
                async with Client(
                    streamable_http_client(f"{self.loom_url}/mcp?toolset=assistant", http_client=http), mode="legacy"
                ) as client:
                    listed = await client.list_tools()
                    offered = offer([t.name for t in listed.tools])
                    listing_ok = True

                    async def call(tool: str, args: dict[str, Any]) -> ToolResult:
                        mcp_tool = record(librechat_name(tool), args, offered)
                        await stream_call(tool_calls[-1])
                        try:
                            res: types.CallToolResult = await client.call_tool(mcp_tool, args)
                        except Exception:  # noqa: BLE001 - an HTTP-level refusal (401) ends the call
                            return await refused(http, mcp_tool, args)
                        body = res.structured_content if isinstance(res.structured_content, dict) else {}
                        return keep(ToolResult(not res.is_error, body))

                    await self.script(Turn(msgs, call, say, offered, headers.get("X-Loom-Run-Id", "")))
            except Exception:
                # Only a connection Loom refused (no listing) goes on with LibreChat's cached tools.
                if results or text or listing_ok:
                    raise
                # LibreChat's cached definitions stand in for a refused listing, unless the
                # listing alone went out without the token: then the agent has no tools.
                offered_cached = offer(None) if self.listing_auth else []

                async def call_refused(tool: str, args: dict[str, Any]) -> ToolResult:
                    mcp_tool = record(librechat_name(tool), args, offered_cached)
                    await stream_call(tool_calls[-1])
                    return await refused(http, mcp_tool, args)

                await self.script(Turn(msgs, call_refused, say, offered_cached, headers.get("X-Loom-Run-Id", "")))
        return "".join(text), results, tool_calls

    # -- signed-in routes -------------------------------------------------------------------------

    def _not_browser(self, request: Request) -> Response | None:
        if "Mozilla/" not in request.headers.get("user-agent", ""):
            return Response('event: error\ndata: {"message":"Illegal request"}\n\n', status_code=200, media_type="text/event-stream")
        return None

    def _jwt_user(self, request: Request) -> str | None:
        auth = request.headers.get("authorization", "")
        return self.sessions.get(auth[7:]) if auth.startswith("Bearer ") else None

    async def _login(self, request: Request) -> Response:
        now = time.time()
        self.sign_ins = [t for t in self.sign_ins if now - t < SIGN_IN_WINDOW_S]
        if len(self.sign_ins) >= SIGN_IN_LIMIT:
            return JSONResponse({"message": "Too many login attempts, please try again after 5 minutes."}, status_code=429)
        self.sign_ins.append(now)
        if self.fail_next_login:
            self.fail_next_login -= 1
            return JSONResponse({"message": "Something went wrong"}, status_code=500)
        body = await request.json()
        user = self.users.get(str(body.get("email", "")))
        if user is None:
            return JSONResponse({"message": "Email does not exist."}, status_code=404)
        if user["password"] != body.get("password"):
            return JSONResponse({"message": "Incorrect password."}, status_code=404)
        jwt = secrets.token_urlsafe(32)
        self.sessions[jwt] = user["id"]
        self.log.append(f"login: user={user['id']} email={user['email']}")
        return JSONResponse({"token": jwt, "user": {"id": user["id"], "email": user["email"], "name": user["name"]}})

    async def _register(self, request: Request) -> Response:
        if not self.registration:
            return JSONResponse({"message": "Registration is not allowed."}, status_code=403)
        body = await request.json()
        name = str(body.get("name", ""))
        ok = 3 <= len(name) <= 80 and body.get("email") and body.get("password") and body.get("password") == body.get("confirm_password")
        if not ok or str(body["email"]) in self.users:
            # LibreChat logs the whole request here, password included.
            self.log.append(f"register: {json.dumps(body)}")
            if not ok:
                return JSONResponse({"message": "Invalid registration"}, status_code=404)
        else:
            uid = _nanoid(24)
            role = "ADMIN" if not self.users else "USER"
            self.users[str(body["email"])] = {"id": uid, "email": body["email"], "name": name, "password": body["password"], "role": role}
        return JSONResponse({"message": "Please check your email to verify your email address."})

    async def _keys(self, request: Request) -> Response:
        if (bad := self._not_browser(request)) is not None:
            return bad
        user = self._jwt_user(request)
        if user is None:
            return JSONResponse({"message": "Unauthorized"}, status_code=401)
        if request.method == "GET":
            keys = [
                {k: v for k, v in key.items() if k in ("id", "name", "keyPrefix", "lastUsedAt", "expiresAt", "createdAt")}
                for key in self.keys.values()
                if key["user"] == user
            ]
            return JSONResponse({"keys": keys})
        body = await request.json()
        raw = "sk-" + secrets.token_hex(24)
        kid = _nanoid(24)
        self.keys[kid] = {
            "id": kid,
            "name": str(body.get("name", "")),
            "sha256": hashlib.sha256(raw.encode()).hexdigest(),
            "keyPrefix": raw[:7],
            "user": user,
            "lastUsedAt": None,
            "expiresAt": body.get("expiresAt"),
            "createdAt": time.time(),
        }
        out = {k: self.keys[kid][k] for k in ("id", "name", "keyPrefix", "createdAt", "expiresAt")}
        return JSONResponse({**out, "key": raw}, status_code=201)

    async def _key_delete(self, request: Request) -> Response:
        if (bad := self._not_browser(request)) is not None:
            return bad
        user = self._jwt_user(request)
        key = self.keys.get(request.path_params["id"])
        if key is None or key["user"] != user:
            return JSONResponse({"error": "API key not found"}, status_code=404)
        del self.keys[key["id"]]
        return Response(status_code=204)

    async def _agents(self, request: Request) -> Response:
        if (bad := self._not_browser(request)) is not None:
            return bad
        user = self._jwt_user(request)
        if user is None:
            return JSONResponse({"message": "Unauthorized"}, status_code=401)
        if request.method == "GET":
            search = request.query_params.get("search", "")
            data = [a for a in self.agents.values() if a["author"] == user and search.lower() in a["name"].lower()]
            data.sort(key=lambda a: a["createdAt"])
            return JSONResponse(
                {
                    "object": "list",
                    "data": data,
                    "first_id": data[0]["id"] if data else None,
                    "last_id": data[-1]["id"] if data else None,
                    "has_more": False,
                    "after": None,
                }
            )
        body = await request.json()
        if not body.get("provider") or not body.get("model"):
            return JSONResponse({"error": "provider and model are required"}, status_code=400)
        aid = f"agent_{_nanoid()}"
        now = time.time()
        self.agents[aid] = {**body, "id": aid, "author": user, "created": int(now), "createdAt": now}
        return JSONResponse(self.agents[aid], status_code=201)

    async def _agent(self, request: Request) -> Response:
        if (bad := self._not_browser(request)) is not None:
            return bad
        user = self._jwt_user(request)
        agent = self.agents.get(request.path_params["id"])
        if agent is None or agent["author"] != user:
            return JSONResponse({"error": "Agent not found"}, status_code=404)
        if request.method == "GET":
            return JSONResponse(agent)
        if request.method == "DELETE":
            del self.agents[agent["id"]]
            return JSONResponse({"message": "Agent deleted"})
        agent.update({k: v for k, v in (await request.json()).items() if k not in ("id", "author")})
        agent["version"] = int(agent.get("version", 1)) + 1
        return JSONResponse(agent)

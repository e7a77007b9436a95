"""An OpenAI-compatible chat completions endpoint on loopback (`POST /v1/chat/completions`), for
`loom decisions extract` where no model runs here. It speaks the protocol (bearer key, model,
messages, max_tokens, a chat.completion answer with finish_reason) and answers as a scripted
model would:

- a read (the extraction system prompt): the scripted `decisions` whose first outcome quote is
  in the document part sent (or marked `anywhere`: a model's invention, sent with every part);
- a support check: a claim is supported when each of its quotes is in the part sent (unless its
  outcome is listed in `unsupported`); a stored decision is stated when its key is in `stated`,
  not stated when in `gone`, and left out otherwise (no verdict).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from loom_runner.http import HttpServer
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


@dataclass
class LlmEmulator:
    key: str = "sk-test-emulator"
    decisions: list[dict[str, Any]] = field(default_factory=list)
    unsupported: set[str] = field(default_factory=set)
    stated: set[str] = field(default_factory=set)
    gone: set[str] = field(default_factory=set)
    restated_by: dict[str, int] = field(default_factory=dict)
    # What a second check (no claims: a row read once more without candidates) says is gone; default `gone`.
    gone_on_recheck: set[str] | None = None
    cut_reads: int = 0  # the next n reads come back cut at max_tokens
    requests: list[dict[str, Any]] = field(default_factory=list)
    server: HttpServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.port}/v1"

    def kinds(self) -> list[str]:
        return ["support" if "You check claims" in r["messages"][0]["content"] else "read" for r in self.requests]

    async def _chat(self, request: Request) -> JSONResponse:
        if request.headers.get("authorization") != f"Bearer {self.key}":
            return JSONResponse({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}, status_code=401)
        body = await request.json()
        self.requests.append(body)
        system, user = body["messages"][0]["content"], body["messages"][1]["content"]
        finish = "stop"
        if "You check claims" in system:
            content = json.dumps(self._support(user))
        else:
            part = _norm(user.split("Document part:\n", 1)[1])
            found = [d for d in self.decisions if d.get("anywhere") or _norm(d["outcome_quotes"][0]) in part]
            content = json.dumps({"decisions": found})
            if self.cut_reads:
                self.cut_reads -= 1
                content, finish = content[: len(content) // 2], "length"
        return JSONResponse(
            {
                "id": f"chatcmpl-{len(self.requests)}",
                "object": "chat.completion",
                "model": body["model"],
                "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}],
                "usage": {"prompt_tokens": len(user) // 4, "completion_tokens": len(content) // 4, "total_tokens": 0},
            }
        )

    def _support(self, user: str) -> dict[str, Any]:
        part_text, check = user.split("\n\nCheck:\n", 1)
        part = _norm(part_text)
        body = json.loads(check)
        outcomes = {c["id"].split(".")[0]: c["claim"] for c in body["claims"] if c["id"].endswith(".outcome")}
        claims = []
        for c in body["claims"]:
            ok = bool(c["quotes"]) and all(_norm(q) in part for q in c["quotes"])
            if outcomes.get(c["id"].split(".")[0]) in self.unsupported and c["id"].endswith(".outcome"):
                ok = False
            claims.append({"id": c["id"], "supported": ok})
        gone = self.gone if body["claims"] or self.gone_on_recheck is None else self.gone_on_recheck
        stored = []
        for s in body["stored"]:
            if s["key"] in self.stated:
                stored.append({"key": s["key"], "stated": True, "restated_by": self.restated_by.get(s["key"])})
            elif s["key"] in gone:
                stored.append({"key": s["key"], "stated": False, "restated_by": None})
        return {"claims": claims, "stored": stored}

    @asynccontextmanager
    async def running(self) -> AsyncIterator[LlmEmulator]:
        self.server = HttpServer(Starlette(routes=[Route("/v1/chat/completions", self._chat, methods=["POST"])]))
        await self.server.start()
        try:
            yield self
        finally:
            await self.server.stop()

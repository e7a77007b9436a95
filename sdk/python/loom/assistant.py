"""`agent.assistant`: ask Loom's assistant, streaming or whole, over
``POST /v1/assistant/chat/completions``. A thin client: it holds no agent logic.

    async for event in agent.assistant.stream("Which inboxes have stale tasks?"):
        if isinstance(event, TextDelta):
            print(event.text, end="")
        elif isinstance(event, Done):
            print(event.answer.support, [c.ref for c in event.answer.citations if c.verified])

    answer = await agent.assistant.ask("Who are the admins here?")

Each answer is charged to the namespace's model budget. History is the caller's: pass the
earlier turns as ``history=[{"role": "user" | "assistant", "content": "..."}]``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx

from ._errors import from_response, from_transport_error

if TYPE_CHECKING:
    from ._agent import Agent

CHAT_PATH = "/v1/assistant/chat/completions"
OP_LABEL = "assistant.chat"


@dataclass(frozen=True, slots=True)
class Citation:
    """A citation as the server checked it."""

    kind: str
    ref: str
    verified: bool
    reason: str = ""
    anchor: str = ""
    text: str = ""


@dataclass(frozen=True, slots=True)
class Step:
    """One of the answer's tool calls, in fixed words (display only)."""

    op: str
    text: str
    ok: bool


@dataclass(slots=True)
class Answer:
    """A finished answer: its text, checked citations, support (none, supported, unsupported,
    unchecked), unknown names, and, for a streamed answer, its steps."""

    text: str
    citations: list[Citation] = field(default_factory=list)
    support: str = ""
    unknown_names: list[str] = field(default_factory=list)
    steps: list[Step] | None = None
    run_id: str = ""


@dataclass(frozen=True, slots=True)
class TextDelta:
    """More of the answer's text."""

    text: str


@dataclass(frozen=True, slots=True)
class Steps:
    """The answer's steps so far (the whole list each time)."""

    steps: list[Step]


@dataclass(frozen=True, slots=True)
class Done:
    """The answer is complete and checked."""

    answer: Answer


def _citations(raw: Any) -> list[Citation]:
    return [
        Citation(
            str(c.get("kind", "")),
            str(c.get("ref", "")),
            bool(c.get("verified")),
            str(c.get("reason", "")),
            str(c.get("anchor", "")),
            str(c.get("text", "")),
        )
        for c in raw or []
        if isinstance(c, dict)
    ]


def _steps(raw: Any) -> list[Step]:
    return [Step(str(s.get("op", "")), str(s.get("text", "")), bool(s.get("ok"))) for s in raw or [] if isinstance(s, dict)]


class AssistantClient:
    """Reached as `agent.assistant`."""

    def __init__(self, agent: Agent) -> None:
        self._agent = agent

    def _body(self, question: str, history: Sequence[Mapping[str, str]] | None, stream: bool) -> dict[str, Any]:
        messages = [{"role": str(m["role"]), "content": str(m["content"])} for m in history or ()]
        messages.append({"role": "user", "content": question})
        return {"model": "loom", "messages": messages, "stream": stream}

    def _headers(self, namespace: str | None) -> dict[str, str]:
        return {"X-Loom-Namespace": namespace} if namespace else {}

    async def ask(self, question: str, *, history: Sequence[Mapping[str, str]] | None = None, namespace: str | None = None) -> Answer:
        """The whole answer with its checked citations and support."""
        http: httpx.AsyncClient = self._agent._transport._http
        try:
            resp = await http.post(CHAT_PATH, json=self._body(question, history, False), headers=self._headers(namespace))
        except httpx.TransportError as exc:
            raise from_transport_error(exc, OP_LABEL) from exc
        if not resp.is_success:
            raise from_response(resp, OP_LABEL)
        body = resp.json()
        choice = (body.get("choices") or [{}])[0]
        return Answer(
            text=str((choice.get("message") or {}).get("content") or ""),
            citations=_citations(body.get("citations")),
            support=str(body.get("support", "")),
            unknown_names=[str(n) for n in body.get("unknown_names") or []],
            run_id=str(body.get("id") or ""),
        )

    async def stream(
        self, question: str, *, history: Sequence[Mapping[str, str]] | None = None, namespace: str | None = None
    ) -> AsyncIterator[TextDelta | Steps | Done]:
        """Yield the text as it comes, the steps as they land, and last `Done` with the answer
        (its steps the final list; `loom.text_done` is skipped)."""
        http: httpx.AsyncClient = self._agent._transport._http
        answer = Answer(text="")
        parts: list[str] = []
        try:
            async with http.stream(
                "POST",
                CHAT_PATH,
                json=self._body(question, history, True),
                headers=self._headers(namespace),
                timeout=httpx.Timeout(60.0, read=None),
            ) as resp:
                if not resp.is_success:
                    await resp.aread()
                    raise from_response(resp, OP_LABEL)
                async for line in resp.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    payload = line[5:].strip()
                    if payload == "[DONE]":
                        break
                    try:
                        event = json.loads(payload)
                    except ValueError:
                        continue
                    # Loom's own events are chunks with no choices, named by `loom_event`.
                    kind = event.get("loom_event") or event.get("object")
                    if kind == "chat.completion.chunk":
                        answer.run_id = answer.run_id or str(event.get("id") or "")
                        for choice in event.get("choices") or []:
                            text = (choice.get("delta") or {}).get("content")
                            if isinstance(text, str) and text:
                                parts.append(text)
                                yield TextDelta(text)
                    elif kind == "loom.step":
                        yield Steps(_steps(event.get("steps")))
                    elif kind == "loom.citations":
                        answer.citations = _citations(event.get("citations"))
                        answer.support = str(event.get("support", ""))
                        answer.unknown_names = [str(n) for n in event.get("unknown_names") or []]
                        answer.steps = _steps(event["steps"]) if "steps" in event else None
        except httpx.TransportError as exc:
            raise from_transport_error(exc, OP_LABEL) from exc
        answer.text = "".join(parts)
        yield Done(answer)


__all__ = ["Answer", "AssistantClient", "Citation", "Done", "Step", "Steps", "TextDelta"]

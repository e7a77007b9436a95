"""`agent.assistant`: ask Loom's assistant, streaming or whole, over
``POST /v1/assistant/chat/completions``. A thin client: it holds no agent logic. It behaves as
the TypeScript SDK's ``loom.assistant`` does.

    stream = agent.assistant.stream("Which inboxes have stale tasks?")
    async for text in stream:              # the answer's text deltas, nothing else
        print(text, end="")
    answer = await stream.final()          # text, checked citations, support, steps
    print(answer.support, [c["ref"] for c in answer.citations or [] if c["verified"]])

    answer = await agent.assistant.ask("Who are the admins here?")

`loom.step` and `loom.text_done` are not text: the stream skips them, keeping the steps as they
come (``stream.steps``) and the final list on the answer. ``await stream.aclose()`` (or leaving
``async with agent.assistant.stream(...) as stream:``) closes the request, and LibreChat stops
the run. Each answer is
charged to the namespace's model budget. History is the caller's: pass the earlier turns as
``history=[{"role": "user" | "assistant", "content": "..."}]``.

A citation is the generated ``Citation`` (``loom.assistant.v1.Citation`` as JSON), the type the
``assistant.ask`` op's answer holds too: ``{kind, ref, verified, reason, anchor, text}``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx

from ._errors import LoomError, error_class, from_response, from_transport_error
from ._ops import Citation

if TYPE_CHECKING:
    from ._agent import Agent

CHAT_PATH = "/v1/assistant/chat/completions"
OP_LABEL = "assistant.chat"


@dataclass(frozen=True, slots=True)
class Step:
    """One of the answer's tool calls, in fixed words (display only)."""

    op: str
    text: str
    ok: bool


@dataclass(slots=True)
class Answer:
    """A finished answer: its text, checked citations, support (none, supported, unsupported,
    unchecked), unknown names, and, for a streamed answer, its steps. A streamed answer whose
    checks never came (the stream was cut or left early) has citations and support None."""

    text: str
    citations: list[Citation] | None = field(default_factory=list)
    support: str | None = ""
    unknown_names: list[str] = field(default_factory=list)
    steps: list[Step] | None = None
    steps_cut: bool = False
    run_id: str = ""
    # Left before it ended (the loop broke, or aclose()).
    stopped: bool = False


def _citations(raw: Any) -> list[Citation]:
    return [
        Citation(
            kind=str(c.get("kind", "")),
            ref=str(c.get("ref", "")),
            verified=bool(c.get("verified")),
            reason=str(c.get("reason", "")),
            anchor=str(c.get("anchor", "")),
            text=str(c.get("text", "")),
        )
        for c in raw or []
        if isinstance(c, dict)
    ]


def _support(raw: Any) -> str:
    # A value this SDK does not know reads as unchecked (spec 000 "Rendering").
    return raw if raw in ("none", "supported", "unsupported") else "unchecked"


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
            support=_support(body.get("support")),
            unknown_names=[str(n) for n in body.get("unknown_names") or []],
            run_id=str(body.get("id") or ""),
        )

    def stream(self, question: str, *, history: Sequence[Mapping[str, str]] | None = None, namespace: str | None = None) -> AnswerStream:
        """The answer as it comes: iterate it for the text, then `await stream.final()`."""
        return AnswerStream(self._agent._transport._http, self._body(question, history, True), self._headers(namespace))


class AnswerStream:
    """One streamed answer, read once. Iterating yields the text deltas; `citations`, `support`
    and `steps` fill in as their events arrive; `final()` is the answer once the stream ends
    (reading the rest itself when nothing else does). A refusal, a `loom.error` event or a
    broken connection raises a LoomError from the loop (and from `final()`)."""

    def __init__(self, http: httpx.AsyncClient, body: dict[str, Any], headers: dict[str, str]) -> None:
        self._http = http
        self._body = body
        self._headers = headers
        self._parts: list[str] = []
        self.citations: list[Citation] | None = None
        self.support: str | None = None
        self.unknown_names: list[str] = []
        self.steps: list[Step] = []
        self.steps_cut = False
        self.run_id = ""
        self._gen: AsyncIterator[str] | None = None
        self._done = False
        self._stopped = False
        self._error: LoomError | None = None

    @property
    def text(self) -> str:
        return "".join(self._parts)

    def __aiter__(self) -> AsyncIterator[str]:
        if self._gen is not None:
            raise RuntimeError("an AnswerStream is read once")
        self._gen = self._read()
        return self._gen

    async def final(self) -> Answer:
        """The answer once the stream has ended."""
        if self._gen is None:
            async for _ in self:
                pass
        if self._error is not None:
            raise self._error
        return Answer(
            text=self.text,
            citations=self.citations,
            support=self.support,
            unknown_names=self.unknown_names,
            steps=self.steps,
            steps_cut=self.steps_cut,
            run_id=self.run_id,
            stopped=self._stopped,
        )

    async def __aenter__(self) -> AnswerStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop reading: closes the request (LibreChat stops the run). Leaving an `async with`
        block does it; a loop left with `break` leaves the request open until this."""
        if self._gen is None:
            self._gen = self._read()
        aclose = getattr(self._gen, "aclose", None)
        if aclose is not None:
            await aclose()
        if not self._done:
            self._stopped = True

    def _apply(self, event: dict[str, Any]) -> str | None:
        """Takes one event in; the text it carries, if any."""
        kind = event.get("loom_event")
        if kind is None:
            self.run_id = self.run_id or str(event.get("id") or "")
            texts = [c.get("delta", {}).get("content") for c in event.get("choices") or [] if isinstance(c, dict)]
            text = "".join(t for t in texts if isinstance(t, str))
            if text:
                self._parts.append(text)
            return text or None
        if kind == "loom.step":
            self.steps = _steps(event.get("steps"))
        elif kind == "loom.citations":
            self.citations = _citations(event.get("citations"))
            self.support = _support(event.get("support"))
            self.unknown_names = [str(n) for n in event.get("unknown_names") or []]
            if "steps" in event:  # none: the final read failed, and the live list stands
                self.steps = _steps(event["steps"])
            self.steps_cut = event.get("steps_cut") is True
        elif kind == "loom.error":
            raw = event.get("error")
            payload: dict[str, Any] = raw if isinstance(raw, dict) else {}
            code = str(payload.get("code") or "INTERNAL")
            detail = payload.get("detail")
            raise error_class(code, None)(
                code,
                str(payload.get("message") or code),
                dict(detail) if isinstance(detail, dict) else {},
                None,
                retryable=bool(payload.get("retryable")),
                op=OP_LABEL,
            )
        return None  # loom.text_done, and any event this SDK does not know

    async def _read(self) -> AsyncIterator[str]:
        try:
            async with self._http.stream(
                "POST", CHAT_PATH, json=self._body, headers=self._headers, timeout=httpx.Timeout(60.0, read=None)
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
                    if isinstance(event, dict):
                        text = self._apply(event)
                        if text:
                            yield text
            self._done = True
        except httpx.TransportError as exc:
            self._error = from_transport_error(exc, OP_LABEL)
            raise self._error from exc
        except LoomError as exc:
            self._error = exc
            raise
        finally:
            if not self._done and self._error is None:
                self._stopped = True


__all__ = ["Answer", "AnswerStream", "AssistantClient", "Citation", "Step"]

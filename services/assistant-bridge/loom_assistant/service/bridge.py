"""The bridge (spec 000 "The bridge: each caller's own identity"): three steps per answer.

1. Refuse before LibreChat is called (revoked/expired, an answer's own token, org-wide,
   narrowed, too little life left, no viewer, model calls off, over budget, too many answers).
2. Delegate the answer's token from the caller's (core's `delegate`): viewer on the request's
   namespace alone, the caller's subject, consumer loom-assistant, id prefix assistant-answer-.
3. Call LibreChat's agents API with the service key, the agent id as model and the answer token
   as parent_message_id, relay the stream, then check the citations.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import defaultdict
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
from loom_core.assistant_paths import not_configured
from loom_core.chain import CallContext, Ledger
from loom_core.chain.interceptor import ANSWER_CONSUMER
from loom_core.chain.ledger import LedgerRow
from loom_core.errors import ErrorCode, Forbidden, LoomError, RateLimited, Unavailable, ValidationFailed
from loom_core.identity import Authenticator, Principal, TokenCodec
from loom_core.identity.delegation import delegate
from loom_core.roles import Role
from loom_core.store import Store

from ..domain import caller as caller_rules
from ..domain import history as history_rules
from ..domain import pricing
from ..domain.steps import Step, steps_of
from ..domain.stream import ToolCalls
from ..domain.token_path import TokenPath
from ..settings import AssistantSettings
from ..store import controls
from ..store import ledger as ledger_store
from .checks import CALLS_BOUND_S, AnswerScope, Checker
from .librechat import LibreChatClient, LibreChatError, parse_chunk, sse_data
from .setup import ServiceSetup, Status

log = logging.getLogger(__name__)

ANSWER_OP = "assistant.ask"
# Fields Loom adds to an OpenAI-shaped answer: the agent's LibreChat id (`model` is the model's
# name), and on Loom's own events which event it is (loom.step, loom.text_done, loom.citations,
# loom.error).
AGENT_FIELD = "loom_agent_id"
EVENT_FIELD = "loom_event"
STEP_TIMES = (0.0, 1.0, 2.0)
STEP_EVERY_S = 4.0


@dataclass(frozen=True, slots=True)
class TokenLimits:
    """Identity's token limits (core settings) an answer's delegated token obeys."""

    max_ttl_seconds: int
    max_chain_depth: int


@dataclass(slots=True)
class Admission:
    """An admitted answer: the caller, its namespace and role, and the answer's token."""

    caller: Principal
    namespace: str
    role: Role
    answer: Principal
    answer_token: str
    started: float
    # The chain's request id: its ledger row for this answer gets the answer's spend and run.
    request_id: str
    # The LibreChat key and agent the answer is asked with.
    api_key: str
    agent_id: str
    released: bool = False
    # The upstream run, once charged; a stream's refusal after its first byte (the chain records it).
    run_id: str = ""
    error: LoomError | None = None


@dataclass(slots=True)
class Answer:
    text: str
    run_id: str
    usage: pricing.Usage | None
    cut: bool


def _token_of(p: Principal) -> caller_rules.CallerToken:
    return caller_rules.CallerToken(p.jti, p.consumer, p.parents, dict(p.roles), p.read_scope, p.exp, p.sid)


@dataclass(eq=False, slots=True, kw_only=True)
class Bridge:
    settings: AssistantSettings
    token_limits: TokenLimits
    store: Store
    auth: Authenticator
    codec: TokenCodec
    ledger: Ledger
    setup: ServiceSetup | None
    client: LibreChatClient | None
    checker: Checker
    model: str
    # When this process took the agent as its model (an OpenAI model's `created`).
    created: int = field(default_factory=lambda: int(time.time()), init=False)
    _running: defaultdict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int), init=False)
    # Whether answers' tokens reach Loom through LibreChat's MCP header (auth_off).
    token_path: TokenPath = field(default_factory=TokenPath, init=False)
    token_path_observed: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    # Answers (by run id) an MCP request of which reached Loom with no token at all (at
    # initialize or tools/list, where a LibreChat whose header is off leaves the agent no
    # tools, so the answer makes no tool call that could show it) -> when it was seen.
    _tokenless: dict[str, float] = field(default_factory=dict, init=False)
    _background: set[asyncio.Task[None]] = field(default_factory=set, init=False)
    # request id -> (spend, run id) to put on the chain's ledger row for the answer (both
    # surfaces: assistant.ask and the chat route are each one call through the chain).
    pending: dict[str, tuple[float, str]] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        if self.setup is not None:
            # Only a configured assistant answers, so only then does a row need its spend stamped.
            self.ledger.observers.append(self._stamp_answer)

    # -- status ------------------------------------------------------------------------------

    def status(self) -> tuple[Status, str]:
        if not self.settings.assistant_librechat_url or self.setup is None:
            return Status.NOT_CONFIGURED, ""
        if self.setup.state.status == Status.READY and self.token_path.off(time.monotonic()):
            return Status.AUTH_OFF, ""
        return self.setup.state.status, self.setup.state.failure_kind

    def _available(self) -> tuple[str, str]:
        status, _ = self.status()
        if status == Status.NOT_CONFIGURED:
            raise not_configured()
        if status != Status.READY or self.setup is None or self.setup.row is None:
            raise Unavailable(
                ErrorCode.ASSISTANT_UNAVAILABLE,
                "the assistant cannot answer now",
                {"reason": status.value if status != Status.READY else "starting"},
            )
        return self.setup.row.api_key, self.setup.row.agent_id

    # -- step 1 and 2 ------------------------------------------------------------------------

    async def admit(self, ctx: CallContext) -> Admission:
        """Refuse or admit the chain's call (its token verified, its role checked, its rate
        class spent, the policy gate passed); an admitted answer holds one of the namespace's
        slots until release. The chain ledgers the call, refusals included."""
        caller, namespace = ctx.principal, ctx.namespace
        now = int(time.time())
        refusal = caller_rules.first_refusal(
            _token_of(caller), namespace=namespace, now=now, answer_ttl_s=self.settings.assistant_answer_ttl_s
        )
        if refusal is not None:
            raise Forbidden(refusal.code, refusal.message, refusal.detail)
        if not namespace:
            raise ValidationFailed("namespace: required (X-Loom-Namespace, the argument, or the token's default)", {"field": "namespace"})
        role = await self.auth.role_in(caller, namespace)
        if role < Role.VIEWER:
            raise Forbidden(ErrorCode.AUTH_INSUFFICIENT, f"asking the assistant needs the viewer role in {namespace!r}")
        api_key, agent_id = self._available()
        try:
            enabled, spent, own_cap = await asyncio.gather(
                controls.model_calls_enabled(self.store, org=caller.org),
                ledger_store.spent_today(self.store, org=caller.org, namespace=namespace),
                controls.cost_cap(self.store, org=caller.org, namespace=namespace),
            )
        except LoomError as exc:
            raise Unavailable(ErrorCode.BACKEND_UNAVAILABLE, "the namespace's spend could not be read", {"retry_after_s": 1}) from exc
        if not enabled:
            raise Forbidden(ErrorCode.AUTH_INSUFFICIENT, "an admin switched model calls off for this org", {"reason": "model_calls_off"})
        cap = self.settings.default_daily_cost_cap_usd if own_cap is None else own_cap
        if pricing.over_share(spent, cap, self.settings.assistant_budget_share):
            raise RateLimited(
                ErrorCode.RATE_LIMITED,
                "the namespace's assistant budget for today is spent",
                {
                    "reason": "budget",
                    "spent_usd": round(spent, 6),
                    "cap_usd": cap,
                    "cap_source": "default" if own_cap is None else "namespace",
                    "share": self.settings.assistant_budget_share,
                },
            )
        slot = (caller.org, namespace)
        if self._running[slot] >= self.settings.assistant_concurrent_answers:
            raise RateLimited(
                ErrorCode.RATE_LIMITED,
                "the namespace is running its most concurrent answers",
                {"reason": "concurrent_answers", "limit": self.settings.assistant_concurrent_answers, "retry_after_s": 1},
            )
        answer = delegate(
            caller,
            now=now,
            ttl_seconds=self.settings.assistant_answer_ttl_s,
            max_ttl_seconds=max(self.token_limits.max_ttl_seconds, self.settings.assistant_answer_ttl_s),
            max_chain_depth=self.token_limits.max_chain_depth,
            creator_grants=await self.auth.live_grants(caller.org, caller.sub),
            roles={namespace: Role.VIEWER.label},
            default_namespace=namespace,
            consumer=ANSWER_CONSUMER,
            ends_with_session=True,
            token_id_prefix=caller_rules.ANSWER_TOKEN_PREFIX,
        )
        self._running[slot] += 1
        return Admission(caller, namespace, role, answer, self.codec.encode(answer), time.time(), ctx.request_id, api_key, agent_id)

    def release(self, adm: Admission) -> None:
        if not adm.released:
            adm.released = True
            slot = (adm.caller.org, adm.namespace)
            self._running[slot] = max(0, self._running[slot] - 1)

    def charge(self, adm: Admission, *, usage: pricing.Usage | None, run_id: str) -> float:
        """The answer's spend (its usage at the model's rate; the ceiling when it was cut, so a
        timed-out or stopped answer is never $0), kept for the chain's ledger row."""
        cost = pricing.answer_cost(self.model, usage, ceiling_usd=self.settings.assistant_answer_ceiling_usd)
        adm.run_id = run_id
        self.pending[adm.request_id] = (cost, run_id)
        return cost

    def _left_s(self, adm: Admission) -> float:
        return max(0.0, self.settings.assistant_answer_ttl_s - (time.time() - adm.started))

    def _timed_out(self) -> LoomError:
        ttl = self.settings.assistant_answer_ttl_s
        return Unavailable(
            ErrorCode.OVERLOADED,
            f"the answer ran past its limit of {ttl} s (LOOM_ASSISTANT_ANSWER_TTL_S); ask a narrower question",
            {"reason": "answer_ttl", "limit_s": ttl},
        )

    # -- step 3 ------------------------------------------------------------------------------

    def body(self, adm: Admission, messages: Any) -> dict[str, Any]:
        line = caller_rules.context_line(_token_of(adm.caller), adm.role.label)
        try:
            cleaned = history_rules.clean_messages(messages, line)
        except history_rules.HistoryError as exc:
            raise ValidationFailed(str(exc), {"field": exc.field, "reason": exc.reason}) from None
        # No conversation_id (LibreChat stores none on this path and answers 404 for one),
        # no system message, no files: the agent id as model, the answer token as parent.
        return {"model": adm.agent_id, "messages": cleaned, "parent_message_id": adm.answer_token}

    def _upstream_error(self, exc: LibreChatError) -> LoomError:
        if exc.status in (401, 404) and self.setup is not None:
            # The key or the agent is gone: set up again.
            asyncio.get_running_loop().create_task(self.setup.repair())
        return _failing()

    async def whole(self, adm: Admission, messages: Any) -> dict[str, Any]:
        """A whole answer: the text, its checked citations and support."""
        assert self.client is not None
        try:
            body = self.body(adm, messages)
            try:
                out = await asyncio.wait_for(self.client.chat(adm.api_key, body), self._left_s(adm))
            except LibreChatError as exc:
                raise self._upstream_error(exc) from None
            except TimeoutError:
                # LibreChat ran the answer to its limit: what it spent is unknown, so the ceiling.
                self.charge(adm, usage=None, run_id="")
                raise self._timed_out() from None
            except (OSError, httpx.HTTPError) as exc:
                raise _failing() from exc
            choice = (out.get("choices") or [{}])[0]
            text = str((choice.get("message") or {}).get("content") or "")
            run_id = str(out.get("id") or "")
            calls = len((choice.get("message") or {}).get("tool_calls") or [])
            self.charge(adm, usage=pricing.usage_of(out), run_id=run_id)
            verdict = await self.checker.verdict(
                self._scope(adm), run_id, text, streamed=False, tool_calls=self._rows_coming(run_id, calls)
            )
            self._observe_later(adm, run_id, calls, waited=verdict.calls_waited)
            out["model"] = self.model
            out[AGENT_FIELD] = adm.agent_id
            out["citations"] = verdict.wire_citations()
            out["support"] = verdict.support.value
            out["unknown_names"] = verdict.unknown_names
            return out
        finally:
            self.release(adm)

    async def stream(self, adm: Admission, messages: Any) -> AnswerStream:
        """Open the upstream stream (errors raise here, before any byte), then the relay."""
        assert self.client is not None
        try:
            body = self.body(adm, messages)
        except LoomError:
            self.release(adm)
            raise
        stack = contextlib.AsyncExitStack()
        try:
            resp = await asyncio.wait_for(
                stack.enter_async_context(self.client.stream_chat(adm.api_key, body)),
                min(self.settings.assistant_upstream_timeout_s, self._left_s(adm)),
            )
        except LibreChatError as exc:
            await stack.aclose()
            self.release(adm)
            raise self._upstream_error(exc) from None
        except TimeoutError as exc:
            # Asked, and no answer began in time: closing the request aborts the run, which may
            # already have spent; a service that does not answer is failing.
            await stack.aclose()
            self.charge(adm, usage=None, run_id="")
            self.release(adm)
            raise _failing() from exc
        except (OSError, httpx.HTTPError) as exc:
            await stack.aclose()
            self.release(adm)
            raise _failing() from exc

        async def never_relayed() -> None:
            # The client left before the first byte: close the upstream, charge, free the slot.
            await stack.aclose()
            self.charge(adm, usage=None, run_id="")
            self.release(adm)

        return AnswerStream(self._relay(adm, resp, stack), never_relayed)

    async def _relay(self, adm: Admission, resp: Any, stack: contextlib.AsyncExitStack) -> AsyncGenerator[bytes, None]:
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        state = _Streamed()
        shown: list[list[dict[str, Any]]] = [[]]

        async def pump() -> None:
            try:
                async for line in resp.aiter_lines():
                    data = sse_data(line)
                    if data is None:
                        continue
                    if data.strip() == "[DONE]":
                        state.done = True
                        break
                    chunk = parse_chunk(data)
                    if chunk is None:
                        continue  # not a chunk a client could parse: nothing to relay
                    state.run_id = state.run_id or str(chunk.get("id") or "")
                    state.calls.add_chunk(chunk)
                    for ch in chunk.get("choices") or []:
                        content = (ch.get("delta") or {}).get("content") if isinstance(ch, dict) else None
                        if isinstance(content, str):
                            state.text.append(content)
                    state.usage = pricing.usage_of(chunk) or state.usage
                    await queue.put(("chunk", self._relayed(adm, chunk)))
            except Exception:  # noqa: BLE001 - a broken upstream ends the text; the answer is cut
                log.warning("assistant: the upstream stream broke")
            finally:
                await queue.put(("end", None))

        async def ticker() -> None:
            waited = 0.0
            schedule = list(STEP_TIMES)
            while True:
                target = schedule.pop(0) if schedule else waited + STEP_EVERY_S
                await asyncio.sleep(max(0.0, target - waited))
                waited = target
                try:
                    steps = await self._live_steps(adm, state.run_id)
                except Exception:  # noqa: BLE001 - a read that fails ends the steps
                    return
                wire = [s.wire() for s in steps]
                if wire != shown[0]:
                    shown[0] = wire
                    await queue.put(("step", self._event(state.run_id, "loom.step", steps=wire)))

        pump_task = asyncio.create_task(pump())
        tick_task = asyncio.create_task(ticker())
        try:
            while True:
                try:
                    # The answer's limit holds on a stream as on a whole answer.
                    kind, item = await asyncio.wait_for(queue.get(), self._left_s(adm))
                except TimeoutError:
                    err = self._timed_out()
                    adm.error = err
                    yield self._event(state.run_id, "loom.error", error=err.to_payload())
                    yield b"data: [DONE]\n\n"
                    return
                if kind == "end":
                    break
                yield item
            tick_task.cancel()
            await asyncio.gather(tick_task, return_exceptions=True)
            text = "".join(state.text)
            yield self._event(state.run_id, "loom.text_done")
            verdict = await self.checker.verdict(
                self._scope(adm), state.run_id, text, streamed=True, tool_calls=self._rows_coming(state.run_id, len(state.calls))
            )
            fields: dict[str, Any] = {
                "citations": verdict.wire_citations(),
                "support": verdict.support.value,
                "unknown_names": verdict.unknown_names,
            }
            if verdict.steps is not None:
                fields["steps"] = [s.wire() for s in verdict.steps]
            if verdict.steps_cut:
                fields["steps_cut"] = True
            yield self._event(state.run_id, "loom.citations", **fields)
            yield b"data: [DONE]\n\n"
            self._observe_later(adm, state.run_id, len(state.calls), waited=verdict.calls_waited)
        finally:
            # Shielded: a disconnect cancels this generator's scope, and every await of the
            # cleanup would be cancelled again before the upstream request is closed.
            with anyio.CancelScope(shield=True):
                pump_task.cancel()
                tick_task.cancel()
                await asyncio.gather(pump_task, tick_task, return_exceptions=True)
                # Closing the upstream request makes LibreChat abort the run.
                await stack.aclose()
                self.charge(adm, usage=state.usage if state.done else None, run_id=state.run_id)
                self.release(adm)

    def observe_tokenless(self, run_id: str) -> None:
        """The MCP door saw a request of answer `run_id` on the assistant toolset with no token."""
        now = time.monotonic()
        horizon = now - self.settings.assistant_answer_ttl_s
        for old in [r for r, t in self._tokenless.items() if t < horizon]:
            del self._tokenless[old]
        self._tokenless[run_id] = now

    def _rows_coming(self, run_id: str, tool_calls: int) -> int:
        """The ledger rows the answer's checks wait for: one a reported tool call, none when its
        MCP requests reached Loom with no token (refused before an identity, they leave no row:
        waiting for them only ran the checks' five seconds out)."""
        return 0 if run_id in self._tokenless else tool_calls

    def _observe_later(self, adm: Admission, run_id: str, tool_calls: int, *, waited: bool) -> None:
        tokenless = self._tokenless.pop(run_id, None) is not None
        if tool_calls > 0 or tokenless:
            task = asyncio.get_running_loop().create_task(self.observe_token_path(adm, tool_calls, waited=waited, tokenless=tokenless))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def observe_token_path(self, adm: Admission, tool_calls: int, *, waited: bool = False, tokenless: bool = False) -> None:
        """After an answer with tool calls: did any land under the answer's token? Within the
        calls' three-second bound, or one read when the answer's checks already waited for its
        calls' rows; a read that fails says nothing. An answer whose MCP connection reached Loom
        with no token (`tokenless`) is a miss without a read. Sets `token_path_observed` when done."""
        try:
            await self._observe_token_path(adm, tool_calls, waited, tokenless)
        finally:
            self.token_path_observed.set()

    async def _observe_token_path(self, adm: Admission, tool_calls: int, waited: bool, tokenless: bool) -> None:
        if tokenless:
            n, tool_calls = 0, max(tool_calls, 1)
        elif tool_calls <= 0:
            return
        else:
            deadline = time.monotonic() + (0.0 if waited else CALLS_BOUND_S)
            try:
                while True:
                    await self.checker.flush()
                    n = await ledger_store.rows_under_token(self.store, org=adm.caller.org, token_id=adm.answer.jti)
                    if n > 0 or time.monotonic() >= deadline:
                        break
                    await asyncio.sleep(min(0.1, self.checker.ledger_wait_s))
            except Exception:  # noqa: BLE001 - an unreadable ledger decides nothing
                log.warning("assistant: could not read the answer's calls for the token path")
                return
        if n == 0:
            try:
                self.auth.verify(adm.answer_token)
            except LoomError:
                # The answer's token was ended (its caller revoked, or it ran out): its refused
                # calls say nothing about LibreChat, and a caller cannot switch the assistant off
                # for everyone by revoking its own token mid-answer.
                return
        was_off = self.token_path.off(time.monotonic())
        self.token_path.observe(tool_calls=tool_calls, rows_under_token=n, now=time.monotonic())
        if self.token_path.off(time.monotonic()) and not was_off:
            log.warning(
                "assistant: LibreChat's tool calls reach Loom without the answer's token (its MCP Authorization header is off);"
                " answering auth_off"
            )

    async def _live_steps(self, adm: Admission, run_id: str) -> list[Step]:
        if run_id:
            rows = await ledger_store.run_rows(self.store, org=adm.caller.org, run_id=run_id, subject=adm.caller.sub, limit=200)
        else:
            rows = await ledger_store.live_rows(
                self.store, org=adm.caller.org, namespace=adm.namespace, subject=adm.caller.sub, since_s=adm.started, limit=200
            )
        return steps_of(rows)

    def _scope(self, adm: Admission) -> AnswerScope:
        return AnswerScope(adm.caller.org, adm.namespace, adm.caller.sub, adm.answer_token, adm.started)

    def _relayed(self, adm: Admission, chunk: dict[str, Any]) -> bytes:
        """LibreChat's chunk as the caller sees it: `model` the model's name (LibreChat puts the
        agent id there), the agent id in Loom's own field."""
        out = {**chunk, "model": self.model, AGENT_FIELD: adm.agent_id}
        return f"data: {json.dumps(out, separators=(',', ':'))}\n\n".encode()

    def _event(self, run_id: str, kind: str, **fields: Any) -> bytes:
        """One of Loom's own events, shaped as a chunk an OpenAI client parses (no choices, so a
        client that guards for them skips it), named by `loom_event`."""
        event = {
            "id": run_id,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": self.model,
            "choices": [],
            EVENT_FIELD: kind,
            **fields,
        }
        return f"data: {json.dumps(event, separators=(',', ':'))}\n\n".encode()

    def models(self) -> dict[str, Any]:
        """GET /v1/assistant/models: the agent as the one model (an OpenAI model list)."""
        _, agent_id = self._available()
        return {
            "object": "list",
            "data": [{"id": self.model, "object": "model", "created": self.created, "owned_by": "loom", AGENT_FIELD: agent_id}],
        }

    # -- the ledger --------------------------------------------------------------------------

    def _stamp_answer(self, row: LedgerRow) -> None:
        """Puts an answer's spend and run on the row the chain records for its call."""
        if row.get("op") == ANSWER_OP and self.pending:
            stamp = self.pending.pop(str(row.get("request_id", "")), None)
            if stamp is not None:
                row["upstream_cost_usd"], run_id = stamp
                row["run_id"] = row.get("run_id") or run_id


class AnswerStream:
    """One streamed answer's bytes. `aclose` ends it whether or not it was ever iterated (an
    async generator never started runs no `finally`), so the upstream request, the charge and
    the slot are settled either way."""

    def __init__(self, relay: AsyncGenerator[bytes, None], never_relayed: Callable[[], Awaitable[None]]) -> None:
        self._relay = relay
        self._never_relayed = never_relayed
        self._started = False

    def __aiter__(self) -> AnswerStream:
        return self

    async def __anext__(self) -> bytes:
        self._started = True
        return await self._relay.__anext__()

    async def aclose(self) -> None:
        if self._started:
            await self._relay.aclose()
        else:
            self._started = True
            await self._never_relayed()


@dataclass(slots=True)
class _Streamed:
    """What the relay has read of LibreChat's stream so far."""

    run_id: str = ""
    text: list[str] = field(default_factory=list)
    usage: pricing.Usage | None = None
    done: bool = False
    calls: ToolCalls = field(default_factory=ToolCalls)


def _failing() -> LoomError:
    """LibreChat failed (an error status, no connection, no answer begun in time)."""
    return Unavailable(ErrorCode.ASSISTANT_UNAVAILABLE, "the assistant could not answer", {"reason": "failing"})

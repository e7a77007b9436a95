"""The shared server interceptor chain: verify token -> role and scope -> rate class ->
history-policy gate -> handler -> one ledger row. Every op on every plane passes it; a door
(REST, MCP, SDK) reaches a handler only through it: over gRPC (`intercept_service` -> `run`),
or in process when the plane runs in the gateway's process (`call`, embedded mode). One chain,
two transports: same metadata, same errors, same ledger row."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import grpc
from google.protobuf.message import Message

from ..catalog import Catalog, OpSpec, normalize_timestamps
from ..errors import ErrorCode, Forbidden, LoomError, ValidationFailed
from ..grpc_errors import to_rpc_status
from ..identity import Authenticator, Principal
from ..metrics import LATENCY, REQUESTS
from ..roles import Role
from .context import (
    MD_AGENT,
    MD_AUTHORIZATION,
    MD_NAMESPACE,
    MD_ORG,
    MD_REQUEST_ID,
    MD_RUN_ID,
    MD_SESSION,
    MD_TRANSPORT,
    MD_USER,
    CallContext,
    bearer_token,
    reset_current_call,
    set_current_call,
)
from .gate import GateCall, PolicyGate, gated
from .ledger import Ledger, LedgerCaller, call_row, ledger_args, out_hits_of
from .ratelimit import RateLimiter

log = logging.getLogger(__name__)

# A server context and a method handler over Loom's messages (every op is unary Message -> Message).
# (Strings: grpc's classes are generic in its stubs only.)
Context: TypeAlias = "grpc.aio.ServicerContext[Message, Message]"
MethodHandler: TypeAlias = "grpc.RpcMethodHandler[Message, Message]"
Behavior = Callable[[Message, Context], Awaitable[Message]]

# An assistant answer's token (spec 000 "The bridge"): its consumer, and the toolset it reads by.
ANSWER_CONSUMER = "loom-assistant"
ANSWER_TOOLSET = "assistant"
# Ops outside the toolset an answer's token still reaches: assistant.ask, to meet its own
# refusal (ASSISTANT_SELF_CALL, ledgered as a refused answer), and help.verify, which the
# bridge's citation check calls with the answer's token.
_ANSWER_ALSO = frozenset({"assistant.ask", "help.verify"})


def answer_may_call(op: OpSpec) -> bool:
    """An answer's token calls the assistant toolset's reads and nothing else (spec 000: the
    agent writes nothing), on every door and toolset: a write, a mint and every op outside the
    toolset are refused before their handler."""
    return op.name in _ANSWER_ALSO or (ANSWER_TOOLSET in op.toolsets and not op.write_shaped)


@dataclass(eq=False, slots=True)
class OpChainInterceptor(grpc.aio.ServerInterceptor):
    catalog: Catalog
    auth: Authenticator
    limiter: RateLimiter
    gate: PolicyGate
    ledger: Ledger
    _wrapped: dict[str, MethodHandler] = field(default_factory=dict, init=False)
    _metric_children: dict[tuple[str, str, str], tuple[Any, Any]] = field(default_factory=dict, init=False)
    # The plane whose server this chain guards (None: any); another plane's op is not wrapped.
    plane: str | None = field(default=None, init=False)

    # grpc's stub makes intercept_service generic over any request and response types; this chain
    # wraps only Loom's ops (Message -> Message) and passes every other handler on as it came.
    async def intercept_service(  # type: ignore[override]
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[MethodHandler | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> MethodHandler | None:
        # A server's method -> handler map is fixed once it starts: wrap each op once, not per call.
        wrapped = self._wrapped.get(handler_call_details.method)
        if wrapped is not None:
            return wrapped
        handler = await continuation(handler_call_details)
        op = self.catalog.by_path.get(handler_call_details.method)
        if handler is None or op is None or handler.unary_unary is None or (self.plane is not None and op.plane != self.plane):
            return handler
        # The stub types a handler's behaviour as synchronous; on grpc.aio's server it is the
        # coroutine function the plane registered (runtime._bind).
        inner: Behavior = handler.unary_unary  # type: ignore[assignment]

        async def behavior(request: Message, context: Context) -> Message:
            return await self.run(op, inner, request, context)

        wrapped = grpc.unary_unary_rpc_method_handler(
            behavior,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
        self._wrapped[handler_call_details.method] = wrapped
        return wrapped

    async def run(self, op: OpSpec, inner: Behavior, request: Message, context: Context) -> Message:
        """The gRPC transport: metadata from the call, a refusal as a rich status."""
        md = {k: v for k, v in (context.invocation_metadata() or ()) if isinstance(v, str)}
        try:
            return await self.call(op, lambda req: inner(req, context), request, md, answer_first=True)
        except LoomError as error:
            await context.abort_with_status(to_rpc_status(error))
            raise  # abort_with_status raises; never reached

    async def call(
        self,
        op: OpSpec,
        inner: Callable[[Message], Awaitable[Message]],
        request: Message,
        md: Mapping[str, str],
        validated: bool = False,
        *,
        answer_first: bool = False,
    ) -> Message:
        """The chain itself, for either transport: gRPC (`run`) or in process (the gateway's
        relay in embedded mode). Raises the call's LoomError after recording its ledger row.

        First the op's generated field checks (the proto's field options, as REST checks its
        JSON), before the token as on REST, so every door refuses the same bad input with the
        same code and message. `validated`: the in-process relay already ran them on the JSON.
        `answer_first` (gRPC): the call's metrics and ledger row are taken one loop turn later,
        after the server has started sending the answer (grpc.aio serializes and hands it to its
        core in the turn the handler returns), not before: on a replica's busy loop they were
        0.2-0.25 ms of every answer's path (docs/benchmarks.md, "Wake (issue Q, session 20)").
        The row is still recorded (the loop runs the callback before any shutdown step: the
        servers stop before the ledger's final flush), and before the caller can make another
        call (which needs the answer first)."""
        started = time.perf_counter()
        transport = md.get(MD_TRANSPORT) or "grpc"
        principal: Principal | None = None
        ctx: CallContext | None = None
        response: Message | None = None
        error: LoomError | None = None
        gate_call: GateCall | None = None
        namespace = md.get(MD_NAMESPACE, "")
        try:
            if not validated:
                self.catalog.check_message(op, request)
            token = bearer_token(md.get(MD_AUTHORIZATION))
            principal = self.auth.verify(token)
            if md.get(MD_ORG) and md[MD_ORG] != principal.org:
                raise Forbidden(ErrorCode.AUTH_WRONG_ORG, "the token belongs to another org", {"reason": "wrong_org"})
            if principal.consumer == ANSWER_CONSUMER and not answer_may_call(op):
                raise Forbidden(
                    ErrorCode.AUTH_INSUFFICIENT,
                    f"an assistant answer's token calls only the assistant toolset's reads; {op.name} is not one",
                    {"reason": "assistant_toolset", "op": op.name},
                )
            namespace = namespace or principal.default_namespace
            role, namespace_role = await self._role(op, principal, namespace)
            ctx = CallContext(
                op=op,
                principal=principal,
                namespace=namespace,
                role=role,
                namespace_role=namespace_role,
                agent=md.get(MD_AGENT, ""),
                user=md.get(MD_USER, ""),
                session=md.get(MD_SESSION, ""),
                run_id=md.get(MD_RUN_ID, ""),
                transport=transport,
                token=token or "",
            )
            if md.get(MD_REQUEST_ID):
                ctx.request_id = md[MD_REQUEST_ID]
            self.limiter.check(principal.org, principal.sub, op.rate_class)
            if self.gate.enabled and gated(op.name):
                gate_call = GateCall(ctx, request)
                await self.gate.check(gate_call)
            token_var = set_current_call(ctx)
            try:
                response = await inner(request)
            finally:
                reset_current_call(token_var)
            # Every door (gRPC included) prints an instant as RFC 3339 UTC with a Z.
            normalize_timestamps(response)
        except LoomError as exc:
            error = exc
        except Exception:
            # a handler bug: logged here, answered INTERNAL with no text (no trace reaches a caller)
            log.exception("op %s failed", op.name)
            error = LoomError(ErrorCode.INTERNAL, "internal error")
        latency = time.perf_counter() - started
        # What the gate writes about the call (its decision row) goes with the call's ledger row.
        after = gate_call.after if gate_call is not None else None
        if answer_first:
            asyncio.get_running_loop().call_soon(
                self._record, op, request, response, error, ctx, principal, namespace, md, transport, latency, after
            )
        else:
            self._record(op, request, response, error, ctx, principal, namespace, md, transport, latency, after)
        if error is not None:
            raise error
        assert response is not None
        return response

    def refused(self, op: OpSpec, error: LoomError, md: Mapping[str, str]) -> None:
        """A call a door refused before it became a request message (a body that is not JSON,
        nests too deep, holds NaN): the metric and ledger row `call` writes for a call it
        refuses, the caller named when the token verifies."""
        transport = md.get(MD_TRANSPORT) or "grpc"
        principal: Principal | None
        try:
            principal = self.auth.verify(bearer_token(md.get(MD_AUTHORIZATION)))
        except LoomError:
            principal = None
        namespace = md.get(MD_NAMESPACE, "") or (principal.default_namespace if principal else "")
        self._record(op, op.request_cls(), None, error, None, principal, namespace, md, transport, 0.0)

    def _observe(self, op: str, transport: str, code: str, latency: float) -> None:
        # prometheus_client's labels() costs a lock and a tuple hash per call: keep each child.
        key = (op, transport, code)
        children = self._metric_children.get(key)
        if children is None:
            children = (REQUESTS.labels(op, transport, code), LATENCY.labels(op, code))
            self._metric_children[key] = children
        children[0].inc()
        children[1].observe(latency)

    async def _role(self, op: OpSpec, principal: Principal, namespace: str) -> tuple[Role, Role | None]:
        """The call's role, and the caller's role in `namespace` alone when it was read (None: an
        org-level call without a namespace)."""
        if op.org_level:
            role = await self.auth.org_role(principal)
            namespace_role: Role | None = None
            if namespace:
                namespace_role = await self.auth.role_in(principal, namespace)
                role = max(role, namespace_role)
            if role < op.min_role:
                raise Forbidden(
                    ErrorCode.AUTH_INSUFFICIENT,
                    f"{op.name} needs the {op.min_role.label} role",
                    {"reason": "role", "needed": op.min_role.label, "role": role.label},
                )
            return role, namespace_role
        if not namespace:
            raise ValidationFailed(
                "namespace: required (argument, X-Loom-Namespace, or the token's default)", {"field": "namespace", "reason": "required"}
            )
        role = await self.auth.role_in(principal, namespace)
        if role < op.min_role:
            raise Forbidden(
                ErrorCode.AUTH_INSUFFICIENT,
                f"{op.name} needs the {op.min_role.label} role in {namespace!r}",
                {
                    "reason": "role" if role > Role.NONE else "namespace",
                    "needed": op.min_role.label,
                    "role": role.label,
                    "namespace": namespace,
                },
            )
        return role, role

    def _record(
        self,
        op: OpSpec,
        request: Message,
        response: Message | None,
        error: LoomError | None,
        ctx: CallContext | None,
        principal: Principal | None,
        namespace: str,
        md: Mapping[str, str],
        transport: str,
        latency: float,
        after: Callable[[], None] | None = None,
    ) -> None:
        """A call's metrics and ledger row, and what the gate writes about it (`after`)."""
        if after is not None:
            try:
                after()
            except Exception:  # noqa: BLE001 - what the gate writes never fails the call
                log.warning("policy gate: could not record the decision on %s", op.name)
        self._observe(op.name, transport, error.code if error else "OK", latency)
        try:
            if error is None and ctx is not None and ctx.item_rows:
                self._record_items(ctx, principal, namespace, md, transport, latency)
                return
            hits = ctx.out_hits if ctx is not None and ctx.out_hits is not None else out_hits_of(response)
            args = ledger_args(request)  # a fresh dict
            if ctx is not None and ctx.ledger_extra:
                args.update(ctx.ledger_extra)
            self.ledger.record(
                call_row(
                    _caller_fields(principal, namespace, md, transport),
                    op.name,
                    error is None,
                    error.code if error else "",
                    latency * 1000.0,
                    args,
                    hits if error is None else 0,
                    ctx.request_id if ctx else md.get(MD_REQUEST_ID, ""),
                    op.write_shaped,
                )
            )
        except Exception:  # noqa: BLE001 - a ledger failure never fails the call
            log.warning("ledger: could not record %s", op.name)

    def _record_items(
        self, ctx: CallContext, principal: Principal | None, namespace: str, md: Mapping[str, str], transport: str, latency: float
    ) -> None:
        """A batch op: one row per item (its own op, args and outcome), the call's latency shared."""
        items = ctx.item_rows or []
        caller = _caller_fields(principal, namespace, md, transport)
        for op_name, args, code in items:
            self.ledger.record(
                call_row(
                    caller,
                    op_name,
                    not code,
                    code,
                    latency * 1000.0 / len(items),
                    args,
                    0 if code else 1,
                    ctx.request_id,
                    ctx.op.write_shaped,
                )
            )


def _caller_fields(principal: Principal | None, namespace: str, md: Mapping[str, str], transport: str) -> LedgerCaller:
    return {
        "org": principal.org if principal else "",
        "namespace": namespace,
        "subject": principal.sub if principal else "",
        "agent": md.get(MD_AGENT, ""),
        "user": md.get(MD_USER, ""),
        "session": md.get(MD_SESSION, ""),
        "transport": transport,
        "run_id": md.get(MD_RUN_ID, ""),
        "consumer": principal.consumer if principal else "",
        "token_id": principal.jti if principal else "",
    }

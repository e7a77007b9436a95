"""The history-policy gate: the chain calls `check` on every gated op (not policy.*, not ops.*)
after role and rate, before the handler.

Per call, on the hot path, nothing touches the store: the namespace's compiled rules come from
the rule book (in memory, confirmed within the TTL), the history from the replica's live window
(in memory), and the decision row goes to a batched writer. With LOOM_POLICY_MODE=off the gate
is built disabled: it subscribes to nothing, observes nothing, reads and writes nothing.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import partial
from types import MappingProxyType
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message
from loom_core.aio import cancel_and_wait
from loom_core.bus import Bus, Consuming
from loom_core.catalog import OpSpec
from loom_core.chain import GateCall
from loom_core.chain.context import CallContext
from loom_core.chain.ledger import LedgerRow, ledger_args
from loom_core.errors import ErrorCode, Forbidden, Unavailable
from loom_core.roles import Role
from loom_core.store import Store, run_migrations

from ..domain.args import flatten_json
from ..domain.compiler import Caller, CallerKey, CompiledRule, EvalContext
from ..domain.evaluator import evaluate, explain, undecidable
from ..domain.history import Shape, Window
from ..domain.model import Verdict
from ..domain.reservations import PendingCall, RecentIds, Reservations
from ..domain.standing import Standing, decide
from ..settings import PolicySettings
from ..store.decisions import DecisionWriter
from ..store.reservations import LINGER_US, ReservationStore, SharedEntry
from ..store.rules import RuleStore
from ..store.schema import MIGRATIONS
from .live_history import LiveHistory, now_us
from .render import error_json, refusal_detail, rules_stored
from .rulebook import NamespaceRules, NsKey, RuleBook

log = logging.getLogger(__name__)

# Compare-and-set rounds a shared reservation may lose before the call is refused as overloaded.
SHARED_ATTEMPTS = 100
# Distinct callers whose Caller the gate keeps (cleared past this).
CALLERS_KEPT = 4096


_WRITER = Role.WRITER  # read once: an enum member's lookup costs a gated call more than the comparison


def is_write(op: OpSpec) -> bool:
    """Write-shaped: the op says so, or it needs the writer role or above."""
    return op.write_shaped or op.min_role >= _WRITER


def call_args(op: OpSpec | None, args: Mapping[str, Any]) -> dict[str, str]:
    """The current call's arguments in the ledger's form (what `$args.<field>` binds to):
    through the op's own message when this deployment serves it, so text fields digest
    exactly as the ledger digests them."""
    if op is not None:
        try:
            msg = op.request_cls()
            json_format.ParseDict(dict(args), msg, ignore_unknown_fields=True)
            return ledger_args(msg)
        except (json_format.ParseError, TypeError, ValueError):
            pass
    return flatten_json(args)


LedgerObserver = Callable[[LedgerRow], None]
# Starts the plane's bus consumers for this gate's rule book and history (consumers/, wired by plane.py).
Listen = Callable[["PolicyGate"], Awaitable[list[Consuming]]]


class PolicyGate:
    def __init__(
        self,
        store: Store,
        bus: Bus | None,
        settings: PolicySettings,
        *,
        ledger_observers: list[LedgerObserver],
        flush_interval: float,
        listen: Listen | None = None,
    ) -> None:
        self.store = store
        self.bus = bus
        self.settings = settings
        self.mode: str = settings.policy_mode
        self.enabled = self.mode != "off"
        self.rule_store = RuleStore(store)
        self.reservations = Reservations()
        self.shared: ReservationStore | None = None
        # With shared reservations (which read them): request ids of ledger rows this replica's
        # history has taken (local or fed), and its own shared reservations not yet marked settled.
        self._seen = RecentIds(2 * LINGER_US)
        self._mine: dict[str, tuple[str, str, str]] = {}
        self._settling: set[asyncio.Task[None]] = set()
        self._callers: dict[CallerKey, Caller] = {}
        self.history: LiveHistory | None = None
        self.rules: RuleBook | None = None
        self.decisions: DecisionWriter | None = None
        self._ledger_observers = ledger_observers
        self._listen = listen
        self._consuming: list[Consuming] = []
        if self.enabled:
            self.reservations = Reservations()
            self.history = LiveHistory(
                store,
                bus,
                cap=settings.policy_window_max_events,
                live_rows_ttl=settings.policy_cache_ttl_seconds,
                on_event=self._event_taken,
            )
            self.rules = RuleBook(self.rule_store, bus, settings, self._rules_changed)
            self.decisions = DecisionWriter(store, flush_interval, bus=bus)

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        if not self.enabled:
            return
        assert self.history is not None and self.rules is not None and self.decisions is not None
        # The gate may run in a process that does not serve the policy plane: its tables first.
        await run_migrations(self.store, MIGRATIONS)
        if self.settings.policy_reservations == "shared" and self.bus is not None:
            self.shared = await ReservationStore.open(self.bus)
        if self._listen is not None and self.bus is not None:
            # Listen before the first loads, so a change in between is seen by one or the other.
            self._consuming = await self._listen(self)
        await self.history.start()
        self._ledger_observers.append(self.history.observe_ledger_row)
        await self.rules.start()
        await self.decisions.start()

    async def stop(self) -> None:
        if not self.enabled:
            return
        assert self.history is not None and self.rules is not None and self.decisions is not None
        observer = self.history.observe_ledger_row
        if observer in self._ledger_observers:
            self._ledger_observers.remove(observer)
        for consuming in self._consuming:
            await consuming.stop()
        self._consuming.clear()
        await self.rules.stop()
        await self.history.stop()
        await self.decisions.stop()
        for task in list(self._settling):
            await cancel_and_wait(task)

    async def stop_consumer(self, name: str) -> None:
        """Stop one of this gate's bus consumers (tests: as if every push were lost)."""
        for consuming in [c for c in self._consuming if c.consumer.name == name]:
            await consuming.stop()
            self._consuming.remove(consuming)

    def _event_taken(self, org: str, namespace: str, request_id: str) -> None:
        """A ledger row reached this replica's history: its call counts as an event now."""
        self.reservations.settle(org, namespace, request_id)
        if self.shared is None:
            return  # what was seen, and this replica's own shared reservations, matter only to shared ones
        now = now_us()
        self._seen.add(request_id, now)
        mine = self._mine.pop(request_id, None)
        if mine is not None:
            task = asyncio.get_running_loop().create_task(self._settle_shared(*mine, request_id, now))
            self._settling.add(task)
            task.add_done_callback(self._settling.discard)

    async def _settle_shared(self, org: str, namespace: str, subject: str, request_id: str, now: int) -> None:
        assert self.shared is not None
        try:
            await self.shared.settle(org, namespace, subject, request_id, now)
        except Exception:  # noqa: BLE001 - the reservation expires on its own
            log.warning("policy: a shared reservation could not be marked settled")

    def _rules_changed(self, key: NsKey, fresh: NamespaceRules) -> None:
        if self.history is not None:
            self.history.rules_changed(key, fresh.shape)

    def observe_exposures(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """core.exposures.write_exposures hands this replica's exposure rows here."""
        if self.history is not None:
            self.history.observe_exposures(rows)

    # -- the gate ----------------------------------------------------------------------------

    async def check(self, call: GateCall) -> None:
        if not self.enabled:
            return
        assert self.rules is not None and self.decisions is not None and self.history is not None
        ctx = call.ctx
        spec = ctx.op
        org, namespace, op = ctx.org, ctx.namespace, spec.name
        ns_rules = self.rules.confirmed(org, namespace) or await self.rules.get(org, namespace)
        rules, counted, names = ns_rules.gating(op)
        if not rules and not counted:
            return
        args = _call_args_once(spec, call.request)
        if counted and self.shared is not None:
            await self._check_shared(call, rules, names, ns_rules.shape, now_us(), args)
            return
        if rules:
            window = self.history.cached_window(org, namespace, ns_rules.shape) or await self._window(org, namespace, ns_rules.shape)
            # Nothing awaits from here to the reservation: on this replica a call is decided and
            # reserved in one step, so racing calls each see the ones decided before them. The
            # instant is read after the last await: a call settled meanwhile counts as an event.
            now = now_us()
            verdict = self.decide(
                window,
                rules,
                self._caller(ctx.subject, ctx.agent, ctx.user, ctx.session),
                now,
                args,
                op=op,
                write_shaped=is_write(spec),
                pending=self.reservations.pending(org, namespace, now),
                applying=True,
                standing=ns_rules.standing,
            )
            # The decision row (rendering the outcomes the call moved, ~20 us) is recorded by the
            # chain with the call's ledger row, after the answer has gone (GateCall.after).
            call.after = partial(self._record, call.ctx, now, verdict, names)
            if verdict.would_enforce:
                verdict.settle()
                raise Forbidden(ErrorCode.POLICY_FORBIDDEN, f"refused by history policy: {explain(verdict)}", refusal_detail(verdict))
        else:
            now = now_us()
        if counted:
            self.reservations.add(
                org, namespace, PendingCall(ctx.request_id, op, now, ctx.subject, ctx.agent, ctx.user, ctx.session, args())
            )

    def _caller(self, subject: str, agent: str, user: str, session: str) -> Caller:
        """The caller's Caller, one per distinct caller (kept, so a call builds none)."""
        key = (subject, agent, user, session)
        caller = self._callers.get(key)
        if caller is None:
            if len(self._callers) >= CALLERS_KEPT:
                self._callers.clear()
            caller = self._callers[key] = Caller(subject, agent, user, session)
        return caller

    async def _check_shared(
        self,
        call: GateCall,
        rules: Sequence[CompiledRule],
        names: tuple[str, ...],
        shape: Shape,
        now: int,
        args: Callable[[], Mapping[str, str]],
    ) -> None:
        """Decide and reserve against the reservations every replica shares: read the
        subject's key, decide, write the reservation at the revision read; a lost race decides
        again with what won it."""
        assert self.shared is not None
        ctx = call.ctx
        write = is_write(ctx.op)
        mine = PendingCall(ctx.request_id, ctx.op.name, now, ctx.subject, ctx.agent, ctx.user, ctx.session, args())
        window = await self._window(ctx.org, ctx.namespace, shape) if rules else None
        caller = self._caller(ctx.subject, ctx.agent, ctx.user, ctx.session)
        for _ in range(SHARED_ATTEMPTS):
            try:
                snap = await self.shared.read(ctx.org, ctx.namespace, ctx.subject, now_us())
            except Exception as exc:
                # the reservations (NATS KV) not answering in any way: a write is refused, a read passes
                if write:
                    raise Unavailable(ErrorCode.BACKEND_UNAVAILABLE, "the history-policy reservations did not answer") from exc
                return
            if rules:
                # After the read: a row settled before it counts as an event up to this instant.
                now = now_us()
                pending = tuple(e.call for e in snap.entries if e.call.request_id not in self._seen)
                verdict = self.decide(window, rules, caller, now, args, op=ctx.op.name, write_shaped=write, pending=pending, applying=True)
                if verdict.would_enforce:
                    self._record(call.ctx, now, verdict, names)
                    raise Forbidden(ErrorCode.POLICY_FORBIDDEN, f"refused by history policy: {explain(verdict)}", refusal_detail(verdict))
            if await self.shared.write(snap, (*snap.entries, SharedEntry(mine))):
                self._mine[ctx.request_id] = (ctx.org, ctx.namespace, ctx.subject)
                if rules:
                    self._record(call.ctx, now, verdict, names)
                return
        raise Unavailable(ErrorCode.OVERLOADED, "too many calls raced for one history-policy limit; retry")

    def _record(self, ctx: CallContext, now: int, verdict: Verdict, names: tuple[str, ...]) -> None:
        """Buffer the call's decision row as a tuple of atoms (DecisionAtoms): `names` are the
        verdict's rules' names (the rules the gate decided with, in order), each outcome's stored
        form is rendered now (once per outcome: most rows repeat most), and the writer's flush
        builds and encodes the row. Nothing the row holds keeps the verdict or its outcomes alive."""
        assert self.decisions is not None
        verdict.settle()  # the counts of rules that stood as they grew (domain.standing), at the decision's instant
        principal = ctx.principal
        self.decisions.record(
            (
                principal.org,
                ctx.namespace,
                principal.sub,
                ctx.agent,
                ctx.user,
                ctx.session,
                ctx.op.name,
                ctx.transport,
                ctx.request_id,
                verdict.decision,
                verdict.would_enforce,
                verdict.mode,
                verdict.write_shaped,
                tuple(verdict.determining_rules),
                names,
                verdict.latency_ms,
                now,
                json.dumps([error_json(e) for e in verdict.errors], separators=(",", ":")) if verdict.errors else "[]",
                rules_stored(verdict.rules),
            )
        )

    async def window_for(self, org: str, namespace: str, shape: Shape, subject: str, *, ad_hoc: bool = False) -> Window | None:
        """The window policy.check decides over (`decide`): this replica's live one, or for
        `ad_hoc` rules, which no live window is shaped for, a one-off read of the subject's."""
        assert self.history is not None
        if ad_hoc and self.history.cached_window(org, namespace, shape) is None:
            return await _window_or_none(org, namespace, self.history.one_off(org, namespace, subject, shape))
        return await self._window(org, namespace, shape)

    async def _window(self, org: str, namespace: str, shape: Shape) -> Window | None:
        """This replica's live window for the namespace, or None when it cannot be read."""
        assert self.history is not None
        window = self.history.cached_window(org, namespace, shape)
        if window is not None:
            return window
        return await _window_or_none(org, namespace, self.history.window(org, namespace, shape))

    def decide(
        self,
        window: Window | None,
        rules: Sequence[CompiledRule],
        caller: Caller,
        now: int,
        args: Callable[[], Mapping[str, str]] | Mapping[str, str],
        *,
        op: str,
        write_shaped: bool,
        mode: str | None = None,
        pending: Sequence[PendingCall] = (),
        applying: bool = False,
        standing: dict[tuple[str, CallerKey], Standing] | None = None,
    ) -> Verdict:
        deployment = mode or self.mode
        if window is None:
            return undecidable(rules, op=op, write_shaped=write_shaped, deployment_mode=deployment, message="the history could not be read")
        # The replica's live window lives on: rules may answer from their memo of it (compiler.CompiledRule.evaluate).
        ctx = EvalContext(window, caller, now, args, pending, memo=True)
        if standing is not None:
            # The live gate's call: only the rules whose history moved are asked again.
            kept = decide(standing, rules, ctx, op=op, write_shaped=write_shaped, deployment_mode=deployment)
            if kept is not None:
                return kept
        return evaluate(rules, ctx, op=op, write_shaped=write_shaped, deployment_mode=deployment, applying=applying)


# What gives the ledger's form of an op's empty request, per op (most gated calls of an op
# without arguments).
_NO_ARGS: dict[str, Callable[[], Mapping[str, str]]] = {}


def _call_args_once(op: OpSpec, request: Message) -> Callable[[], Mapping[str, str]]:
    """The call's arguments as the ledger records them (`ledger_args` of the request itself),
    computed at most once and only if read (by a rule binding `$args`, or the reservation)."""
    if not request.ListFields():  # not ByteSize(): that walks every field of a message that has any
        hit = _NO_ARGS.get(op.name)
        if hit is None:
            empty = MappingProxyType(ledger_args(request))
            hit = _NO_ARGS[op.name] = lambda: empty
        return hit
    box: list[Mapping[str, str]] = []

    def get() -> Mapping[str, str]:
        if not box:
            box.append(ledger_args(request))
        return box[0]

    return get


async def _window_or_none(org: str, namespace: str, read: Awaitable[Window]) -> Window | None:
    """The history `read` gives, or None when the store cannot give it (the verdict then says
    so as an evaluation error)."""
    try:
        return await read
    except Exception:  # noqa: BLE001 - whatever the read raised is an evaluation error, never a 500
        log.warning("policy: history for %s/%s could not be read", org, namespace)
        return None

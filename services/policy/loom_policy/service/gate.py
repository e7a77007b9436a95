"""The history-policy gate: the chain calls `check` on every gated op (not policy.*, not ops.*)
after role and rate, before the handler.

Per call, on the hot path, nothing touches the store: the namespace's compiled rules come from
the rule book (in memory, confirmed within the TTL), the history from the replica's live window
(in memory), and the decision row goes to a batched writer. With LOOM_POLICY_MODE=off the gate
is built disabled: it subscribes to nothing, observes nothing, reads and writes nothing.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from google.protobuf import json_format
from loom_core.bus import Bus, Consuming
from loom_core.catalog import OpSpec
from loom_core.chain import GateCall
from loom_core.chain.ledger import ledger_args
from loom_core.errors import ErrorCode, Forbidden
from loom_core.roles import Role
from loom_core.store import Store, run_migrations
from loom_core.store.caller import caller_values

from ..domain.args import flatten_json
from ..domain.compiler import Caller, CompiledRule, EvalContext
from ..domain.evaluator import evaluate, explain, undecidable
from ..domain.history import Shape
from ..domain.model import Verdict
from ..domain.timeutil import us_to_ch
from ..settings import PolicySettings
from ..store.decisions import DecisionWriter
from ..store.rules import RuleStore
from ..store.schema import MIGRATIONS
from .live_history import LiveHistory, now_us
from .render import error_json, refusal_detail, rules_stored
from .rulebook import NamespaceRules, NsKey, RuleBook

log = logging.getLogger(__name__)


def is_write(op: OpSpec) -> bool:
    """Write-shaped: the op says so, or it needs the writer role or above."""
    return op.write_shaped or op.min_role >= Role.WRITER


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


LedgerObserver = Callable[[dict[str, Any]], None]
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
        self.history: LiveHistory | None = None
        self.rules: RuleBook | None = None
        self.decisions: DecisionWriter | None = None
        self._ledger_observers = ledger_observers
        self._listen = listen
        self._consuming: list[Consuming] = []
        if self.enabled:
            self.history = LiveHistory(store, bus, cap=settings.policy_window_max_events, live_rows_ttl=settings.policy_cache_ttl_seconds)
            self.rules = RuleBook(self.rule_store, bus, settings, self._rules_changed)
            self.decisions = DecisionWriter(store, flush_interval)

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        if not self.enabled:
            return
        assert self.history is not None and self.rules is not None and self.decisions is not None
        # The gate may run in a process that does not serve the policy plane: its tables first.
        await run_migrations(self.store, MIGRATIONS)
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

    async def stop_consumer(self, name: str) -> None:
        """Stop one of this gate's bus consumers (tests: as if every push were lost)."""
        for consuming in [c for c in self._consuming if c.consumer.name == name]:
            await consuming.stop()
            self._consuming.remove(consuming)

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
        assert self.rules is not None and self.decisions is not None
        ctx = call.ctx
        ns_rules = await self.rules.get(ctx.org, ctx.namespace)
        rules = ns_rules.for_op(ctx.op.name)
        if not rules:
            return
        now = now_us()
        verdict = await self.evaluate(
            ctx.org,
            ctx.namespace,
            ns_rules.shape,
            rules,
            Caller(ctx.subject, ctx.agent, ctx.user, ctx.session),
            now,
            lambda: call_args(ctx.op, call.args),
            op=ctx.op.name,
            write_shaped=is_write(ctx.op),
        )
        row = {
            "ts": us_to_ch(now),
            "org": ctx.org,
            "namespace": ctx.namespace,
            **caller_values(ctx),
            "op": ctx.op.name,
            "transport": ctx.transport,
            "request_id": ctx.request_id,
            "decision": verdict.decision,
            "enforced": verdict.would_enforce,
            "mode": verdict.mode,
            "write_shaped": verdict.write_shaped,
            "determining_rules": verdict.determining_rules,
            "rule_names": [r.name for r in verdict.rules],
            "latency_ms": verdict.latency_ms,
        }
        # The per-rule JSON is rendered when the batch is written, off this call's path.
        self.decisions.record(row, lambda: _rendered(verdict))
        if verdict.would_enforce:
            raise Forbidden(ErrorCode.POLICY_FORBIDDEN, f"refused by history policy: {explain(verdict)}", refusal_detail(verdict))

    async def evaluate(
        self,
        org: str,
        namespace: str,
        shape: Shape,
        rules: Sequence[CompiledRule],
        caller: Caller,
        now: int,
        args: Callable[[], Mapping[str, str]] | Mapping[str, str],
        *,
        op: str,
        write_shaped: bool,
        mode: str | None = None,
        ad_hoc: bool = False,
    ) -> Verdict:
        """Evaluate `rules` for one call at `now` over this replica's live window (`ad_hoc`
        rules, which no live window is shaped for, over a one-off read of the caller's)."""
        assert self.history is not None
        deployment = mode or self.mode
        window = self.history.cached_window(org, namespace, shape)
        if window is None:
            try:
                if ad_hoc:
                    window = await self.history.one_off(org, namespace, caller.subject, shape)
                else:
                    window = await self.history.window(org, namespace, shape)
            except Exception:  # noqa: BLE001 - reported as an evaluation error, never a 500
                log.warning("policy: history for %s/%s could not be read", org, namespace)
                return undecidable(
                    rules, op=op, write_shaped=write_shaped, deployment_mode=deployment, message="the history could not be read"
                )
        return evaluate(rules, EvalContext(window, caller, now, args), op=op, write_shaped=write_shaped, deployment_mode=deployment)


def _rendered(verdict: Verdict) -> dict[str, str]:
    return {
        "errors": json.dumps([error_json(e) for e in verdict.errors], separators=(",", ":")),
        "rules": rules_stored(verdict.rules),
    }

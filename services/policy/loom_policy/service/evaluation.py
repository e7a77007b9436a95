"""policy.check (dry-run rules for one call) and policy.replay (rules over recorded history)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from loom_core.catalog import Catalog
from loom_core.chain import CallContext
from loom_core.errors import Conflict, ErrorCode, NotFound, invalid_field
from loom_core.store import Store

from ..domain.compiler import Caller, CompiledRule, EvalContext, compile_rule
from ..domain.evaluator import evaluate
from ..domain.parser import parse_rule
from ..domain.replay import replay
from ..domain.timeutil import US, parse_instant, us_to_iso
from ..settings import PolicySettings
from ..store.rules import RuleSpec
from .gate import PolicyGate, call_args, is_write
from .live_history import now_us
from .offline import caller_window, recorded, shape_of
from .render import error_json, rule_json, verdict_json
from .rules import RuleService

# Ops this deployment does not serve (memory.* today) have no catalog entry; whether such a
# call is write-shaped is read from its verb.
_READ_VERBS = re.compile(
    r"\.(get|list|search|ask|inspect|history|provenance|for_file|check|whoami|catalog|query|updates|outline|precedents|chain|decisions|replay)$"
)


@dataclass(frozen=True, slots=True)
class CheckRequest:
    operation: str
    rules: Sequence[RuleSpec]  # proposed rules; empty: the stored ones
    agent: str
    user: str
    session: str
    args: dict[str, Any]  # the call's arguments: free-form JSON, as the op would take them


@dataclass(frozen=True, slots=True)
class ReplayRequest:
    rules: Sequence[RuleSpec]
    include_stored: bool
    names: Sequence[str]
    mode: str
    since: str
    until: str
    agent: str
    limit: int
    only_denied: bool


def instant(field: str, text: str) -> int:
    try:
        return parse_instant(text, now_us())
    except ValueError as exc:
        raise invalid_field(field, str(exc)) from None


class EvaluationService:
    def __init__(self, store: Store, catalog: Catalog, rules: RuleService, settings: PolicySettings, gate: PolicyGate | None) -> None:
        self.store = store
        self.catalog = catalog
        self.rules = rules
        self.settings = settings
        self.gate = gate if gate is not None and gate.enabled else None

    def write_shaped(self, op: str) -> bool:
        spec = self.catalog.get(op)
        if spec is not None:
            return is_write(spec)
        return not _READ_VERBS.search(op)

    def proposed(self, specs: Sequence[RuleSpec]) -> list[CompiledRule]:
        out = []
        for i, spec in enumerate(specs):
            rule, _ = parse_rule(spec, max_window_seconds=self.settings.policy_max_window_seconds, prefix=f"rules[{i}]")
            out.append(compile_rule(rule))
        names = [r.name for r in out]
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup:
            # Two rules competing for one name: a conflict between the rules, not a shape the schema can refuse.
            raise Conflict(
                ErrorCode.ALREADY_EXISTS, f"rule name {dup!r} given twice", {"field": "rules", "rule": dup, "reason": "duplicate"}
            )
        return out

    async def check(self, ctx: CallContext, req: CheckRequest) -> dict[str, Any]:
        """The verdict in policy.check's JSON answer shape (pb.CheckPolicyResponse)."""
        # operation (required, an op name, no glob) is checked on every door against the proto's field options.
        rules = self.proposed(req.rules) if req.rules else await self.rules.stored(ctx.org, ctx.namespace)
        caller = Caller(ctx.subject, req.agent or ctx.agent, req.user or ctx.user, req.session or ctx.session)
        args = call_args(self.catalog.get(req.operation), req.args)
        applying = [r for r in rules if r.applies(req.operation)]
        write = self.write_shaped(req.operation)
        now = now_us()
        if self.gate is not None:
            window = await self.gate.window_for(ctx.org, ctx.namespace, shape_of(applying), caller.subject, ad_hoc=bool(req.rules))
            verdict = self.gate.decide(window, applying, caller, now, args, op=req.operation, write_shaped=write)
        else:
            window = await caller_window(
                self.store, ctx.org, ctx.namespace, ctx.subject, shape_of(applying), now, self.settings.policy_window_max_events
            )
            verdict = evaluate(
                applying,
                EvalContext(window, caller, now, args),
                op=req.operation,
                write_shaped=write,
                deployment_mode=self.settings.policy_mode,
            )
        return verdict_json(verdict)

    async def replay(self, ctx: CallContext, req: ReplayRequest) -> dict[str, Any]:
        """The replay in policy.replay's JSON answer shape (pb.ReplayPolicyResponse)."""
        # mode and limit are checked on every door against the proto's field options.
        now = now_us()
        # No call is recorded after now or before the epoch: the window is cut to both (a
        # duration of millions of days stays a time the store can hold). A window whose since
        # is not before its until holds no calls, and the replay answers so.
        until = min(instant("until", req.until), now) if req.until else now
        since = max(instant("since", req.since) if req.since else until - 86400 * US, 0)
        rules = await self._replay_rules(ctx, req)
        calls, exposures, live, truncated = await recorded(self.store, ctx.org, ctx.namespace, rules, since, until)
        deployment = self.settings.policy_mode if self.settings.policy_mode != "off" else "shadow"
        result = replay(
            rules,
            calls,
            exposures,
            since_us=since,
            until_us=until,
            deployment_mode="enforce" if req.mode else deployment,
            mode_override=req.mode,
            agent=req.agent,
            limit=req.limit or 100,
            only_denied=req.only_denied,
            live_rows=live,
            write_shaped=lambda op, recorded_flag: (
                self.write_shaped(op) if self.catalog.get(op) else recorded_flag or self.write_shaped(op)
            ),
            complete_from_us=(calls[0].event.ts + 1) if truncated and calls else None,
        )
        return {
            "calls": [
                {
                    "time": us_to_iso(item.call.started_us),
                    "operation": item.call.event.op,
                    "subject": item.call.event.subject,
                    "agent": item.call.event.agent or item.call.event.subject,
                    "request_id": item.call.event.request_id,
                    "recorded_ok": item.call.event.ok,
                    "recorded_error_code": item.call.error_code,
                    "decision": item.verdict.decision,
                    "would_enforce": item.verdict.would_enforce,
                    "determining_rules": item.verdict.determining_rules,
                    "errors": [error_json(e) for e in item.verdict.errors],
                    "rules": [rule_json(o) for o in item.verdict.rules],
                }
                for item in result.items
            ],
            "totals": {
                "calls": result.calls,
                "evaluated": result.evaluated,
                "allowed": result.allowed,
                "denied": result.denied,
                "would_enforce": result.would_enforce,
                "errors": result.errors,
                "newly_denied": result.newly_denied,
                "by_rule": [
                    {"name": n, "evaluated": c.evaluated, "denied": c.denied, "errors": c.errors} for n, c in result.by_rule.items()
                ],
            },
            "since_time": us_to_iso(since),
            "until_time": us_to_iso(until),
            "truncated": truncated,
            "mode": req.mode or deployment,
        }

    async def _replay_rules(self, ctx: CallContext, req: ReplayRequest) -> list[CompiledRule]:
        stored: list[CompiledRule] = []
        if not req.rules or req.include_stored:
            stored = [self.rules.compile_stored(r) for r in await self.rules.live(ctx.org, ctx.namespace)]
            if req.names:
                known = {r.name for r in stored}
                missing = [n for n in req.names if n not in known]
                if missing:
                    raise NotFound(ErrorCode.RESOURCE_NOT_FOUND, f"no rule {missing[0]!r} in {ctx.namespace!r}", {"rule": missing[0]})
                stored = [r for r in stored if r.name in set(req.names)]
        proposed = self.proposed(req.rules) if req.rules else []
        names = {r.name for r in proposed}
        rules = [*proposed, *(r for r in stored if r.name not in names)]
        if not rules:
            # Nothing stored to replay is the namespace's state, not a malformed request.
            raise NotFound(ErrorCode.RESOURCE_NOT_FOUND, "no rules to replay: pass rules, or store some first", {"reason": "no_rules"})
        return rules

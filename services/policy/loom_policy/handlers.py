"""Handlers for the policy.* ops: proto in, proto out. The rules live in domain/, the SQL in
store/, history in live_history.py (gate on) or offline.py (gate off, replay)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from google.protobuf import json_format, struct_pb2
from loom_api.policy.v1 import policy_pb2 as pb
from loom_core.chain import CallContext
from loom_core.errors import NotFound, invalid_field
from loom_core.runtime import Runtime

from .bus import RULES_SUBJECT
from .domain.compiler import Caller, CompiledRule, EvalContext, compile_rule
from .domain.evaluator import evaluate
from .domain.parser import OP_PATTERN, parse_rule
from .domain.replay import replay
from .domain.timeutil import US, parse_instant, us_to_ch, us_to_iso
from .domain.widening import widened
from .gate import PolicyGate, call_args, is_write
from .live_history import now_us
from .offline import caller_window, recorded, shape_of
from .render import error_json, rule_json, rules_from_stored, verdict_json
from .rulebook import compile_row
from .store.decisions import query_decisions, write_audit
from .store.rules import RuleStore

# Ops this deployment does not serve (memory.* today) have no catalog entry; whether such a
# call is write-shaped is read from its verb.
_READ_VERBS = re.compile(
    r"\.(get|list|search|ask|inspect|history|provenance|for_file|check|whoami|catalog|query|updates|outline|precedents|chain|decisions|replay)$"
)


def _struct_dict(msg: struct_pb2.Struct) -> dict[str, Any]:
    return json_format.MessageToDict(msg)


def _rule_msg(row: dict[str, Any]) -> pb.Rule:
    cond = struct_pb2.Struct()
    cond.update(json.loads(row["condition"]) if isinstance(row["condition"], str) else row["condition"])
    return pb.Rule(
        name=row["name"],
        effect=row["effect"],
        actions=list(row["actions"]),
        condition=cond,
        description=row.get("description", ""),
        mode=row.get("mode", "inherit"),
        leaf_count=int(row.get("leaf_count", 0)),
        updated_by=row.get("updated_by", ""),
        updated_time=us_to_iso(_ch_us(row.get("updated_at", ""))),
    )


def _ch_us(text: str) -> int:
    from .domain.timeutil import ch_to_us

    return ch_to_us(text) if text else 0


def _spec_dict(spec: Any) -> dict[str, Any]:
    return {
        "name": spec.name,
        "effect": spec.effect,
        "actions": list(spec.actions),
        "condition": _struct_dict(spec.condition) if spec.HasField("condition") else None,
        "description": spec.description,
        "mode": spec.mode,
    }


class PolicyHandlers:
    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime
        self.settings = runtime.settings
        self.rules = RuleStore(runtime.store)

    @property
    def gate(self) -> PolicyGate | None:
        g = self.rt.gate
        return g if isinstance(g, PolicyGate) and g.enabled else None

    def _compile_stored(self, row: dict[str, Any]) -> CompiledRule:
        return compile_row(row, self.settings.policy_max_window_seconds)

    def _write_shaped(self, op: str) -> bool:
        spec = self.rt.catalog.get(op)
        if spec is not None:
            return is_write(spec)
        return not _READ_VERBS.search(op)

    async def _changed(self, org: str, namespace: str) -> None:
        gate = self.gate
        if gate is not None and gate.rules is not None:
            await gate.rules.changed(org, namespace)
        else:
            # This replica's gate is off; other replicas (if any run one) still hear of it.
            await self.rt.bus.nc.publish(RULES_SUBJECT, json.dumps({"org": org, "namespace": namespace}).encode())

    # -- policy.set / policy.delete / policy.list ----------------------------------------------

    async def set_rule(self, req: pb.SetPolicyRequest, ctx: CallContext) -> pb.SetPolicyResponse:
        raw = _spec_dict(req)
        rule, warnings = parse_rule(raw, max_window_seconds=self.settings.policy_max_window_seconds)
        old_row = await self.rules.get(ctx.org, ctx.namespace, rule.name)
        old = self._compile_stored(old_row).definition if old_row else None
        wide, reasons = widened(old, rule)
        row = await self.rules.put(
            ctx.org,
            ctx.namespace,
            {**raw, "condition": rule.raw_condition, "mode": rule.mode, "description": rule.description, "leaf_count": rule.leaf_count},
            ctx.subject,
        )
        if wide:
            await self._audit(ctx, rule.name, "set", reasons, old_row, row)
        await self._changed(ctx.org, ctx.namespace)
        return pb.SetPolicyResponse(
            rule=_rule_msg(row),
            leaf_count=rule.leaf_count,
            widened=wide,
            widened_reasons=reasons,
            created=old_row is None,
            warnings=warnings,
        )

    async def delete_rule(self, req: pb.DeletePolicyRequest, ctx: CallContext) -> pb.DeletePolicyResponse:
        if not req.name:
            raise invalid_field("name", "required")
        old_row = await self.rules.get(ctx.org, ctx.namespace, req.name)
        if old_row is None:
            raise NotFound(
                "RESOURCE_NOT_FOUND", f"no rule {req.name!r} in {ctx.namespace!r}", {"rule": req.name, "namespace": ctx.namespace}
            )
        await self.rules.tombstone(ctx.org, ctx.namespace, old_row, ctx.subject)
        _, reasons = widened(self._compile_stored(old_row).definition, None)
        await self._audit(ctx, req.name, "delete", reasons, old_row, None)
        await self._changed(ctx.org, ctx.namespace)
        return pb.DeletePolicyResponse(deleted=True, widened=True)

    async def _audit(
        self, ctx: CallContext, name: str, change: str, reasons: list[str], before: dict[str, Any] | None, after: dict[str, Any] | None
    ) -> None:
        def snap(row: dict[str, Any] | None) -> str:
            if row is None:
                return ""
            keep = ("name", "effect", "actions", "condition", "mode", "leaf_count")
            return json.dumps({k: row[k] for k in keep}, sort_keys=True, default=str)

        await write_audit(
            self.rt.store,
            {
                "ts": us_to_ch(now_us()),
                "org": ctx.org,
                "namespace": ctx.namespace,
                "kind": "policy.widened",
                "subject": ctx.subject,
                "agent": ctx.agent,
                "request_id": ctx.request_id,
                "rule": name,
                "change": change,
                "reasons": reasons,
                "before": snap(before),
                "after": snap(after),
            },
        )

    async def list_rules(self, req: pb.ListPoliciesRequest, ctx: CallContext) -> pb.ListPoliciesResponse:
        rows = await self.rules.live_in(ctx.org, ctx.namespace)
        return pb.ListPoliciesResponse(
            rules=[_rule_msg(r) for r in rows],
            mode=self.settings.policy_mode,
            max_window_seconds=self.settings.policy_max_window_seconds,
            cache_ttl_seconds=self.settings.policy_cache_ttl_seconds,
        )

    # -- policy.check ------------------------------------------------------------------------

    def _proposed(self, specs: Sequence[Any]) -> list[CompiledRule]:
        out = []
        for i, spec in enumerate(specs):
            rule, _ = parse_rule(_spec_dict(spec), max_window_seconds=self.settings.policy_max_window_seconds, prefix=f"rules[{i}]")
            out.append(compile_rule(rule))
        names = [r.name for r in out]
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup:
            raise invalid_field("rules", f"rule name {dup!r} given twice")
        return out

    async def _stored(self, org: str, namespace: str) -> list[CompiledRule]:
        gate = self.gate
        if gate is not None and gate.rules is not None:
            return list((await gate.rules.get(org, namespace)).rules)
        return [self._compile_stored(r) for r in await self.rules.live_in(org, namespace)]

    async def check(self, req: pb.CheckPolicyRequest, ctx: CallContext) -> pb.CheckPolicyResponse:
        if not req.operation:
            raise invalid_field("operation", "required: the op to dry-run")
        if not OP_PATTERN.match(req.operation) or "*" in req.operation:
            raise invalid_field("operation", "an op name such as memory.delete")
        rules = self._proposed(req.rules) if req.rules else await self._stored(ctx.org, ctx.namespace)
        caller = Caller(ctx.subject, req.agent or ctx.agent, req.user or ctx.user, req.session or ctx.session)
        args = call_args(self.rt.catalog.get(req.operation), _struct_dict(req.args))
        applying = [r for r in rules if r.applies(req.operation)]
        write = self._write_shaped(req.operation)
        now = now_us()
        gate = self.gate
        if gate is not None:
            verdict = await gate.evaluate(
                ctx.org,
                ctx.namespace,
                shape_of(applying),
                applying,
                caller,
                now,
                args,
                op=req.operation,
                write_shaped=write,
                ad_hoc=bool(req.rules),
            )
        else:
            window = await caller_window(
                self.rt.store, ctx.org, ctx.namespace, ctx.subject, shape_of(applying), now, self.settings.policy_window_max_events
            )
            verdict = evaluate(
                applying,
                EvalContext(window, caller, now, args),
                op=req.operation,
                write_shaped=write,
                deployment_mode=self.settings.policy_mode,
            )
        msg = pb.CheckPolicyResponse()
        json_format.ParseDict(verdict_json(verdict), msg)
        return msg

    # -- policy.decisions --------------------------------------------------------------------

    async def decisions(self, req: pb.ListDecisionsRequest, ctx: CallContext) -> pb.ListDecisionsResponse:
        if req.decision not in ("", "allow", "deny"):
            raise invalid_field("decision", "allow or deny")
        if req.limit < 0 or req.limit > 1000:
            raise invalid_field("limit", "from 1 to 1000")
        since = self._instant("since", req.since) if req.since else 0
        rows = await query_decisions(
            self.rt.store,
            ctx.org,
            ctx.namespace,
            decision=req.decision,
            agent=req.agent,
            op=req.operation,
            rule=req.rule,
            since_us=since,
            limit=req.limit or 100,
        )
        out = []
        for r in rows:
            d = pb.Decision()
            json_format.ParseDict(
                {
                    "time": us_to_iso(_ch_us(r["ts"])),
                    "operation": r["op"],
                    "subject": r["subject"],
                    "agent": r["agent"],
                    "user": r["user"],
                    "session": r["session"],
                    "request_id": r["request_id"],
                    "decision": r["decision"],
                    "enforced": bool(r["enforced"]),
                    "mode": r["mode"],
                    "write_shaped": bool(r["write_shaped"]),
                    "determining_rules": list(r["determining_rules"]),
                    "errors": json.loads(r["errors"] or "[]"),
                    "rules": rules_from_stored(r["rules"]),
                    "latency_ms": float(r["latency_ms"]),
                },
                d,
            )
            out.append(d)
        return pb.ListDecisionsResponse(decisions=out)

    def _instant(self, field: str, text: str) -> int:
        try:
            return parse_instant(text, now_us())
        except ValueError as exc:
            raise invalid_field(field, str(exc)) from None

    # -- policy.replay -----------------------------------------------------------------------

    async def replay(self, req: pb.ReplayPolicyRequest, ctx: CallContext) -> pb.ReplayPolicyResponse:
        if req.mode not in ("", "shadow", "enforce"):
            raise invalid_field("mode", "shadow or enforce (empty: each rule's own)")
        if req.limit < 0 or req.limit > 1000:
            raise invalid_field("limit", "from 1 to 1000")
        now = now_us()
        until = self._instant("until", req.until) if req.until else now
        since = self._instant("since", req.since) if req.since else until - 86400 * US
        if since >= until:
            raise invalid_field("since", "must be before until")
        rules = await self._replay_rules(req, ctx)
        calls, exposures, live, truncated = await recorded(self.rt.store, ctx.org, ctx.namespace, rules, since, until)
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
                self._write_shaped(op) if self.rt.catalog.get(op) else recorded_flag or self._write_shaped(op)
            ),
            complete_from_us=(calls[0].event.ts + 1) if truncated and calls else None,
        )
        body = {
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
        msg = pb.ReplayPolicyResponse()
        json_format.ParseDict(body, msg)
        return msg

    async def _replay_rules(self, req: pb.ReplayPolicyRequest, ctx: CallContext) -> list[CompiledRule]:
        stored: list[CompiledRule] = []
        if not req.rules or req.include_stored:
            stored = [self._compile_stored(r) for r in await self.rules.live_in(ctx.org, ctx.namespace)]
            if req.names:
                known = {r.name for r in stored}
                missing = [n for n in req.names if n not in known]
                if missing:
                    raise NotFound("RESOURCE_NOT_FOUND", f"no rule {missing[0]!r} in {ctx.namespace!r}", {"rule": missing[0]})
                stored = [r for r in stored if r.name in set(req.names)]
        proposed = self._proposed(req.rules) if req.rules else []
        names = {r.name for r in proposed}
        rules = [*proposed, *(r for r in stored if r.name not in names)]
        if not rules:
            raise invalid_field("rules", "no rules to replay: pass rules, or store some first")
        return rules

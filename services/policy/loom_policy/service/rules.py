"""policy.set / policy.delete / policy.list: store a rule (auditing a widening), tombstone one,
list a namespace's rules; after a change, reload it here and tell the other replicas."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from loom_core.bus import Bus
from loom_core.chain import CallContext
from loom_core.errors import ErrorCode, NotFound

from ..bus import RULES_SUBJECT
from ..domain.arguments import argument_warnings
from ..domain.compiler import CompiledRule
from ..domain.evaluator import effective_mode
from ..domain.parser import parse_rule
from ..domain.timeutil import us_to_ch
from ..domain.widening import widened
from ..settings import PolicySettings
from ..store.decisions import AuditRow, write_audit
from ..store.rules import RuleRow, RuleSpec, RuleStore, WrittenRuleRow
from .gate import PolicyGate
from .live_history import now_us
from .rulebook import broken_reason, compile_row


class ListedRule(RuleRow):
    """A live rule as policy.list shows it: "" unless it no longer compiles."""

    broken_reason: str


@dataclass(frozen=True, slots=True)
class SetOutcome:
    row: WrittenRuleRow
    leaf_count: int
    widened: bool
    widened_reasons: list[str]
    created: bool
    warnings: list[str]
    # The mode the gate applies the rule in: off, shadow or enforce (its own over the deployment's).
    mode_in_effect: str


class RuleService:
    def __init__(
        self,
        rules: RuleStore,
        bus: Bus | None,
        settings: PolicySettings,
        gate: PolicyGate | None,
        op_arguments: Mapping[str, frozenset[str]] | None = None,
    ) -> None:
        """`op_arguments`: each op's argument names (its input message's fields), for the
        warning about a rule naming one an op does not take."""
        self.op_arguments = dict(op_arguments or {})
        self.rules = rules
        self.bus = bus
        self.settings = settings
        self.gate = gate if gate is not None and gate.enabled else None

    def compile_stored(self, row: RuleRow) -> CompiledRule:
        return compile_row(row, self.settings.policy_max_window_seconds)

    async def stored(self, org: str, namespace: str) -> list[CompiledRule]:
        """The namespace's live rules, compiled (the gate's cached set when it runs)."""
        if self.gate is not None and self.gate.rules is not None:
            return list((await self.gate.rules.get(org, namespace)).rules)
        return [self.compile_stored(r) for r in await self.rules.live_in(org, namespace)]

    async def set(self, ctx: CallContext, raw: RuleSpec) -> SetOutcome:
        rule, warnings = parse_rule(raw, max_window_seconds=self.settings.policy_max_window_seconds)
        warnings += argument_warnings(rule, self.op_arguments)
        mode = effective_mode(rule.mode, self.settings.policy_mode)
        if mode == "off":
            warnings.append(
                "the deployment's policy mode is off (LOOM_POLICY_MODE): no rule is evaluated, so this one refuses nothing; "
                "set LOOM_POLICY_MODE=shadow to log what it would deny, enforce to deny"
            )
        elif mode == "shadow":
            warnings.append(
                "this rule runs in shadow mode: it logs what it would deny and refuses nothing; "
                "set its mode to enforce (or LOOM_POLICY_MODE=enforce) to deny"
            )
        old_row = await self.rules.get(ctx.org, ctx.namespace, rule.name)
        old = self.compile_stored(old_row).definition if old_row else None
        wide, reasons = widened(old, rule)
        row = await self.rules.put(
            ctx.org,
            ctx.namespace,
            RuleSpec(
                name=raw["name"],
                effect=raw["effect"],
                actions=raw["actions"],
                condition=rule.raw_condition,
                description=rule.description,
                mode=rule.mode,
            ),
            rule.leaf_count,
            ctx.subject,
        )
        if wide:
            await self._audit(ctx, rule.name, "set", reasons, old_row, row)
        await self._changed(ctx.org, ctx.namespace)
        return SetOutcome(row, rule.leaf_count, wide, reasons, old_row is None, warnings, mode)

    async def delete(self, ctx: CallContext, name: str) -> None:
        old_row = await self.rules.get(ctx.org, ctx.namespace, name)
        if old_row is None:
            raise NotFound(
                ErrorCode.RESOURCE_NOT_FOUND, f"no rule {name!r} in {ctx.namespace!r}", {"rule": name, "namespace": ctx.namespace}
            )
        await self.rules.tombstone(ctx.org, ctx.namespace, old_row, ctx.subject)
        _, reasons = widened(self.compile_stored(old_row).definition, None)
        await self._audit(ctx, name, "delete", reasons, old_row, None)
        await self._changed(ctx.org, ctx.namespace)

    async def live(self, org: str, namespace: str) -> list[ListedRule]:
        """The namespace's live rules, each with why it no longer compiles, if it does not."""
        rows = await self.rules.live_in(org, namespace)
        return [ListedRule(**r, broken_reason=broken_reason(r, self.settings.policy_max_window_seconds)) for r in rows]

    async def _changed(self, org: str, namespace: str) -> None:
        if self.gate is not None and self.gate.rules is not None:
            await self.gate.rules.changed(org, namespace)
        elif self.bus is not None:
            # This replica's gate is off; other replicas (if any run one) still hear of it.
            await self.bus.nc.publish(RULES_SUBJECT, json.dumps({"org": org, "namespace": namespace}).encode())

    async def _audit(
        self, ctx: CallContext, name: str, change: str, reasons: list[str], before: RuleRow | None, after: RuleRow | None
    ) -> None:
        await write_audit(
            self.rules.store,
            AuditRow(
                ts=us_to_ch(now_us()),
                org=ctx.org,
                namespace=ctx.namespace,
                kind="policy.widened",
                subject=ctx.subject,
                agent=ctx.agent,
                request_id=ctx.request_id,
                rule=name,
                change=change,
                reasons=reasons,
                before=_audited_rule(before),
                after=_audited_rule(after),
            ),
        )


def _audited_rule(row: RuleRow | None) -> str:
    """What a policy_audit row keeps of a rule before or after a change ("" where there is none)."""
    if row is None:
        return ""
    kept = {k: v for k, v in row.items() if k in _AUDITED_FIELDS}
    return json.dumps(kept, sort_keys=True, default=str)


_AUDITED_FIELDS = frozenset(("name", "effect", "actions", "condition", "mode", "leaf_count"))

"""Compiled rules + one call -> the verdict.

A rule denies when its effect says so: `forbid` when its condition holds, `require` when it
does not. A rule whose condition cannot be decided (a `$args` field the call lacks, history a
replica no longer keeps, an unknown live row count) denies a write-shaped call and allows a
read, and is reported in `errors` either way. The decision is `deny` when any rule denies;
it is enforced (`would_enforce`) when one of the denying rules runs in enforce mode.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from .compiler import CompiledRule, EvalContext
from .model import EvalError, LeafOutcome, RuleOutcome, Verdict


def effective_mode(rule_mode: str, deployment_mode: str) -> str:
    """A rule's own mode overrides the deployment's, except when the deployment is off."""
    if deployment_mode == "off":
        return "off"
    return deployment_mode if rule_mode == "inherit" else rule_mode


def evaluate(
    rules: Iterable[CompiledRule],
    ctx: EvalContext,
    *,
    op: str,
    write_shaped: bool,
    deployment_mode: str,
    mode_override: str = "",
    applying: bool = False,
) -> Verdict:
    """`applying`: every rule given applies to `op` (the gate's, from NamespaceRules.for_op)."""
    started = time.perf_counter()
    outcomes: list[RuleOutcome] = []
    errors: list[EvalError] = []
    determining: list[str] = []
    enforced = False
    for rule in rules:
        if not applying and not rule.applies(op):
            continue
        mode = effective_mode(mode_override or rule.definition.mode, deployment_mode)
        cond, leaves = rule.evaluate(ctx)
        out, errs = rule_outcome(rule, cond, leaves, mode, write_shaped)
        outcomes.append(out)
        errors += errs
        if out.denies:
            determining.append(out.name)
            enforced = enforced or mode == "enforce"
    return Verdict(
        decision="deny" if determining else "allow",
        would_enforce=enforced,
        mode=deployment_mode,
        write_shaped=write_shaped,
        determining_rules=determining,
        errors=errors,
        rules=outcomes,
        latency_ms=(time.perf_counter() - started) * 1000.0,
    )


def rule_outcome(
    rule: CompiledRule, cond: bool | None, leaves: list[LeafOutcome], mode: str, write_shaped: bool
) -> tuple[RuleOutcome, list[EvalError]]:
    """A rule's outcome from its condition's value and leaves, and the errors it reports."""
    d = rule.definition
    if cond is None:
        undecided = [leaf for leaf in leaves if leaf.error]
        errors = [EvalError(d.name, leaf.path, leaf.error) for leaf in undecided]
        denies = write_shaped
    else:
        errors = []
        denies = cond if d.effect == "forbid" else not cond
    # A rule answering from its memo gives the same leaves: its outcome is the one built then.
    prev = rule.last_outcome
    if prev is not None and prev.leaves is leaves and prev.mode == mode and prev.denies == denies:
        return prev, errors
    if cond is None:
        message = "; ".join(f"{leaf.path}: {leaf.error}" for leaf in undecided) or "the condition could not be decided"
        out = RuleOutcome(d.name, d.effect, mode, None, denies, leaves, error=message)
    else:
        out = RuleOutcome(d.name, d.effect, mode, cond, denies, leaves)
    rule.last_outcome = out
    return out, errors


def explain(verdict: Verdict) -> str:
    """One line for a refusal's message: which rules decided, and the values that did."""
    parts = []
    for r in verdict.rules:
        if r.name not in verdict.determining_rules:
            continue
        if r.condition is None:
            parts.append(f"{r.name}: could not be evaluated ({r.error}) and this call is write-shaped")
            continue
        values = ", ".join(_leaf_text(leaf) for leaf in r.leaves)
        why = "its condition holds" if r.effect == "forbid" else "its condition does not hold"
        parts.append(f"{r.name} ({r.effect}): {why} [{values}]")
    return "; ".join(parts)


def _leaf_text(leaf: object) -> str:
    from .model import LeafOutcome

    assert isinstance(leaf, LeafOutcome)
    if leaf.op == "formerly":
        return f"formerly {leaf.operation} within {leaf.within_seconds}s = {leaf.holds}"
    if leaf.op == "not_since":
        return f"not_since {leaf.operation} = {leaf.holds} ({leaf.observed:g} since anchor)"
    return f"{leaf.op} {leaf.operation} = {leaf.observed:g} {leaf.cmp} {leaf.threshold:g}: {leaf.holds}"


def undecidable(
    rules: Iterable[CompiledRule], *, op: str, write_shaped: bool, deployment_mode: str, message: str, mode_override: str = ""
) -> Verdict:
    """Every applying rule undecided for one reason (the history could not be read at all)."""
    outcomes, errors, determining = [], [], []
    enforced = False
    for rule in rules:
        if not rule.applies(op):
            continue
        d = rule.definition
        mode = effective_mode(mode_override or d.mode, deployment_mode)
        outcomes.append(RuleOutcome(d.name, d.effect, mode, None, write_shaped, [], error=message))
        errors.append(EvalError(d.name, "condition", message))
        if write_shaped:
            determining.append(d.name)
            enforced = enforced or mode == "enforce"
    return Verdict("deny" if determining else "allow", enforced, deployment_mode, write_shaped, determining, errors, outcomes)

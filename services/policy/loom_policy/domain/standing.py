"""A caller's standing verdict: the live gate's answer for one caller and op, kept between
calls, so a call re-evaluates only the rules whose history moved.

Each rule's answer (compiler.CompiledRule.kept) depends on a few series and exposure indexes of
the window, each at a version, and on the instant staying before its `until`. The standing
verdict keeps, for the op's rules together, every source any of them read (once, with the rules
that read it) and each rule's `until`. A call compares each source's version (one integer
comparison per source: the window keeps the sources current as events arrive, touching only the
series an event belongs to) and the instant with the earliest `until`; only the rules reading a
source that moved, or whose `until` passed, are asked again, and the verdict's lists are rebuilt
only then. Nothing else is evaluated, and no outcome object is built for a rule whose answer
stands.

A rule whose sources moved only by events appended to the series its counts read, fewer than
could change whether any of them holds (compiler.CompiledLeaf.slack: `gt 500000` at 100,000
stands for 400,000 more), is not asked again either: its answer stands, and the verdict carries
each grown count as a number (Verdict.grown), from which `Verdict.settle` builds the outcome a
decision row records, after the answer. Every call's own ledger row grows the counts of the rules
that count every op or the op itself, so without this the gate asked those again on every call.

Kept only where a rule's answer depends on the caller alone: no rule binding `$args`, none
reading the live row count, no call of the caller's in flight that a rule counts (the gate then
evaluates the call in full, as before). Within one window generation the sources a rule reads
are fixed (a new series or index bumps the generation), so the kept list of sources is complete.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .compiler import CompiledRule, EvalContext, History
from .evaluator import effective_mode, rule_outcome
from .history import Breadth, Series
from .model import EvalError, RuleOutcome, Verdict

STANDING_MAX = 4096  # callers (per op) kept per namespace's rules
_FOREVER = 1 << 62


@dataclass(slots=True)
class Standing:
    history: History
    generation: int
    # Every source the rules read: the source, its version when read, the rules (indexes) reading it.
    sources: list[tuple[Series | Breadth, int, tuple[int, ...]]]
    untils: list[int]
    until: int
    outcomes: list[RuleOutcome]
    errors: list[list[EvalError]]
    determining: list[str]
    enforced: bool
    all_errors: list[EvalError]


def decide(
    kept: dict[tuple[str, tuple[str, str, str, str]], Standing],
    rules: Sequence[CompiledRule],
    ctx: EvalContext,
    *,
    op: str,
    write_shaped: bool,
    deployment_mode: str,
) -> Verdict | None:
    """The verdict for `ctx`'s caller calling `op` (every rule in `rules` applies to it), from
    the standing verdict in `kept`, brought up to date; None when the call cannot be decided
    from one (see the module's docstring): evaluate it in full."""
    started = time.perf_counter()
    if not ctx.memo or ctx.pending:
        return None
    key = (op, ctx.caller_key)
    st = kept.get(key)
    history = ctx.history
    if st is None and not all(r.standable for r in rules):
        return None  # never kept for these rules: the check is made once per caller and op
    grown: list[tuple[int, RuleOutcome, tuple[tuple[int, float, int], ...]]] = []
    if st is None or st.history is not history or st.generation != history.generation:
        if len(kept) >= STANDING_MAX:
            kept.clear()
        st = kept[key] = _build(rules, ctx, write_shaped, deployment_mode)
    else:
        now = ctx.now_us
        moved: set[int] = set()
        if now >= st.until:
            moved.update(i for i, until in enumerate(st.untils) if now >= until)
        sources = st.sources
        shifted = [n for n, (source, version, _) in enumerate(sources) if source.version != version]
        if shifted:
            untils, outcomes = st.untils, st.outcomes
            for n in shifted:
                moved.update(sources[n][2])
            # A rule whose counts only grew, by fewer events than could change it, stands: its
            # outcome's new counts are the verdict's to build after the answer (Verdict.settle).
            # The sources it reads stay unseen, so the next call looks at them again.
            growing: set[int] = set()
            for i in [i for i in moved if now < untils[i]]:
                counts = rules[i].grown(ctx, outcomes[i].leaves)
                if counts is None:
                    continue
                moved.discard(i)
                if counts:
                    grown.append((i, outcomes[i], counts))
                    growing.add(i)
            for n in shifted:
                source, _, readers = sources[n]
                if growing.isdisjoint(readers):
                    sources[n] = (source, source.version, readers)
        if moved:
            _refresh(st, rules, moved, ctx, write_shaped, deployment_mode)
    return Verdict(
        "deny" if st.determining else "allow",
        st.enforced,
        deployment_mode,
        write_shaped,
        st.determining,
        st.all_errors,
        st.outcomes,
        (time.perf_counter() - started) * 1000.0,
        tuple(grown),
    )


def _build(rules: Sequence[CompiledRule], ctx: EvalContext, write_shaped: bool, deployment_mode: str) -> Standing:
    n = len(rules)
    st = Standing(ctx.history, ctx.history.generation, [], [0] * n, 0, [], [[] for _ in range(n)], [], False, [])
    st.outcomes = [None] * n  # type: ignore[list-item] # every slot is filled by _refresh below
    _refresh(st, rules, range(n), ctx, write_shaped, deployment_mode)
    # After the rules read: a view read for the first time bumps the generation.
    st.generation = ctx.history.generation
    readers: dict[int, tuple[Series | Breadth, list[int]]] = {}
    for i, rule in enumerate(rules):
        for source, _ in rule.kept(ctx).reads:
            entry = readers.setdefault(id(source), (source, []))
            if i not in entry[1]:
                entry[1].append(i)
    st.sources = [(source, source.version, tuple(idx)) for source, idx in readers.values()]
    return st


def _refresh(
    st: Standing, rules: Sequence[CompiledRule], moved: Iterable[int], ctx: EvalContext, write_shaped: bool, deployment_mode: str
) -> None:
    """Ask the `moved` rules again; rebuild the verdict's lists (new lists: earlier verdicts
    keep theirs), the ones read from denials and errors only when a moved rule's changed."""
    outcomes = list(st.outcomes)
    errors = st.errors
    untils = st.untils
    changed = False
    for i in moved:
        rule = rules[i]
        memo = rule.kept(ctx)
        mode = effective_mode(rule.definition.mode, deployment_mode)
        old = outcomes[i]
        out, errs = rule_outcome(rule, memo.value, memo.leaves, mode, write_shaped)
        if old is None or errs or errors[i] or old.denies != out.denies or old.mode != out.mode:
            changed = True
        outcomes[i], errors[i] = out, errs
        untils[i] = memo.until
    st.outcomes = outcomes
    st.until = min(untils, default=_FOREVER)
    if changed:
        st.determining = [o.name for o in outcomes if o.denies]
        st.enforced = any(o.denies and o.mode == "enforce" for o in outcomes)
        st.all_errors = [e for errs in errors for e in errs]

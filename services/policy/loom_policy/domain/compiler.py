"""Syntax tree -> compiled rule: leaf evaluators with their op matchers built once, the shape
of history the rule needs, and the caller pin.

The pin: a compiled leaf reads history only through the principal key (caller's subject, key
kind, caller's value of that kind). The rule language has no field that names another
principal, and the key's subject is always the caller's verified token subject, so a rule
never reads another principal's events, whatever labels the caller sends.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from .history import Breadth, GlobSet, NotIndexed, PKey, Series, Shape, key_value
from .model import BoolNode, Leaf, LeafOutcome, Node, RuleDef, RuleOutcome
from .reservations import PendingCall
from .timeutil import US


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is calling: the verified subject and the labels the call carries."""

    subject: str
    agent: str = ""
    user: str = ""
    session: str = ""

    def pkey(self, kind: str) -> PKey:
        return (self.subject, kind, key_value(kind, self.subject, self.agent, self.user, self.session))


class History(Protocol):
    """What a leaf reads: the window (domain.history.Window) is one."""

    floor_us: int
    live_rows: dict[str, int]
    generation: int

    def series_for(self, pkey: PKey) -> Mapping[tuple[str, bool], Series] | None: ...

    def exposures_for(self, pkey: PKey) -> Mapping[tuple[str, str], Breadth] | None: ...

    def view(self, pkey: PKey, ops: str, outcome: str) -> Series | None: ...


class EvalContext:
    """One evaluation: the history, the caller, the instant, and the current call's arguments
    (in the ledger's form, computed only if a rule binds `$args`)."""

    __slots__ = ("_args", "_args_fn", "_pkeys", "caller", "caller_key", "history", "memo", "now_us", "pending", "reads", "until")

    def __init__(
        self,
        history: History,
        caller: Caller,
        now_us: int,
        args: Callable[[], Mapping[str, str]] | Mapping[str, str],
        pending: Sequence[PendingCall] = (),
        *,
        memo: bool = False,
    ) -> None:
        self.history = history
        self.caller = caller
        # Keyed once per call: the rules' memos (by caller) and the principal keys leaves read (by kind).
        self.caller_key = (caller.subject, caller.agent, caller.user, caller.session)
        self._pkeys: dict[str, PKey] = {}
        self.now_us = now_us
        # Calls in flight (domain.reservations): count_within counts them as successful events.
        self.pending = pending
        self._args: Mapping[str, str] | None
        self._args_fn: Callable[[], Mapping[str, str]] | None
        if callable(args):
            self._args, self._args_fn = None, args
        else:
            self._args, self._args_fn = args, None
        # Whether rules may answer from (and keep) their memo: the live gate's long-lived window.
        self.memo = memo
        # What the rule being evaluated read (each series and index, by version) and the first
        # instant at which the passing of time alone may change its answer.
        self.reads: list[Series | Breadth] = []
        self.until = _FOREVER

    def pkey(self, kind: str) -> PKey:
        """The caller's principal key of this kind (Caller.pkey), built once per evaluation."""
        key = self._pkeys.get(kind)
        if key is None:
            key = self._pkeys[kind] = self.caller.pkey(kind)
        return key

    def read(self, source: Series | Breadth | None) -> None:
        if source is not None:
            self.reads.append(source)

    def changes_at(self, times: Sequence[int], lo: int, hi: int, within_us: int, trunc: int, span: tuple[int, int] | None = None) -> None:
        """Lower `until` to when [lo, hi) slid forward may count differently over `times`: the
        oldest event inside leaves it, the next event at or after hi enters it, or the window
        stops reaching past the truncation point (its count becomes exact). `span`: the
        indices of [lo, hi) in `times` when already found."""
        until = self.until
        n = len(times)
        if span is None:
            i = bisect_left(times, lo)
            j = bisect_left(times, hi, i) if i < n else n
        else:
            i, j = span
        if i < n:
            if i < j:
                until = min(until, times[i] + within_us + 1)
            if j < n:
                until = min(until, times[j] + 1)
        if lo <= trunc:
            until = min(until, trunc + within_us + 1)
        self.until = until

    @property
    def args(self) -> Mapping[str, str]:
        if self._args is None:
            assert self._args_fn is not None
            self._args = self._args_fn()
        return self._args


class _Undecided(Exception):
    pass


_FOREVER = 1 << 62
SLACK_FOREVER = 1 << 62


_NOTHING_MISSING = -(1 << 62)


def _missing_upto(history: History) -> int:
    """Events at or before this instant may be missing from the history (floor 0: none)."""
    return history.floor_us - 1 if history.floor_us > 0 else _NOTHING_MISSING


def compare(cmp: str, observed: float, threshold: float, exact: bool) -> bool | None:
    """observed cmp threshold; with `exact` False observed is a lower bound, so only an answer
    more events could not change is given (else None)."""
    if exact:
        if cmp == "gt":
            return observed > threshold
        if cmp == "gte":
            return observed >= threshold
        if cmp == "lt":
            return observed < threshold
        if cmp == "lte":
            return observed <= threshold
        if cmp == "eq":
            return observed == threshold
        raise KeyError(cmp)
    if cmp == "gt" and observed > threshold:
        return True
    if cmp == "gte" and observed >= threshold:
        return True
    if cmp == "lt" and observed >= threshold:
        return False
    if cmp in ("lte", "eq") and observed > threshold:
        return False
    return None


class CompiledLeaf:
    __slots__ = ("_anchor", "_ops", "_spans", "extendable", "leaf", "within_us")

    def __init__(self, leaf: Leaf) -> None:
        self.leaf = leaf
        self.within_us = leaf.within_seconds * US
        self._ops = GlobSet((leaf.operation,))
        self._anchor = GlobSet((leaf.anchor,)) if leaf.anchor else None
        # Op names (the leaf's and its anchor's) whose events span several (op, ok) series: a glob, or outcome `any`.
        self._spans = {name for name in (leaf.operation, leaf.anchor) if name and (leaf.outcome == "any" or any(c in name for c in "*?["))}
        # A count over one series with no argument filter: kept up to date from the events
        # appended to that series since it was counted (`extend`), without counting again.
        self.extendable = leaf.op in ("count_within", "formerly") and not leaf.args_equal

    def _series(self, history: History, pkey: PKey, ops: str) -> Series | None:
        """The principal's events this leaf reads, as one series: an op's own series, or the
        window's view over every op (and outcome) the leaf spans, kept as events arrive."""
        if ops in self._spans:
            return history.view(pkey, ops, self.leaf.outcome)
        series = history.series_for(pkey)
        return series.get((ops, self.leaf.outcome == "ok")) if series else None

    def _read(self, ctx: EvalContext, pkey: PKey, ops: str) -> Series | None:
        s = self._series(ctx.history, pkey, ops)
        ctx.read(s)
        return s

    def _filter(self, ctx: EvalContext, spec: tuple[Any, ...]) -> tuple[tuple[str, str], ...]:
        out = []
        for a in spec:
            if a.bind is not None:
                v = ctx.args.get(a.bind)
                if v is None:
                    raise _Undecided(f"$args.{a.bind}: the call has no argument {a.bind}")
                out.append((a.field, v))
            else:
                out.append((a.field, a.literal))
        return tuple(out)

    def evaluate(self, ctx: EvalContext) -> LeafOutcome:
        leaf = self.leaf
        pkey = ctx.pkey(leaf.key)
        out = LeafOutcome(
            path=leaf.path,
            op=leaf.op,
            holds=None,
            cmp=leaf.cmp,
            threshold=leaf.value or 0.0,
            within_seconds=leaf.within_seconds,
            operation=leaf.operation,
            key=leaf.key,
            key_value=pkey[2],
        )
        try:
            if leaf.op == "breadth_within":
                self._breadth(ctx, pkey, out)
            else:
                self._events(ctx, pkey, out)
        except _Undecided as exc:
            out.holds = None
            out.error = str(exc)
        except NotIndexed as exc:
            out.holds = None
            out.error = f"args_equal.{exc}: not indexed yet in this replica's history"
        return out

    def _events(self, ctx: EvalContext, pkey: PKey, out: LeafOutcome) -> None:
        leaf = self.leaf
        hi = ctx.now_us
        lo = hi - self.within_us
        floor = _missing_upto(ctx.history)
        s = self._read(ctx, pkey, leaf.operation)
        filt = self._filter(ctx, leaf.args_equal) if leaf.args_equal else ()
        if leaf.op == "not_since":
            afilt = self._filter(ctx, leaf.anchor_args_equal) if leaf.anchor_args_equal else ()
            anchor = self._read(ctx, pkey, leaf.anchor)
            anchor_at = anchor.latest(lo, hi, afilt) if anchor else 0
            trunc = max(floor, anchor.truncated_upto) if anchor else floor
            ctx.changes_at(anchor.times if anchor else (), lo, hi, self.within_us, trunc)
            if s:
                ctx.changes_at(s.times, lo, hi, self.within_us, floor)
            out.last_us = anchor_at
            if not anchor_at:
                if lo <= trunc:
                    raise _Undecided(f"history before {trunc} is not kept here; no anchor {leaf.anchor} after it")
                out.holds = False
                return
            since = s.count(anchor_at + 1, hi, filt)[0] if s else 0
            out.observed = float(since)
            out.holds = since == 0
            return
        span = None
        if s is None:
            total, last = 0, 0
        elif filt:
            total, last = s.count(lo, hi, filt)
        else:
            span = s.span(lo, hi)  # one search for the count and for `until`
            total, last = span[1] - span[0], s.times[span[1] - 1] if span[1] > span[0] else 0
        trunc = max(floor, s.truncated_upto) if s else floor
        ctx.changes_at(s.times if s else (), lo, hi, self.within_us, trunc, span)
        exact = lo > trunc
        out.last_us = last
        if leaf.op == "formerly":
            out.observed = 1.0 if total else 0.0
            out.cmp, out.threshold = "", 0.0
            if total:
                out.holds = True
            elif exact:
                out.holds = False
            else:
                raise _Undecided("history this far back is not kept here (window truncated)")
            return
        if leaf.outcome != "failed":
            total += self._pending(ctx, pkey, lo, filt)
        out.observed = float(total)
        assert leaf.value is not None
        decided = compare(leaf.cmp, float(total), leaf.value, exact)
        if decided is None:
            raise _Undecided(f"only {total} events kept in the window (truncated); that does not decide {leaf.cmp} {leaf.value:g}")
        out.holds = decided

    def extend(self, prior: _LeafMemo, ctx: EvalContext) -> LeafOutcome | None:
        """The leaf's values now, from `prior` (its values when last evaluated, for the same
        caller over the same window) and the events appended to its series since, when that
        is all that changed: no event was inserted before the series' end or cut from its
        front, no event of the prior count has left the window yet (`until`), every appended
        event is before now, and the prior count was not empty (so each appended event, no
        older than the counted ones, is inside the window). Otherwise None: count afresh.
        Only for the memo's path, where no call in flight is counted (CompiledRule.evaluate
        evaluates afresh when one is)."""
        now = ctx.now_us
        old = prior.outcome
        if now >= prior.until or prior.size < 0 or old.holds is None or not old.observed:
            return None
        s = prior.reads[0][0]
        assert isinstance(s, Series)
        times = s.times
        n = len(times)
        if s.rewrites != prior.rewrites or n <= prior.size or times[-1] >= now:
            return None
        leaf = self.leaf
        if leaf.op == "formerly":
            holds: bool | None = True
            observed = 1.0
        else:
            observed = old.observed + (n - prior.size)
            trunc = max(_missing_upto(ctx.history), s.truncated_upto)
            assert leaf.value is not None
            holds = compare(leaf.cmp, observed, leaf.value, now - self.within_us > trunc)
            if holds is None:
                return None  # counted afresh, which says why it is undecided
        return old.recounted(holds, observed, times[-1])

    def slack(self, out: LeafOutcome) -> int:
        """How many events appended to this (extendable) leaf's series cannot change whether it
        holds, from its values `out` counted exactly: a count only grows by appends (an event
        leaving the window is the memo's `until`, a rewrite its `rewrites`), so `gt 500000` at
        100,000 stands for 400,000 more. 0 where `extend` would count afresh (an undecided or
        empty count)."""
        if out.holds is None:
            return 0
        if self.leaf.op == "formerly":
            return SLACK_FOREVER if out.holds else 0
        observed = out.observed
        if not observed:
            return 0
        cmp, room = out.cmp, out.threshold - observed
        if cmp == "eq":
            if room < 0:
                return SLACK_FOREVER  # past it: never equal again
            return 0 if out.holds else max(math.ceil(room) - 1, 0)
        # A count that holds `gt`/`gte`, or fails `lt`/`lte`, stays so however many come.
        if (cmp in ("gt", "gte")) == out.holds:
            return SLACK_FOREVER
        if cmp in ("gt", "lte"):
            return max(math.floor(room), 0)  # holds (lte) or not (gt) while count <= threshold
        return max(math.ceil(room) - 1, 0)  # gte, lt: while count < threshold

    def grown(self, lm: _LeafMemo, history: History, now: int) -> tuple[float, int] | None:
        """The leaf's count and last instant at `now` when its series only grew since `lm`, by
        no more than its slack, with every appended event before `now`, and the count still
        exact: whether it holds is then unchanged. None otherwise (the rule is asked again)."""
        s = lm.reads[0][0]
        assert isinstance(s, Series)
        times = s.times
        n = len(times)
        if s.rewrites != lm.rewrites or n <= lm.size or n - lm.size > lm.slack or times[-1] >= now:
            return None
        if now - self.within_us <= max(_missing_upto(history), s.truncated_upto):
            return None
        old = lm.outcome
        return (old.observed if self.leaf.op == "formerly" else old.observed + (n - lm.size)), times[-1]

    def _pending(self, ctx: EvalContext, pkey: PKey, lo: int, filt: tuple[tuple[str, str], ...]) -> int:
        # No upper bound: a call reserved after this one began (while it awaited) is in flight now.
        if not ctx.pending:
            return 0
        subject, kind, value = pkey
        return sum(
            1
            for c in ctx.pending
            if c.subject == subject and c.at_us >= lo and c.key_value(kind) == value and self._ops(c.op) and c.matches(filt)
        )

    def _breadth(self, ctx: EvalContext, pkey: PKey, out: LeafOutcome) -> None:
        leaf = self.leaf
        lo = ctx.now_us - self.within_us
        floor = _missing_upto(ctx.history)
        idx = ctx.history.exposures_for(pkey) or {}
        if leaf.operation == "*" or ("*" not in leaf.operation and "?" not in leaf.operation and "[" not in leaf.operation):
            b = idx.get((leaf.kind, leaf.operation))
            distinct = b.distinct_since(lo) if b else 0
            trunc = max(floor, b.truncated_upto if b else 0)
            read = [b] if b else []
        else:
            keys: set[str] = set()
            trunc = floor
            read = []
            for (kind, op), b in idx.items():
                if kind == leaf.kind and op != "*" and self._ops(op):
                    keys |= b.keys_since(lo)
                    trunc = max(trunc, b.truncated_upto)
                    read.append(b)
            distinct = len(keys)
        for b in read:
            ctx.read(b)
            # A key counts from its latest showing: the count changes when the oldest one leaves.
            i = bisect_left(b.order, (lo, ""))
            if i < len(b.order):
                ctx.until = min(ctx.until, b.order[i][0] + self.within_us + 1)
        if lo <= trunc:
            ctx.until = min(ctx.until, trunc + self.within_us + 1)
        out.observed = float(distinct)
        if leaf.fraction is not None:
            live = ctx.history.live_rows.get(leaf.kind)
            if live is None:
                raise _Undecided(f"the namespace's live {leaf.kind} row count is unknown")
            threshold = leaf.fraction * live
        else:
            assert leaf.value is not None
            threshold = leaf.value
        out.threshold = threshold
        decided = compare(leaf.cmp, float(distinct), threshold, lo > trunc)
        if decided is None:
            raise _Undecided(f"only {distinct} distinct keys kept in the window (truncated); that does not decide {leaf.cmp} {threshold:g}")
        out.holds = decided


@dataclass(slots=True)
class _LeafMemo:
    """One leaf's values within a rule's memo: they stand while every series and index the leaf
    read is at the version read and the instant is before `until`. For an extendable leaf
    (CompiledLeaf.extend) that read one series: its length and `rewrites` then (else -1), and
    `slack`, how many events appended to it cannot change whether it holds (CompiledLeaf.slack)."""

    reads: list[tuple[Series | Breadth, int]]
    until: int
    outcome: LeafOutcome
    size: int = -1
    rewrites: int = -1
    slack: int = 0


@dataclass(slots=True)
class RuleMemo:
    """A rule's answer for one caller (and bound arguments): it stands while the window is the
    same one at the same generation, every series and index read is at the version read, and
    the instant is before `until`. When it does not, each leaf whose own reads stand gives its
    values again (`by_leaf`, in the order of `leaves`; CompiledRule._refresh brings it up to
    date in place)."""

    history: History
    generation: int
    reads: list[tuple[Series | Breadth, int]]
    until: int
    value: bool | None
    leaves: list[LeafOutcome]
    by_leaf: list[_LeafMemo]


MEMO_MAX = 4096  # callers (and bound arguments) remembered per rule
CallerKey = tuple[str, str, str, str]
_MemoKey = CallerKey | tuple[CallerKey, tuple[str | None, ...]]


class CompiledRule:
    """A rule ready to evaluate: its action matcher, its leaves, the history shape it needs."""

    __slots__ = (
        "_actions",
        "_binds",
        "_combine",
        "_leaves",
        "_memo",
        "_memoizable",
        "_order",
        "_reads_pending",
        "definition",
        "last_outcome",
        "name",
        "shape",
    )

    def __init__(self, rule: RuleDef) -> None:
        self.definition = rule
        self.name = rule.name
        self._actions = GlobSet(rule.actions)
        self._leaves: dict[int, CompiledLeaf] = {}
        self._collect(rule.condition)
        # The leaves in the order evaluation reports them (the tree's, depth first).
        self._order = tuple(self._leaves.values())
        # The condition's value from its leaves' outcomes in that order (a memo's refresh).
        self._combine = combiner(rule.condition)
        self.shape = self._shape()
        leaves = [cl.leaf for cl in self._leaves.values()]
        # The call's own arguments a leaf binds ($args.<field>): part of the memo's key.
        self._binds = tuple(sorted({a.bind for leaf in leaves for a in (*leaf.args_equal, *leaf.anchor_args_equal) if a.bind}))
        # Calls in flight count toward count_within: with one of the caller's in flight that such
        # a leaf would count, the rule is evaluated afresh.
        counted = tuple(leaf.operation for leaf in leaves if leaf.op == "count_within" and leaf.outcome != "failed")
        self._reads_pending = GlobSet(counted) if counted else None
        # breadth_within's fraction reads the namespace's live row count, which no version tracks.
        self._memoizable = not any(leaf.fraction is not None for leaf in leaves)
        self._memo: dict[_MemoKey, RuleMemo] = {}
        # The outcome evaluator.evaluate last built from this rule's answer (reused while the memo stands).
        self.last_outcome: RuleOutcome | None = None

    def _collect(self, node: Node) -> None:
        if isinstance(node, Leaf):
            self._leaves[id(node)] = CompiledLeaf(node)
        else:
            for c in node.children:
                self._collect(c)

    def _shape(self) -> Shape:
        kinds: set[str] = set()
        globs: set[str] = set()
        args: set[str] = set()
        exposure_kinds: set[str] = set()
        views: set[tuple[str, str]] = set()
        retention = 0
        for cl in self._leaves.values():
            leaf = cl.leaf
            kinds.add(leaf.key)
            retention = max(retention, cl.within_us)
            if leaf.op == "breadth_within":
                exposure_kinds.add(leaf.kind)
                continue
            globs.add(leaf.operation)
            if leaf.anchor:
                globs.add(leaf.anchor)
            args.update(a.field for a in leaf.args_equal)
            args.update(a.field for a in leaf.anchor_args_equal)
            views.update((ops, leaf.outcome) for ops in cl._spans)
        return Shape(
            frozenset(kinds),
            None if "*" in globs else frozenset(globs),
            frozenset(args),
            retention,
            frozenset(exposure_kinds),
            frozenset(views),
        )

    def applies(self, op: str) -> bool:
        return self._actions(op)

    def counts(self, op: str) -> bool:
        """Whether a call of `op` counts toward one of this rule's count_within leaves, so a
        call of it in flight must be reserved."""
        return any(cl.leaf.op == "count_within" and cl.leaf.outcome != "failed" and cl._ops(op) for cl in self._leaves.values())

    def evaluate(self, ctx: EvalContext) -> tuple[bool | None, list[LeafOutcome]]:
        """The condition under Kleene logic (None: undecided), and every leaf's values.

        With `ctx.memo`, the answer last given to this caller is given again when nothing it
        depends on changed: the history keeps each series' version, and the answer knows the
        instant at which time alone could change it. The window is kept as events arrive; a
        call pays for evaluating only the rules whose history moved."""
        if not (ctx.memo and self._memoizable) or (ctx.pending and self._counts_in_flight(ctx)):
            leaves: list[LeafOutcome] = []
            return self._eval(self.definition.condition, ctx, leaves), leaves
        memo = self.kept(ctx)
        return memo.value, memo.leaves

    @property
    def standable(self) -> bool:
        """Whether a standing verdict (domain.standing) may keep this rule's answer: its memo is
        kept by caller alone (no bound arguments, nothing no version tracks)."""
        return self._memoizable and not self._binds

    def kept(self, ctx: EvalContext) -> RuleMemo:
        """The memo's answer for this call, brought up to date (memo path only: `ctx.memo`, no
        call in flight this rule counts)."""
        key = (ctx.caller_key, tuple(ctx.args.get(b) for b in self._binds)) if self._binds else ctx.caller_key
        hit = self._memo.get(key)
        if hit is not None and hit.history is ctx.history and hit.generation == ctx.history.generation:
            if ctx.now_us < hit.until:
                for source, version in hit.reads:
                    if source.version != version:
                        break
                else:
                    return hit
            self._refresh(hit, ctx)
            return hit
        ctx.reads, ctx.until = [], _FOREVER
        leaves: list[LeafOutcome] = []
        by_leaf: list[_LeafMemo] = []
        value = self._eval(self.definition.condition, ctx, leaves, by_leaf)
        if len(self._memo) >= MEMO_MAX:
            self._memo.clear()
        memo = self._memo[key] = RuleMemo(
            ctx.history, ctx.history.generation, [(x, x.version) for x in ctx.reads], ctx.until, value, leaves, by_leaf
        )
        return memo

    def grown(self, ctx: EvalContext, leaves: list[LeafOutcome]) -> tuple[tuple[int, float, int], ...] | None:
        """Whether this (standable) rule's answer for the caller stands though its history moved:
        its memo, whose `leaves` are these, stands but for events appended to the series its
        extendable leaves read, fewer than could change any of them (CompiledLeaf.grown). Then
        each grown leaf's (position, count, last instant) at `ctx.now_us`, for the outcome a
        decision row records; the memo is left as it is (it extends from there when asked).
        None: ask the rule again (`kept`)."""
        memo = self._memo.get(ctx.caller_key)
        history = ctx.history
        now = ctx.now_us
        if (
            memo is None
            or memo.leaves is not leaves
            or memo.history is not history
            or memo.generation != history.generation
            or now >= memo.until
        ):
            return None
        out = []
        for j, lm in enumerate(memo.by_leaf):
            for source, version in lm.reads:
                if source.version != version:
                    break
            else:
                continue  # this leaf's reads stand
            if lm.size < 0:
                return None
            values = self._order[j].grown(lm, history, now)
            if values is None:
                return None
            out.append((j, *values))
        return tuple(out)

    def _refresh(self, memo: RuleMemo, ctx: EvalContext) -> None:
        """The rule's history moved: each leaf whose own reads stand gives its values again, an
        extendable one whose series only grew is extended (CompiledLeaf.extend), the others are
        evaluated again; the memo is brought up to date in place."""
        now = ctx.now_us
        leaves: list[LeafOutcome] = []
        reads: list[tuple[Series | Breadth, int]] = []
        until = _FOREVER
        for lm, compiled in zip(memo.by_leaf, self._order, strict=True):
            # The leaf's values stand while before `until` and every source read is at the version read
            # (inline: this loop runs for every moved rule of every gated call).
            stands = now < lm.until
            if stands:
                for source, version in lm.reads:
                    if source.version != version:
                        stands = False
                        break
            if not stands:
                out = compiled.extend(lm, ctx) if lm.size >= 0 else None
                if out is not None:
                    s = lm.reads[0][0]
                    assert isinstance(s, Series)
                    lm.reads[0] = (s, s.version)
                    lm.size = len(s.times)
                    lm.outcome = out
                else:
                    ctx.reads, ctx.until = [], _FOREVER
                    lm.outcome = compiled.evaluate(ctx)
                    lm.reads = [(x, x.version) for x in ctx.reads]
                    lm.until = ctx.until
                    lm.size, lm.rewrites = _extent(compiled, ctx.reads)
                lm.slack = compiled.slack(lm.outcome) if lm.size >= 0 else 0
            leaves.append(lm.outcome)
            reads += lm.reads
            if lm.until < until:
                until = lm.until
        memo.reads, memo.until, memo.leaves = reads, until, leaves
        memo.value = self._combine(leaves)

    def _leaf_memo(self, node: Leaf, ctx: EvalContext, by_leaf: list[_LeafMemo]) -> LeafOutcome:
        reads = ctx.reads
        start, until = len(reads), ctx.until
        ctx.until = _FOREVER
        compiled = self._leaves[id(node)]
        out = compiled.evaluate(ctx)
        size, rewrites = _extent(compiled, reads[start:])
        slack = compiled.slack(out) if size >= 0 else 0
        by_leaf.append(_LeafMemo([(x, x.version) for x in reads[start:]], ctx.until, out, size, rewrites, slack))
        ctx.until = min(until, ctx.until)
        return out

    def _counts_in_flight(self, ctx: EvalContext) -> bool:
        counted = self._reads_pending
        subject = ctx.caller.subject
        return counted is not None and any(c.subject == subject and counted(c.op) for c in ctx.pending)

    def _eval(self, node: Node, ctx: EvalContext, leaves: list[LeafOutcome], by_leaf: list[_LeafMemo] | None = None) -> bool | None:
        """With `by_leaf` (the memo's path), each leaf's own reads and `until` are kept there."""
        if isinstance(node, Leaf):
            out = self._leaves[id(node)].evaluate(ctx) if by_leaf is None else self._leaf_memo(node, ctx, by_leaf)
            leaves.append(out)
            return out.holds
        assert isinstance(node, BoolNode)
        # Every child is evaluated (no short cut) so the report carries every leaf's values.
        return _kleene(node.op, [self._eval(c, ctx, leaves, by_leaf) for c in node.children])


def _kleene(op: str, values: list[bool | None]) -> bool | None:
    """all / any / not over leaf values, None being undecided (values are True, False or None,
    so `in` finds exactly those)."""
    if op == "not":
        v = values[0]
        return None if v is None else not v
    if op == "all":
        if False in values:
            return False
        return None if None in values else True
    if True in values:
        return True
    return None if None in values else False


Combine = Callable[[Sequence[LeafOutcome]], bool | None]


def combiner(node: Node) -> Combine:
    """What gives the condition's value from its leaves' outcomes, taken in the tree's order
    (depth first): the tree walked once, when the rule is compiled, not on every refresh."""
    combine, _ = _combiner(node, 0)
    return combine


def _combiner(node: Node, first: int) -> tuple[Combine, int]:
    """The combine function of `node` whose first leaf is at `first`, and the index after its last."""
    if isinstance(node, Leaf):
        return (lambda leaves: leaves[first].holds), first + 1
    assert isinstance(node, BoolNode)
    parts: list[Combine] = []
    at = first
    for child in node.children:
        part, at = _combiner(child, at)
        parts.append(part)
    op = node.op
    if op == "not":
        (only,) = parts

        def negated(leaves: Sequence[LeafOutcome]) -> bool | None:
            v = only(leaves)
            return None if v is None else not v

        return negated, at
    return (lambda leaves: _kleene(op, [part(leaves) for part in parts])), at


def _extent(leaf: CompiledLeaf, reads: list[Series | Breadth]) -> tuple[int, int]:
    """What CompiledLeaf.extend starts from: the one series an extendable leaf read (its length
    and `rewrites`), else (-1, -1)."""
    if leaf.extendable and len(reads) == 1:
        s = reads[0]
        if isinstance(s, Series):
            return len(s.times), s.rewrites
    return -1, -1


def compile_rule(rule: RuleDef) -> CompiledRule:
    return CompiledRule(rule)


class BrokenRule(CompiledRule):
    """A stored rule that no longer compiles (an op renamed, the grammar changed).

    It is never dropped: on every call its actions name it is undecided, so it denies a
    write-shaped call and allows a read (the evaluation-error semantics), and `policy.list`
    names it with `reason`. Actions that no longer parse either apply it to every op.
    """

    __slots__ = ("reason",)

    def __init__(self, name: str, effect: str, actions: tuple[str, ...], mode: str, reason: str) -> None:
        self.reason = reason
        self.definition = RuleDef(
            name=name,
            effect=effect,
            actions=actions or ("*",),
            condition=BoolNode("condition", "all", ()),
            description="",
            mode=mode,
            raw_condition={},
        )
        self.name = name
        self._actions = GlobSet(self.definition.actions)
        self._leaves = {}
        self._order = ()
        self._combine = combiner(self.definition.condition)
        self.shape = Shape()
        self.last_outcome = None

    def evaluate(self, ctx: EvalContext) -> tuple[bool | None, list[LeafOutcome]]:
        return None, [LeafOutcome("condition", "broken", None, error=f"the stored rule does not compile: {self.reason}")]

    @property
    def standable(self) -> bool:
        return False

"""The in-memory history a replica evaluates rules over: one namespace's recent events and
exposures, indexed by principal, op and outcome, each series sorted by time.

Pure data structure (no I/O). A leaf's question becomes two binary searches: events of op X by
this principal in [now - within, now). Series are bounded: by time (the namespace's rules'
longest window) and by count (`cap` per principal, op and outcome); a series cut by count
remembers the newest instant it dropped, so a leaf whose window reaches past it knows its
count is only a lower bound (and says so when that bound does not decide it).
"""

from __future__ import annotations

import fnmatch
from array import array
from bisect import bisect_left, insort
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from itertools import chain
from operator import itemgetter
from typing import Any, Protocol, TypeVar

# A principal's key: (subject, key kind, key value). The subject is always part of it: that
# is the caller pin, a rule never reads another principal's events.
PKey = tuple[str, str, str]
# A leaf's question about ops: (op name or glob, outcome `ok` / `failed` / `any`).
ViewKey = tuple[str, str]


class _Windowed(Protocol):
    """A time-sorted series that can forget what is older than a cutoff."""

    def drop_before(self, cutoff: int) -> None: ...

    @property
    def empty(self) -> bool: ...


_K = TypeVar("_K")
_S = TypeVar("_S", bound=_Windowed)


def drop_all_before(by_key: dict[_K, _S], cutoff: int) -> None:
    """Cuts every series in `by_key` at `cutoff` and forgets the ones left empty."""
    for k in list(by_key):
        series = by_key[k]
        series.drop_before(cutoff)
        if series.empty:
            del by_key[k]


@dataclass(slots=True)
class _Seen:
    """What a call and a key it showed share: when, whose call, which op (positional fields
    first, in this order, in each of them)."""

    ts: int
    subject: str
    agent: str
    user: str
    session: str
    op: str

    def key_value(self, kind: str) -> str:
        return key_value(kind, self.subject, self.agent, self.user, self.session)


@dataclass(slots=True)
class Event(_Seen):
    """One ledger row, as much of it as rules read."""

    ok: bool
    args: Mapping[str, str]
    request_id: str = ""

    @property
    def dedup(self) -> tuple[str, str, int, str]:
        return (self.request_id, self.op, self.ts, self.subject)


@dataclass(slots=True)
class Exposure(_Seen):
    """One key an op returned to a principal (core/loom_core/exposures.py)."""

    kind: str
    key: str
    request_id: str = ""

    @property
    def dedup(self) -> tuple[str, str, int, str, str]:
        return (self.request_id, self.op, self.ts, self.kind, self.key)


def key_value(kind: str, subject: str, agent: str, user: str, session: str) -> str:
    """The value of a key kind for a call: the agent label defaults to the subject (as the
    chain's `agent_label` does); session and user are the labels as sent, empty included."""
    if kind == "agent":
        return agent or subject
    if kind == "session":
        return session
    if kind == "user":
        return user
    return ""


class GlobSet:
    """Op-name globs with a memo: matching the same op twice costs one dict lookup."""

    __slots__ = ("_memo", "patterns")

    def __init__(self, patterns: frozenset[str] | tuple[str, ...]) -> None:
        self.patterns = tuple(patterns)
        self._memo: dict[str, bool] = {}

    def __call__(self, op: str) -> bool:
        hit = self._memo.get(op)
        if hit is None:
            hit = any(p == "*" or p == op or fnmatch.fnmatchcase(op, p) for p in self.patterns)
            if len(self._memo) < 4096:
                self._memo[op] = hit
        return hit


class ArgTable:
    """The values of the arguments a namespace's rules compare, one code per distinct
    combination. Series keep each event's code in an array of machine ints rather than a
    reference to its arguments: a full collection walks every reference a list holds, and
    10^5 of them cost it ~1 s on a loaded machine (bench/policy.py), while an array holds none."""

    __slots__ = ("_codes", "index", "kept", "names", "rows")

    def __init__(self, arg_names: frozenset[str]) -> None:
        self.names = tuple(sorted(arg_names))
        self.index = {name: i for i, name in enumerate(self.names)}
        self.rows: list[tuple[str | None, ...]] = []
        self._codes: dict[tuple[str | None, ...], int] = {}
        # Rows after the last compaction: the table is compacted once it has doubled since.
        self.kept = 0

    def code(self, args: Mapping[str, str]) -> int:
        if len(self.names) < 2:
            return 0  # a filter on one argument reads its value's series alone: nothing to keep
        row = tuple(args.get(name) for name in self.names)
        code = self._codes.get(row)
        if code is None:
            code = self._codes[row] = len(self.rows)
            self.rows.append(row)
        return code

    def matches(self, code: int, rest: tuple[tuple[str, str], ...]) -> bool:
        for name, value in rest:
            i = self.index.get(name)
            if i is None:
                raise NotIndexed(name)
            if self.rows[code][i] != value:
                return False
        return True

    def compact(self, live: set[int]) -> dict[int, int]:
        """Keep only the rows of `live` codes; the old code -> new code map."""
        remap = {old: new for new, old in enumerate(sorted(live))}
        self.rows = [self.rows[old] for old in sorted(live)]
        self._codes = {row: code for code, row in enumerate(self.rows)}
        self.kept = len(self.rows)
        return remap


class _ArgSeries:
    __slots__ = ("codes", "times")

    def __init__(self) -> None:
        self.times: array[int] = array("q")
        self.codes: array[int] = array("q")

    def add(self, ts: int, code: int) -> None:
        if not self.times or ts >= self.times[-1]:
            self.times.append(ts)
            self.codes.append(code)
        else:
            i = bisect_left(self.times, ts + 1)
            self.times.insert(i, ts)
            self.codes.insert(i, code)

    def drop_before(self, cutoff: int) -> None:
        i = bisect_left(self.times, cutoff)
        if i:
            del self.times[:i]
            del self.codes[:i]

    @property
    def empty(self) -> bool:
        return not self.times


def outcome_matches(outcome: str, ok: bool) -> bool:
    return outcome == "any" or (outcome == "ok") == ok


class NotIndexed(Exception):
    """An args_equal field the window does not index (its shape is older than the rule)."""


class Series:
    """One principal's events of one op and outcome: sorted times, plus a sub-series per value
    of each argument the namespace's rules compare."""

    __slots__ = ("args", "by_arg", "rewrites", "times", "truncated_upto", "version")

    def __init__(self, args: ArgTable) -> None:
        self.args = args
        self.times: array[int] = array("q")
        self.by_arg: dict[str, dict[str, _ArgSeries]] = {name: {} for name in args.names}
        # Events at or before this instant may be missing (0: nothing dropped by count).
        self.truncated_upto = 0
        # Bumped on every change: an answer read from this series holds while it is unchanged.
        self.version = 0
        # Bumped on every change but an event appended at the end (an insert before the last
        # event, a cut from the front, a new truncation point): while it is unchanged, what
        # changed since an answer was read is the events appended after `len(times)` then
        # (compiler.CompiledLeaf.extend).
        self.rewrites = 0

    def add(self, ts: int, args: Mapping[str, str], code: int) -> None:
        """One event at `ts`; `code`: its arguments' code in self.args."""
        self.version += 1
        times = self.times
        if not times or ts >= times[-1]:
            times.append(ts)
        else:
            self.rewrites += 1
            insort(times, ts)
        if not args:
            return  # most calls (every call without arguments) index nothing more
        for name, values in self.by_arg.items():
            v = args.get(name)
            if v is not None:
                sub = values.get(v)
                if sub is None:
                    sub = values[v] = _ArgSeries()
                sub.add(ts, code)

    def drop_before(self, cutoff: int) -> None:
        i = bisect_left(self.times, cutoff)
        if not i:
            return
        self.version += 1
        self.rewrites += 1
        del self.times[:i]
        for values in self.by_arg.values():
            drop_all_before(values, cutoff)

    @property
    def empty(self) -> bool:
        return not self.times

    def truncate(self, cap: int) -> None:
        """Keep the newest `cap` events; remember the newest instant dropped."""
        extra = len(self.times) - cap
        if extra <= 0:
            return
        upto = self.times[extra - 1]
        self.truncated_upto = max(self.truncated_upto, upto)
        self.version += 1
        self.rewrites += 1
        self.drop_before(upto + 1)

    def _sub(self, filt: tuple[tuple[str, str], ...]) -> _ArgSeries | None:
        name, value = filt[0]
        values = self.by_arg.get(name)
        if values is None:
            raise NotIndexed(name)
        return values.get(value)

    def span(self, lo: int, hi: int) -> tuple[int, int]:
        """The indices of the events in [lo, hi): times[i:j]."""
        times = self.times
        i = bisect_left(times, lo)
        return i, bisect_left(times, hi, i)

    def count(self, lo: int, hi: int, filt: tuple[tuple[str, str], ...] = ()) -> tuple[int, int]:
        """Events in [lo, hi) matching `filt`: (how many, the latest one's instant or 0)."""
        if not filt:
            i, j = self.span(lo, hi)
            return j - i, self.times[j - 1] if j > i else 0
        sub = self._sub(filt)
        if sub is None:
            return 0, 0
        i, j = bisect_left(sub.times, lo), bisect_left(sub.times, hi)
        if len(filt) == 1:
            return j - i, sub.times[j - 1] if j > i else 0
        rest, table, codes = filt[1:], self.args, sub.codes
        n, last = 0, 0
        for k in range(i, j):
            if table.matches(codes[k], rest):
                n += 1
                last = sub.times[k]
        return n, last

    def latest(self, lo: int, hi: int, filt: tuple[tuple[str, str], ...] = ()) -> int:
        """The latest matching event in [lo, hi), or 0."""
        if not filt or len(filt) == 1:
            return self.count(lo, hi, filt)[1]
        sub = self._sub(filt)
        if sub is None:
            return 0
        i, j = bisect_left(sub.times, lo), bisect_left(sub.times, hi)
        rest, table, codes = filt[1:], self.args, sub.codes
        for k in range(j - 1, i - 1, -1):
            if table.matches(codes[k], rest):
                return sub.times[k]
        return 0

    def arg_series(self) -> Iterator[_ArgSeries]:
        for values in self.by_arg.values():
            yield from values.values()


def merged(parts: list[Series], args: ArgTable) -> Series:
    """One series holding every event of `parts` (a view's start, from the series it covers).
    Sorting the concatenated runs is a merge in C (timsort finds the sorted runs)."""
    out = Series(args)
    out.times = array("q", sorted(chain.from_iterable(p.times for p in parts)))
    out.truncated_upto = max((p.truncated_upto for p in parts), default=0)
    for name, values in out.by_arg.items():
        subs: dict[str, list[_ArgSeries]] = {}
        for p in parts:
            for v, sub in p.by_arg.get(name, {}).items():
                subs.setdefault(v, []).append(sub)
        for v, group in subs.items():
            target = values[v] = _ArgSeries()
            if len(group) == 1:
                target.times, target.codes = array("q", group[0].times), array("q", group[0].codes)
                continue
            pairs = sorted(chain.from_iterable(zip(g.times, g.codes, strict=True) for g in group), key=itemgetter(0))
            target.times = array("q", [ts for ts, _ in pairs])
            target.codes = array("q", [code for _, code in pairs])
    return out


class Breadth:
    """Distinct keys shown to one principal: each key once, at the last time it was shown,
    in time order, so 'distinct keys since t' is one binary search."""

    __slots__ = ("last", "order", "truncated_upto", "version")

    def __init__(self) -> None:
        self.last: dict[str, int] = {}
        self.order: list[tuple[int, str]] = []
        self.truncated_upto = 0
        self.version = 0  # as Series.version

    def add(self, ts: int, key: str) -> None:
        old = self.last.get(key)
        if old is not None and ts <= old:
            return
        self.version += 1
        if old is not None:
            i = bisect_left(self.order, (old, key))
            del self.order[i]
        self.last[key] = ts
        if not self.order or (ts, key) >= self.order[-1]:
            self.order.append((ts, key))
        else:
            insort(self.order, (ts, key))

    def distinct_since(self, lo: int) -> int:
        return len(self.order) - bisect_left(self.order, (lo, ""))

    def keys_since(self, lo: int) -> set[str]:
        return {k for _, k in self.order[bisect_left(self.order, (lo, "")) :]}

    def drop_before(self, cutoff: int) -> None:
        i = bisect_left(self.order, (cutoff, ""))
        if i:
            self.version += 1
            for _, k in self.order[:i]:
                del self.last[k]
            del self.order[:i]

    @property
    def empty(self) -> bool:
        return not self.order

    def truncate(self, cap: int) -> None:
        extra = len(self.order) - cap
        if extra > 0:
            upto = self.order[extra - 1][0]
            self.truncated_upto = max(self.truncated_upto, upto)
            self.version += 1
            self.drop_before(upto + 1)


@dataclass(frozen=True, slots=True)
class Shape:
    """What a namespace's rules need kept: which key kinds to index, which ops (globs; None for
    all), which arguments, how far back, and which exposure kinds."""

    key_kinds: frozenset[str] = frozenset()
    op_globs: frozenset[str] | None = frozenset()
    arg_names: frozenset[str] = frozenset()
    retention_us: int = 0
    exposure_kinds: frozenset[str] = frozenset()
    # The views (Window.view) the rules read, kept from the window's first event on; a view
    # asked for that is not here is built from the series when first read.
    views: frozenset[ViewKey] = frozenset()

    def covers(self, other: Shape) -> bool:
        """Whatever `other` needs, a window of this shape already keeps."""
        if self.op_globs is not None and (other.op_globs is None or not other.op_globs <= self.op_globs):
            return False
        return (
            other.key_kinds <= self.key_kinds
            and other.arg_names <= self.arg_names
            and other.retention_us <= self.retention_us
            and other.exposure_kinds <= self.exposure_kinds
        )

    def union(self, other: Shape) -> Shape:
        globs = None if self.op_globs is None or other.op_globs is None else self.op_globs | other.op_globs
        return Shape(
            self.key_kinds | other.key_kinds,
            globs,
            self.arg_names | other.arg_names,
            max(self.retention_us, other.retention_us),
            self.exposure_kinds | other.exposure_kinds,
            self.views | other.views,
        )

    @property
    def empty(self) -> bool:
        return not self.key_kinds


@dataclass(slots=True)
class Window:
    """One namespace's history in a replica (or in a replay)."""

    shape: Shape
    # Events before this instant may be missing (the window was built from here on).
    floor_us: int = 0
    cap: int = 200_000
    principals: dict[PKey, dict[tuple[str, bool], Series]] = field(default_factory=dict)
    exposures: dict[PKey, dict[tuple[str, str], Breadth]] = field(default_factory=dict)
    # The namespace's live rows per exposure kind (breadth_within's fraction), when known.
    live_rows: dict[str, int] = field(default_factory=dict)
    events: int = 0
    # Bumped whenever a series or breadth index is created or removed, or the floor moves: with
    # each read series' version, what an answer depends on (compiler.CompiledRule's memo).
    generation: int = 0
    _wants: GlobSet | None = None
    # Views: for a leaf that reads several (op, outcome) series (a glob, or outcome `any`), one
    # series per principal holding all of their events, kept up to date as events arrive, so
    # the leaf's question is two binary searches however many ops it spans. Built from the
    # series on first use; `_routes` memoises which views an (op, ok) feeds.
    _views: dict[ViewKey, tuple[GlobSet, dict[PKey, Series]]] = field(default_factory=dict)
    _routes: dict[tuple[str, bool], list[dict[PKey, Series]]] = field(default_factory=dict)
    args: ArgTable = field(init=False)

    def __post_init__(self) -> None:
        self.args = ArgTable(self.shape.arg_names)
        for ops, outcome in self.shape.views:
            self._views[(ops, outcome)] = (GlobSet((ops,)), {})

    def wants(self, op: str) -> bool:
        if self.shape.op_globs is None:
            return True
        if self._wants is None:
            self._wants = GlobSet(self.shape.op_globs)
        return self._wants(op)

    def add_event(self, ev: Event) -> None:
        if not self.wants(ev.op):
            return
        self.events += 1
        table = self.args
        code = table.code(ev.args)
        routes = self._route(ev.op, ev.ok) if self._views else ()
        for kind in self.shape.key_kinds:
            pkey = (ev.subject, kind, ev.key_value(kind))
            ops = self.principals.get(pkey)
            if ops is None:
                ops = self.principals[pkey] = {}
            s = ops.get((ev.op, ev.ok))
            if s is None:
                s = ops[(ev.op, ev.ok)] = Series(table)
                self.generation += 1
            s.add(ev.ts, ev.args, code)
            for by_pkey in routes:
                v = by_pkey.get(pkey)
                if v is None:
                    v = by_pkey[pkey] = Series(table)
                    self.generation += 1
                v.add(ev.ts, ev.args, code)
            # Amortised: cut back to the cap once a series is a tenth over it.
            if len(s.times) > self.cap + self.cap // 10:
                s.truncate(self.cap)
                # A view holds what its series hold: cut where they were cut.
                for by_pkey in routes:
                    v = by_pkey[pkey]
                    v.truncated_upto = max(v.truncated_upto, s.truncated_upto)
                    v.version += 1
                    v.rewrites += 1
                    v.drop_before(s.truncated_upto + 1)

    def view(self, pkey: PKey, ops: str, outcome: str) -> Series | None:
        """The principal's events of ops matching `ops` with this outcome, as one series (None:
        none kept)."""
        kept = self._views.get((ops, outcome))
        if kept is None:
            kept = self._keep_view(ops, outcome)
        return kept[1].get(pkey)

    def _keep_view(self, ops: str, outcome: str) -> tuple[GlobSet, dict[PKey, Series]]:
        globs = GlobSet((ops,))
        by_pkey: dict[PKey, Series] = {}
        for pkey, series in self.principals.items():
            parts = [s for (op, ok), s in series.items() if outcome_matches(outcome, ok) and globs(op)]
            if parts:
                by_pkey[pkey] = merged(parts, self.args)
        kept = self._views[(ops, outcome)] = (globs, by_pkey)
        self._routes.clear()
        self.generation += 1
        return kept

    def _route(self, op: str, ok: bool) -> list[dict[PKey, Series]]:
        routes = self._routes.get((op, ok))
        if routes is None:
            routes = self._routes[(op, ok)] = [
                by_pkey for (_, outcome), (globs, by_pkey) in self._views.items() if outcome_matches(outcome, ok) and globs(op)
            ]
        return routes

    def add_exposure(self, x: Exposure) -> None:
        if x.kind not in self.shape.exposure_kinds:
            return
        for kind in self.shape.key_kinds | {"actor"}:
            pkey = (x.subject, kind, x.key_value(kind))
            idx = self.exposures.get(pkey)
            if idx is None:
                idx = self.exposures[pkey] = {}
            for slot in ((x.kind, x.op), (x.kind, "*")):
                b = idx.get(slot)
                if b is None:
                    b = idx[slot] = Breadth()
                    self.generation += 1
                b.add(x.ts, x.key)
                if len(b.order) > self.cap + self.cap // 10:
                    b.truncate(self.cap)

    def series_for(self, pkey: PKey) -> dict[tuple[str, bool], Series] | None:
        return self.principals.get(pkey)

    def exposures_for(self, pkey: PKey) -> dict[tuple[str, str], Breadth] | None:
        return self.exposures.get(pkey)

    def evict(self, cutoff: int) -> None:
        """Drop what is older than any rule looks (cutoff = now - the longest window)."""
        self.floor_us = max(self.floor_us, cutoff)
        self.generation += 1
        for pkey in list(self.principals):
            ops = self.principals[pkey]
            drop_all_before(ops, cutoff)
            if not ops:
                del self.principals[pkey]
        for _, by_pkey in self._views.values():
            drop_all_before(by_pkey, cutoff)
        for pkey in list(self.exposures):
            idx = self.exposures[pkey]
            drop_all_before(idx, cutoff)
            if not idx:
                del self.exposures[pkey]
        if len(self.args.rows) > 2 * self.args.kept + 1024:
            self._compact_args()

    def _all_series(self) -> Iterator[Series]:
        for ops in self.principals.values():
            yield from ops.values()
        for _, by_pkey in self._views.values():
            yield from by_pkey.values()

    def _compact_args(self) -> None:
        """Drop the argument codes no event in the window uses any more (the table only grows
        as events arrive, so a stream of distinct values would keep every one otherwise)."""
        live: set[int] = set()
        for s in self._all_series():
            for sub in s.arg_series():
                live.update(sub.codes)
        remap = self.args.compact(live)
        for s in self._all_series():
            for sub in s.arg_series():
                sub.codes = array("q", [remap[c] for c in sub.codes])

    def stats(self) -> dict[str, Any]:
        return {
            "principals": len(self.principals),
            "series": sum(len(v) for v in self.principals.values()),
            "events": sum(len(s.times) for v in self.principals.values() for s in v.values()),
        }

"""Every namespace's compiled rules, held in each replica.

Consistency: a replica loads every live rule at start and reloads them all every
TTL/2 (LOOM_POLICY_CACHE_TTL_SECONDS) in one query. A change (policy.set / policy.delete)
reloads its namespace on the replica that made it before the op answers, and is pushed over
NATS (`loom.policy.rules`) so every other replica reloads that namespace at once. If a push is
lost, the periodic reload still brings the change within the TTL; and a namespace whose rules
were last confirmed more than a TTL ago is reloaded on the call path before it is used, so no
replica ever serves rules older than the TTL while the store answers. (If the store does not
answer, the replica keeps the rules it has and says so in its log.)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from loom_core.aio import every
from loom_core.bus import Bus
from loom_core.errors import ValidationFailed

from ..bus import RULES_SUBJECT
from ..domain.compiler import BrokenRule, CallerKey, CompiledRule, compile_rule
from ..domain.history import Shape
from ..domain.model import EFFECTS, RULE_MODES
from ..domain.parser import parse_rule
from ..domain.standing import Standing
from ..settings import PolicySettings
from ..store.rules import RuleRow, RuleSpec, RuleStore

log = logging.getLogger(__name__)

NsKey = tuple[str, str]


@dataclass(slots=True)
class NamespaceRules:
    rules: tuple[CompiledRule, ...] = ()
    rows: dict[str, RuleRow] = field(default_factory=dict)
    shape: Shape = field(default_factory=Shape)
    _by_op: dict[str, tuple[CompiledRule, ...]] = field(default_factory=dict)
    _counted: dict[str, bool] = field(default_factory=dict)
    _gating: dict[str, tuple[tuple[CompiledRule, ...], bool, tuple[str, ...]]] = field(default_factory=dict)
    # Each caller's standing verdict per op (domain.standing), for these rules only.
    standing: dict[tuple[str, CallerKey], Standing] = field(default_factory=dict)

    def for_op(self, op: str) -> tuple[CompiledRule, ...]:
        hit = self._by_op.get(op)
        if hit is None:
            hit = tuple(r for r in self.rules if r.applies(op))
            if len(self._by_op) < 4096:
                self._by_op[op] = hit
        return hit

    def counts(self, op: str) -> bool:
        """Whether a call of `op` counts toward some rule's count_within here (so a call of it
        in flight is reserved), whichever ops the rule itself applies to."""
        hit = self._counted.get(op)
        if hit is None:
            hit = any(r.counts(op) for r in self.rules)
            if len(self._counted) < 4096:
                self._counted[op] = hit
        return hit

    def gating(self, op: str) -> tuple[tuple[CompiledRule, ...], bool, tuple[str, ...]]:
        """`for_op` and `counts` of `op` together, and the names of `for_op`'s rules (a verdict's
        rules, in order, when the gate decides `op`): the gate's one lookup per call."""
        hit = self._gating.get(op)
        if hit is None:
            rules = self.for_op(op)
            hit = (rules, self.counts(op), tuple(r.name for r in rules))
            if len(self._gating) < 4096:
                self._gating[op] = hit
        return hit

    def get(self, name: str) -> CompiledRule | None:
        return next((r for r in self.rules if r.name == name), None)


EMPTY = NamespaceRules()


def _spec(row: RuleRow) -> RuleSpec:
    return RuleSpec(
        name=row["name"],
        effect=row["effect"],
        actions=list(row["actions"]),
        condition=json.loads(row["condition"]),
        description=row["description"],
        mode=row["mode"],
    )


def compile_row(row: RuleRow, max_window_seconds: int) -> CompiledRule:
    """A stored rule compiled, or a BrokenRule carrying why it no longer compiles."""
    try:
        rule, _ = parse_rule(_spec(row), max_window_seconds=max_window_seconds)
        return compile_rule(rule)
    except (ValidationFailed, ValueError, TypeError, KeyError) as exc:
        reason = exc.message if isinstance(exc, ValidationFailed) else f"malformed stored row ({type(exc).__name__})"
        log.warning("policy: stored rule %s/%s/%s does not compile: %s", row.get("org"), row.get("namespace"), row.get("name"), reason)
        actions = tuple(a for a in row.get("actions") or () if isinstance(a, str) and a)
        mode = row.get("mode") if row.get("mode") in RULE_MODES else "inherit"
        effect = row.get("effect") if row.get("effect") in EFFECTS else "forbid"
        return BrokenRule(str(row.get("name", "")), str(effect), actions, str(mode), reason)


def broken_reason(row: RuleRow, max_window_seconds: int) -> str:
    """Why a stored rule no longer compiles ("" when it does): what policy.list shows."""
    rule = compile_row(row, max_window_seconds)
    return rule.reason if isinstance(rule, BrokenRule) else ""


def build_namespace(rows: list[RuleRow], max_window_seconds: int) -> NamespaceRules:
    # A rule that no longer compiles stays, as a BrokenRule: it fails closed for writes.
    compiled = [compile_row(row, max_window_seconds) for row in rows]
    shape = Shape()
    for r in compiled:
        shape = shape.union(r.shape)
    return NamespaceRules(tuple(compiled), {r["name"]: r for r in rows}, shape)


class RuleBook:
    def __init__(
        self, store: RuleStore, bus: Bus | None, settings: PolicySettings, on_change: Callable[[NsKey, NamespaceRules], None]
    ) -> None:
        self.store = store
        self.bus = bus
        self.ttl = float(settings.policy_cache_ttl_seconds)
        self.max_window = settings.policy_max_window_seconds
        self.on_change = on_change
        self._ns: dict[NsKey, NamespaceRules] = {}
        self._confirmed: dict[NsKey, float] = {}
        self._gen: dict[NsKey, int] = {}
        self._full_at = 0.0
        self._task: asyncio.Task[None] | None = None
        self._reloads: dict[NsKey, asyncio.Task[NamespaceRules]] = {}
        self.push_received = 0
        self.origin = uuid.uuid4().hex

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        # The push consumer (consumers/rule_pushes.py) starts before this first load, so a
        # change in between is seen by one or the other.
        try:
            await self.reload_all()
        except Exception:  # noqa: BLE001 - the refresher retries; calls reload on demand
            log.warning("policy: initial rule load failed")
        self._task = asyncio.create_task(
            every(max(0.05, self.ttl / 2), self.reload_all, failed="policy: periodic rule reload failed", logger=log)
        )

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for t in self._reloads.values():
            t.cancel()

    # -- reads -------------------------------------------------------------------------------

    def confirmed(self, org: str, namespace: str) -> NamespaceRules | None:
        """The namespace's rules if confirmed within the TTL (None: `get` reloads them)."""
        key = (org, namespace)
        now = time.monotonic()
        if now - self._full_at <= self.ttl or now - self._confirmed.get(key, 0.0) <= self.ttl:
            return self._ns.get(key, EMPTY)
        return None

    async def get(self, org: str, namespace: str) -> NamespaceRules:
        hit = self.confirmed(org, namespace)
        if hit is not None:
            return hit
        key = (org, namespace)
        try:
            return await self.reload(org, namespace)
        except Exception:  # noqa: BLE001 - keep serving what we have rather than fail every call
            log.warning("policy: rules for %s/%s could not be reloaded; serving the last loaded", org, namespace)
            return self._ns.get(key, EMPTY)

    def cached(self, org: str, namespace: str) -> NamespaceRules:
        return self._ns.get((org, namespace), EMPTY)

    def namespaces(self) -> list[NsKey]:
        return list(self._ns)

    # -- loads -------------------------------------------------------------------------------

    async def reload(self, org: str, namespace: str, *, fresh: bool = False) -> NamespaceRules:
        """Reload one namespace. Callers that only need a confirmation share a reload in
        flight; `fresh` (a change was just made) starts a new read, since one already in
        flight may have begun before the change was written."""
        key = (org, namespace)
        task = self._reloads.get(key)
        if task is None or fresh:
            task = asyncio.create_task(self._reload(key))
            self._reloads[key] = task

            def _done(t: asyncio.Task[NamespaceRules], key: NsKey = key) -> None:
                if self._reloads.get(key) is t:
                    del self._reloads[key]

            task.add_done_callback(_done)
        return await asyncio.shield(task)

    async def _reload(self, key: NsKey) -> NamespaceRules:
        gen = self._gen.get(key, 0) + 1
        self._gen[key] = gen
        started = time.monotonic()
        rows = await self.store.live_in(*key)
        if self._gen.get(key) != gen:
            # A newer reload of this namespace started meanwhile; it installs.
            return self._ns.get(key, EMPTY)
        self._install(key, build_namespace(rows, self.max_window), started)
        return self._ns.get(key, EMPTY)

    async def reload_all(self) -> None:
        started = time.monotonic()
        gens = dict(self._gen)
        rows = await self.store.all_live()
        by_ns: dict[NsKey, list[RuleRow]] = {}
        for r in rows:
            by_ns.setdefault((r["org"], r["namespace"]), []).append(r)
        for key in set(by_ns) | set(self._ns):
            if self._gen.get(key, 0) != gens.get(key, 0):
                continue  # a one-namespace reload since we started is newer than this read
            self._install(key, build_namespace(by_ns.get(key, []), self.max_window), started)
        self._full_at = started

    def _install(self, key: NsKey, fresh: NamespaceRules, confirmed_at: float) -> None:
        old = self._ns.get(key)
        if fresh.rules:
            self._ns[key] = fresh
        else:
            self._ns.pop(key, None)
        self._confirmed[key] = confirmed_at
        if old is None or old.rows != fresh.rows:
            self.on_change(key, fresh)

    async def changed(self, org: str, namespace: str) -> None:
        """After a local change: reload here now, then tell every other replica."""
        await self.reload(org, namespace, fresh=True)
        if self.bus is not None:
            payload = {"org": org, "namespace": namespace, "origin": self.origin}
            await self.bus.nc.publish(RULES_SUBJECT, json.dumps(payload).encode())
            await self.bus.nc.flush()

    async def pushed(self, body: bytes) -> None:
        """Another replica changed a namespace's rules (consumers/rule_pushes.py): reload it."""
        try:
            d = json.loads(body)
            org, ns = str(d["org"]), str(d["namespace"])
        except (ValueError, KeyError):
            return
        if d.get("origin") == self.origin:
            return  # our own change, already loaded
        self.push_received += 1
        try:
            await self.reload(org, ns, fresh=True)
        except Exception:  # noqa: BLE001 - the periodic reload catches up
            log.warning("policy: pushed change for %s/%s could not be loaded", org, ns)

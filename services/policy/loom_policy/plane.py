"""The policy plane, composed: `build(runtime)` (entry point `loom.planes`) hands the runner
the plane object; `build_gate(runtime)` (entry point `loom.gate`) the history-policy gate every
runtime (each plane's process) runs. Both take only the narrow parts they need."""

from __future__ import annotations

from loom_core.plane import HandlersPlane
from loom_core.runtime import Runtime

from . import consumers
from .handlers import PolicyHandlers
from .service.decisions import DecisionService
from .service.evaluation import EvaluationService
from .service.gate import PolicyGate
from .service.rules import RuleService
from .settings import PolicySettings
from .store.rules import RuleStore
from .store.schema import MIGRATIONS


class PolicyPlane(HandlersPlane):
    name = "policy"
    migrations = MIGRATIONS


def build(runtime: Runtime) -> PolicyPlane:
    settings = runtime.settings.plane(PolicySettings)
    # The gate is built first (runner: start_gate); the ops read and refresh its rule book.
    gate = runtime.gate if isinstance(runtime.gate, PolicyGate) else None
    op_arguments = {op.name: frozenset(op.request_cls.DESCRIPTOR.fields_by_name) for op in runtime.catalog.ops.values()}
    rules = RuleService(RuleStore(runtime.store), runtime.bus, settings, gate, op_arguments)
    handlers = PolicyHandlers(
        rules,
        EvaluationService(runtime.store, runtime.catalog, rules, settings, gate),
        DecisionService(runtime.store),
        settings,
    )
    return PolicyPlane(runtime.catalog, handlers)


def build_gate(runtime: Runtime) -> PolicyGate:
    return PolicyGate(
        runtime.store,
        runtime.bus,
        runtime.settings.plane(PolicySettings),
        ledger_observers=runtime.ledger.observers,
        flush_interval=runtime.settings.ledger_flush_interval_seconds,
        listen=consumers.listen,
    )

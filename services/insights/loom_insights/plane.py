"""The insights plane: `build(runtime)` for the runner (entry point `loom.planes: insights`).

On start it begins the analysis boundary's boot write and probe loop in the background (on a
ClickHouse server); on the embedded store both ops answer ANALYSIS_UNAVAILABLE.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from loom_core.plane import bind_handlers
from loom_core.runtime import Handler, Runtime
from loom_core.store import Migration

from .handlers import InsightsHandlers
from .service.analysis import Analysis
from .settings import InsightsSettings
from .store.schema import MIGRATIONS


class InsightsPlane:
    name = "insights"
    migrations: Sequence[Migration] = MIGRATIONS

    def __init__(self, runtime: Runtime) -> None:
        self._catalog = runtime.catalog
        self.analysis = Analysis(runtime.store, runtime.leases, runtime.auth, runtime.settings, runtime.settings.plane(InsightsSettings))
        self._handlers = InsightsHandlers(self.analysis)

    def handlers(self) -> dict[str, Handler]:
        return bind_handlers(self._catalog, self.name, self._handlers)

    async def start(self) -> None:
        await self.analysis.start()

    async def stop(self) -> None:
        await self.analysis.stop()

    async def health(self) -> dict[str, dict[str, Any]]:
        return self.analysis.health()


def build(runtime: Runtime) -> InsightsPlane:
    return InsightsPlane(runtime)

"""The insights plane: `build(runtime)` for the runner (entry point `loom.planes: insights`).

On start it begins the analysis boundary's boot write and probe loop in the background (on a
ClickHouse server); on the embedded store both ops answer ANALYSIS_UNAVAILABLE.
"""

from __future__ import annotations

from loom_core.plane import HandlersPlane, HealthCheck
from loom_core.runtime import Runtime

from .handlers import InsightsHandlers
from .service.analysis import Analysis
from .settings import InsightsSettings
from .store.schema import MIGRATIONS


class InsightsPlane(HandlersPlane):
    name = "insights"
    migrations = MIGRATIONS

    def __init__(self, runtime: Runtime) -> None:
        self.analysis = Analysis(runtime.store, runtime.leases, runtime.auth, runtime.settings, runtime.settings.plane(InsightsSettings))
        super().__init__(runtime.catalog, InsightsHandlers(self.analysis))

    async def start(self) -> None:
        await self.analysis.start()

    async def stop(self) -> None:
        await self.analysis.stop()

    async def health(self) -> dict[str, HealthCheck]:
        return self.analysis.health()


def build(runtime: Runtime) -> InsightsPlane:
    return InsightsPlane(runtime)

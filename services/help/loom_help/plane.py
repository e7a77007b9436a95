"""The help plane: `build(runtime)` for the runner (entry point `loom.planes: help`).

It holds no table and reads no bus: its index is built from the docs folder
(LOOM_HELP_DOCS_DIR, else the docs this build ships) on the first help call, and the sections'
embeddings after it (the MiniLM model the decisions plane uses, one copy per process).
"""

from __future__ import annotations

from pathlib import Path

from loom_core.catalog import Catalog
from loom_core.plane import HandlersPlane, HealthCheck
from loom_core.runtime import Runtime

from .handlers import HelpHandlers
from .service.help import HelpService
from .settings import HelpSettings
from .store.pages import shipped_docs_dir


def docs_dir(settings: HelpSettings) -> Path:
    return Path(settings.help_docs_dir) if settings.help_docs_dir else shipped_docs_dir()


class HelpPlane(HandlersPlane):
    name = "help"

    def __init__(self, catalog: Catalog, settings: HelpSettings) -> None:
        self.service = HelpService(docs_dir(settings))
        super().__init__(catalog, HelpHandlers(self.service))

    async def stop(self) -> None:
        self.service.stop()

    async def health(self) -> dict[str, HealthCheck]:
        # Not required: a process without docs serves everything else.
        if not self.service.built:
            return {"help": {"ok": True, "reason": "index not built yet (built on the first help call)", "required": False}}
        index = await self.service.index()
        if index is None:
            return {"help": {"ok": False, "reason": "no docs: help answers available: false", "required": False}}
        return {"help": {"ok": True, "required": False}}


def build(runtime: Runtime) -> HelpPlane:
    return HelpPlane(runtime.catalog, runtime.settings.plane(HelpSettings))

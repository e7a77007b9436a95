"""The decisions plane: `build(runtime)` for the runner (entry point `loom.planes: decisions`).

It serves decision.* (DecisionService) and the memory.* ops their rows need (MemoryService),
both in package loom.decisions.v1. Embeddings come from the local ONNX model or an
OpenAI-compatible endpoint (LOOM_EMBEDDING_PROVIDER). The local model loads at start, in a worker
thread, and start returns once it has: the process answers ready only with the model loaded, so
the first decision.record after a start costs what the tenth does. A model file that is not the
pinned one stops the start (loom_core.embedding.ModelFileError).
"""

from __future__ import annotations

from collections.abc import Sequence

from loom_core.plane import bind_handlers
from loom_core.runtime import Handler, Runtime
from loom_core.store import Migration

from .handlers import DecisionHandlers
from .service.embedding import Embedder, build_embedder
from .service.rows import Deps, Rows
from .settings import DecisionsSettings
from .store.schema import migrations


class DecisionsPlane:
    name = "decisions"

    def __init__(self, runtime: Runtime) -> None:
        s = runtime.settings.plane(DecisionsSettings)
        self.migrations: Sequence[Migration] = migrations(s.embedding_dimensions)
        self.catalog = runtime.catalog
        self.embedder: Embedder = build_embedder(s)
        self.rows = Rows(Deps(settings=s, store=runtime.store, leases=runtime.leases, exposures=runtime, embedder=self.embedder))
        self.ops = DecisionHandlers(self.rows)

    def handlers(self) -> dict[str, Handler]:
        return bind_handlers(self.catalog, self.name, self.ops)

    async def start(self) -> None:
        await self.rows.vectors.start()
        await self.embedder.load()

    async def stop(self) -> None:
        await self.rows.vectors.stop()
        await self.embedder.close()


def build(runtime: Runtime) -> DecisionsPlane:
    return DecisionsPlane(runtime)

"""The decisions plane: `build(runtime)` for the runner (entry point `loom.planes: decisions`).

It serves decision.* (DecisionService), the memory.* ops their rows need (MemoryService) and
search.unified (SearchService, MCP loom_search), code.repos and code.symbol (CodeService, the code
index `loom code index` fills), all in package loom.decisions.v1. Embeddings come from the local ONNX model or an
OpenAI-compatible endpoint (LOOM_EMBEDDING_PROVIDER). The local model loads at start, in a worker
thread, and start returns once it has: the process answers ready only with the model loaded, so
the first decision.record after a start costs what the tenth does. A model file that is not the
pinned one stops the start (loom_core.embedding.ModelFileError).

`admin_routes` are the operator's: served on the data dir's admin socket by `loom up` (whoever
can open the data dir is the operator), called by `loom decisions extract` (cli.py).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from loom_core.chain import CallContext
from loom_core.chain.ledger import ledger_row
from loom_core.errors import LoomError
from loom_core.identity.tokens import Principal, new_token_id
from loom_core.op_caller import HttpOpCaller, OpCaller
from loom_core.plane import bind_handlers
from loom_core.roles import Role
from loom_core.runtime import Handler, Runtime
from loom_core.store import Migration
from loom_core.store.caller import caller_values

from .domain.decision_extract import EXTRACTOR_ACTOR, EXTRACTOR_AGENT, EXTRACTOR_SESSION, EXTRACTOR_USER
from .handlers import DecisionHandlers
from .service.code_index import CodeIndex
from .service.decisions import DecisionOps
from .service.embedding import Embedder, build_embedder
from .service.extract import Extractor, Report
from .service.extract_repo import place
from .service.llm import ChatModel
from .service.memory import MemoryOps
from .service.rows import Deps, Rows
from .service.unified_search import UnifiedSearch
from .settings import DecisionsSettings
from .store.schema import migrations


class DecisionsPlane:
    name = "decisions"

    def __init__(self, runtime: Runtime) -> None:
        s = runtime.settings.plane(DecisionsSettings)
        self.runtime = runtime
        self.migrations: Sequence[Migration] = migrations()
        self.catalog = runtime.catalog
        self.embedder: Embedder = build_embedder(s)
        self.rows = Rows(Deps(settings=s, store=runtime.store, leases=runtime.leases, exposures=runtime, embedder=self.embedder))
        self._http_ops = HttpOpCaller(s.search_loom_url) if s.search_loom_url else None
        self.search = UnifiedSearch(self.embedder, self._http_ops)
        self.code = CodeIndex(runtime.store, runtime.identity)
        self.ops = DecisionHandlers(self.rows, self.search, self.code, runtime.auth)
        self.admin_routes: dict[str, Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]] = {
            "/decisions/extract": self._extract_route,
            "/code/index": self.index_code,
        }

    def handlers(self) -> dict[str, Handler]:
        return bind_handlers(self.catalog, self.name, self.ops)

    async def start(self) -> None:
        await self.rows.vectors.start()
        await self.embedder.load()

    async def stop(self) -> None:
        await self.rows.vectors.stop()
        await self.rows.live_published()
        await self.rows.exposures.flush()
        await self.embedder.close()
        if self._http_ops is not None:
            await self._http_ops.close()

    def attach_op_caller(self, ops: OpCaller) -> None:
        """The runner's route to the ops search.unified composes (its replica's relay), unless
        LOOM_SEARCH_LOOM_URL names a gateway."""
        if self._http_ops is None:
            self.search.attach(ops)

    # --- the operator's extraction

    def operator_context(self, org: str, namespace: str) -> CallContext:
        """The extractor's identity: agent loom-decisions, user and session -, actor process:cli:decisions."""
        op = self.catalog.get("decision.record")
        assert op is not None
        now = int(time.time())
        p = Principal(jti=new_token_id("cli-"), sub=EXTRACTOR_ACTOR, org=org, roles={"*": "admin"}, iat=now, exp=now + 3600)
        return CallContext(
            op=op,
            principal=p,
            namespace=namespace,
            role=Role.ADMIN,
            agent=EXTRACTOR_AGENT,
            user=EXTRACTOR_USER,
            session=EXTRACTOR_SESSION,
            transport="cli",
        )

    def _audit(self, ctx: CallContext, op: str, args: dict[str, str], error_code: str) -> None:
        """The audit row the transport writes for a write the run makes (decision.record, memory.delete_version)."""
        self.runtime.ledger.record(
            ledger_row(
                org=ctx.org,
                namespace=ctx.namespace,
                **caller_values(ctx),
                op=op,
                transport="cli",
                run_id="",
                consumer="",
                ok=not error_code,
                error_code=error_code,
                latency_ms=0.0,
                args={k: v for k, v in args.items() if k in ("memory_key", "version", "category", "stage", "source_resource_id")},
                out_hits=0,
                token_id=ctx.principal.jti,
                request_id=ctx.request_id,
                write_shaped=True,
            )
        )

    async def extract(
        self,
        org: str,
        namespace: str,
        source_uri: str,
        *,
        document: str | None,
        apply: bool,
        model: ChatModel,
        window_chars: int = 0,
        max_per_section: int = 3,
        repo: str = "",
        into: str | None = None,
    ) -> Report:
        if await self.runtime.identity.get_namespace(org, namespace) is None:
            return Report().stop(f"no namespace {namespace} in org {org}: nothing written")
        placement = await place(self.code, org, namespace, repo, into)
        if isinstance(placement, str):
            return Report().stop(placement)
        ctx = self.operator_context(org, placement.target_ns)
        extractor = Extractor(self.rows, DecisionOps(self.rows), MemoryOps(self.rows), model, self._audit, self.code)
        return await extractor.run(
            ctx,
            source_uri=source_uri,
            document=document,
            apply=apply,
            window_chars=window_chars,
            max_per_section=max_per_section,
            placement=placement,
        )

    async def _extract_route(self, body: dict[str, Any]) -> dict[str, Any]:
        llm = body["llm"]
        model = ChatModel(str(llm["url"]), str(llm["model"]), str(llm.get("api_key", "")), float(llm["timeout"]), dict(llm["caps"]))
        rep = await self.extract(
            str(body["org"]),
            str(body["namespace"]),
            str(body["source_uri"]),
            document=body.get("document"),
            apply=bool(body.get("apply")),
            model=model,
            window_chars=int(body.get("window_chars") or 0),
            max_per_section=int(body.get("max_per_section") or 3),
            repo=str(body.get("repo") or ""),
            into=body.get("into") or None,
        )
        return {"lines": rep.lines, "exit_code": rep.exit_code}

    # --- the operator's code index

    async def index_code(self, body: dict[str, Any]) -> dict[str, Any]:
        """`loom code index`: replace a code namespace's file set with the symbols the command read."""
        try:
            repo, ns, n = await self.code.index(
                str(body["org"]),
                str(body["repo"]),
                namespace=str(body.get("namespace") or ""),
                branch=str(body.get("branch") or ""),
                remotes=[str(r) for r in body.get("remotes") or []],
                commit=str(body.get("commit") or ""),
                files=list(body["files"]),
            )
        except LoomError as exc:
            return {"error": f"{exc.code}: {exc.message}"}
        return {"repo_id": repo["repo_id"], "namespace": ns, "symbols": n, "files": len(body["files"]), "remotes": repo["remotes"]}


def build(runtime: Runtime) -> DecisionsPlane:
    return DecisionsPlane(runtime)

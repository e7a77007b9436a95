"""Handlers of the code.* ops (proto/loom_api/decisions/v1/code.proto), mixed into the plane's
handlers: code.repos reads each repository's trunk as the caller (the repositories it may read),
code.symbol answers in the call's namespace, which the chain has checked the caller may read."""

from __future__ import annotations

from loom_api.decisions.v1 import code_pb2 as cpb
from loom_core.chain import CallContext
from loom_core.identity import Authenticator
from loom_core.roles import Role

from .service.code_index import CodeIndex


class CodeHandlers:
    _code: CodeIndex
    _auth: Authenticator

    async def code_repos(self, req: cpb.CodeReposRequest, ctx: CallContext) -> cpb.CodeReposResponse:
        repos = await (self._code.matching_remote(ctx.org, req.remote) if req.remote else self._code.repos(ctx.org))
        readable = [r for r in repos if await self._auth.role_in(ctx.principal, r["trunk_namespace"]) >= Role.VIEWER]
        ctx.out_hits = len(readable)
        return cpb.CodeReposResponse(repositories=[cpb.Repository(**r) for r in readable])

    async def code_symbol(self, req: cpb.CodeSymbolRequest, ctx: CallContext) -> cpb.CodeSymbolResponse:
        ans = await self._code.symbol(ctx.org, ctx.namespace, req.name)
        ctx.out_hits = len(ans.symbols)
        return cpb.CodeSymbolResponse(
            symbols=[
                cpb.CodeSymbolDefinition(
                    path=s["path"], line=s["line"], kind=s["kind"], name=s["name"], qualname=s["qualname"], test=s["test"], page=s["page"]
                )
                for s in ans.symbols
            ],
            files=ans.files,
            only_tests_or_pages=ans.only_tests_or_pages,
        )

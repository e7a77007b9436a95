"""The insights plane's handlers: proto in, proto out; the service does the work."""

from __future__ import annotations

from google.protobuf import struct_pb2
from loom_api.insights.v1 import insights_pb2 as pb
from loom_core.chain import CallContext

from .service.analysis import Analysis, statement_ledger


class InsightsHandlers:
    def __init__(self, analysis: Analysis) -> None:
        self._analysis = analysis

    async def query(self, req: pb.QueryRequest, ctx: CallContext) -> pb.QueryResponse:
        # The digest and length go on the ledger row whatever the answer (the sql argument
        # itself is a text key: the ledger keeps only its digest).
        ctx.ledger_extra = statement_ledger(req.sql)
        namespaces = await self._analysis.check_namespaces(ctx.principal, ctx.namespace, list(req.namespaces))
        ans = await self._analysis.query(ctx.principal, ctx.request_id, req.sql, namespaces)
        ctx.out_hits = ans.row_count
        ctx.ledger_extra = {**ctx.ledger_extra, **ans.ledger}
        out = pb.QueryResponse(row_count=ans.row_count, truncated=ans.truncated, elapsed_ms=ans.elapsed_ms, sql_digest=ans.sql_digest)
        out.columns.extend(pb.Column(name=c["name"], type=c["type"]) for c in ans.columns)
        for row in ans.rows:
            lv = struct_pb2.ListValue()
            lv.extend(row)
            out.rows.append(lv)
        return out

    async def catalog(self, req: pb.CatalogRequest, ctx: CallContext) -> pb.CatalogResponse:
        return self._analysis.catalog()

"""Handlers for help.*: proto in, proto out. The rules live in domain/, the index in service/."""

from __future__ import annotations

from loom_api.help.v1 import help_pb2 as pb
from loom_core.catalog import message_from
from loom_core.chain import CallContext
from loom_core.errors import ErrorCode, NotFound, count_or_default, invalid_field

from .domain.sections import OPERATOR, USER
from .service.help import HelpService, read

DEFAULT_LIMIT = 8
MAX_LIMIT = 25
MAX_QUERY_CHARS = 2_000
MAX_CITATIONS = 100


class HelpHandlers:
    def __init__(self, service: HelpService) -> None:
        self.service = service

    async def search(self, request: pb.SearchRequest, ctx: CallContext) -> pb.SearchResponse:
        query = request.query.strip()
        if not query:
            raise invalid_field("query", "required")
        if len(query) > MAX_QUERY_CHARS:
            raise invalid_field("query", f"at most {MAX_QUERY_CHARS} characters")
        limit = count_or_default("limit", request.limit, DEFAULT_LIMIT, MAX_LIMIT)
        if request.audience not in ("", USER, OPERATOR):
            raise invalid_field("audience", f"{USER} or {OPERATOR}")
        found = await self.service.search(query, limit, request.audience)
        hits = [
            message_from(pb.Hit, h.section, title=h.title, audience=h.audience, snippet=h.snippet, score=h.score, citation=h.citation)
            for h in found.hits
        ]
        return message_from(pb.SearchResponse, found, hits=hits)

    async def get(self, request: pb.GetRequest, ctx: CallContext) -> pb.GetResponse:
        if not request.page:
            raise invalid_field("page", "required")
        if request.offset < 0:
            raise invalid_field("offset", "at least 0")
        if await self.service.index() is None:
            raise NotFound(ErrorCode.RESOURCE_NOT_FOUND, "help is unavailable: this process has no docs", {"reason": "help_unavailable"})
        page = await self.service.page(request.page)
        if page is None:
            raise NotFound(ErrorCode.RESOURCE_NOT_FOUND, f"no help page {request.page!r}", {"page": request.page, "reason": "page"})
        section = None
        if request.anchor:
            section = page.by_anchor(request.anchor)
            if section is None:
                raise NotFound(
                    ErrorCode.RESOURCE_NOT_FOUND,
                    f"page {request.page!r} has no section {request.anchor!r}",
                    {"page": request.page, "anchor": request.anchor, "reason": "anchor"},
                )
        got = read(page, section, request.offset)
        out = pb.GetResponse(page=page.path, title=page.title, text=got.text)
        if section is None or got.next_offset is not None:
            out.outline.extend(pb.OutlineEntry(breadcrumb=list(s.breadcrumb), anchor=s.anchor, level=s.level) for s in page.sections)
        if got.next_offset is not None:
            out.next_offset = got.next_offset
        return out

    async def verify(self, request: pb.VerifyRequest, ctx: CallContext) -> pb.VerifyResponse:
        if len(request.citations) > MAX_CITATIONS:
            raise invalid_field("citations", f"at most {MAX_CITATIONS}")
        results = await self.service.verify(list(request.citations))
        return pb.VerifyResponse(
            results=[pb.Verification(ref=v.ref, verified=v.verified, anchor=v.anchor, reason=v.reason) for v in results]
        )

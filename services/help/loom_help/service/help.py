"""The help index of this process: built on the first help call, in a worker thread, once.

Concurrent first calls wait on the same build. A folder with no readable page leaves help
unavailable (`available: false`) until the process restarts: the docs change only with the
build, so nothing is rebuilt per call.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path

from ..domain.citations import Verification, verify
from ..domain.index import HelpIndex, Hit
from ..domain.reading import Cut, cut
from ..domain.sections import Page, Section, split_page
from ..store.pages import PageTexts, read_pages

log = logging.getLogger(__name__)

PageReader = Callable[[Path], PageTexts]


def build_index(texts: PageTexts) -> HelpIndex:
    return HelpIndex([split_page(path, text) for path, text in texts.pages])


class HelpService:
    def __init__(self, docs_dir: Path, reader: PageReader = read_pages) -> None:
        self.docs_dir = docs_dir
        self._reader = reader
        self._build: asyncio.Task[HelpIndex | None] | None = None
        self.builds = 0

    def _build_sync(self) -> HelpIndex | None:
        self.builds += 1
        started = time.perf_counter()
        index = build_index(self._reader(self.docs_dir))
        if not index.available:
            return None
        log.info(
            "help: indexed %d pages, %d sections in %.0f ms", len(index.pages), len(index.sections), (time.perf_counter() - started) * 1e3
        )
        return index

    async def _run_build(self) -> HelpIndex | None:
        try:
            return await asyncio.to_thread(self._build_sync)
        except Exception:
            log.exception("help: the index could not be built; help answers available: false until restart")
            return None

    async def index(self) -> HelpIndex | None:
        """The index, building it on the first call; None when this process has no docs."""
        if self._build is None:
            self._build = asyncio.ensure_future(self._run_build())
        # A caller that gives up waiting must not cancel the build the others wait on.
        return await asyncio.shield(self._build)

    @property
    def built(self) -> bool:
        return self._build is not None and self._build.done()

    async def search(self, query: str, limit: int, audience: str) -> tuple[bool, list[Hit]]:
        index = await self.index()
        if index is None:
            return False, []
        return True, index.search(query, limit, audience)

    async def page(self, path: str) -> Page | None:
        index = await self.index()
        return None if index is None else index.pages.get(path)

    async def verify(self, refs: list[str]) -> list[Verification]:
        index = await self.index()
        pages = None if index is None else index.pages
        return [verify(pages, ref) for ref in refs]


def read(page: Page, section: Section | None, offset: int) -> Cut:
    return cut(page.section_text(section) if section is not None else page.text, offset)

"""The help index of this process: built on the first help call, in a worker thread, once.

Concurrent first calls wait on the same build. A folder with no readable page leaves help
unavailable (`available: false`) until the process restarts: the docs change only with the
build, so nothing is rebuilt per call.

The BM25 index serves as soon as it is built; each section's MiniLM embedding is then taken from
the table this build ships (store/section_vectors.py) or, for a passage it lacks, computed once
in a daemon thread (a stopping process does not wait for it), and from then on searches
are hybrid (domain/hybrid.py). A search
embeds its query only (a small cache keeps repeated queries' vectors). A search answered before
the embeddings are ready says so (`ranking: "bm25"`).
"""

from __future__ import annotations

import asyncio
import atexit
import hashlib
import logging
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from loom_core.embedding import MODEL_ID, LocalModel, shared_local_model

from ..domain import hybrid
from ..domain.citations import Verification, verify
from ..domain.index import HelpIndex, Hit
from ..domain.reading import Cut, cut
from ..domain.sections import Page, Section, split_page
from ..store import section_vectors
from ..store.pages import PageTexts, read_pages

log = logging.getLogger(__name__)

PageReader = Callable[[Path], PageTexts]


QUERY_CACHE = 512
EMBED_CHUNK = 16
HYBRID = "hybrid"
BM25 = "bm25"


def build_index(texts: PageTexts) -> HelpIndex:
    return HelpIndex([split_page(path, text) for path, text in texts.pages])


@dataclass(frozen=True, slots=True)
class Found:
    available: bool
    hits: list[Hit]
    weak: bool
    ranking: str


class HelpService:
    def __init__(self, docs_dir: Path, reader: PageReader = read_pages, model: LocalModel | None = None) -> None:
        self.docs_dir = docs_dir
        self._reader = reader
        self._model = model or shared_local_model()
        self._build: asyncio.Task[HelpIndex | None] | None = None
        self._embedding: asyncio.Task[None] | None = None
        self.vectors: np.ndarray | None = None
        self._queries: OrderedDict[str, np.ndarray] = OrderedDict()
        self._stopped = threading.Event()
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
            # a broken index build leaves help unavailable, never the plane down
            log.exception("help: the index could not be built; help answers available: false until restart")
            return None

    async def index(self) -> HelpIndex | None:
        """The index, building it on the first call; None when this process has no docs."""
        if self._build is None:
            self._build = asyncio.ensure_future(self._run_build())
        # A caller that gives up waiting must not cancel the build the others wait on.
        index = await asyncio.shield(self._build)
        if index is not None and self._embedding is None:
            self._embedding = asyncio.ensure_future(self._embed_sections(index))
        return index

    async def _embed_sections(self, index: HelpIndex) -> None:
        started = time.perf_counter()
        passages = [hybrid.passage(index, s) for s in index.sections]
        digest = hashlib.sha256("\x00".join(passages).encode()).hexdigest()
        vectors = _section_vectors.get(digest)
        if vectors is None:
            done: asyncio.Future[np.ndarray] = asyncio.get_running_loop().create_future()
            worker = threading.Thread(target=self._encode_sections, args=(digest, passages, done), name="help-embeddings", daemon=True)
            _workers.add(worker)
            worker.start()
            try:
                vectors = await done
            except Exception:
                # the model failing in its thread degrades help.search to BM25
                log.exception("help: the section embeddings could not be computed; help.search ranks by BM25 alone")
                return
            _section_vectors[digest] = vectors
        self.vectors = vectors
        log.info("help: embedded %d sections in %.0f ms", len(passages), (time.perf_counter() - started) * 1e3)

    def _encode_sections(self, digest: str, passages: list[str], done: asyncio.Future[np.ndarray]) -> None:
        """In a daemon thread, in chunks, only the passages the shipped table lacks
        (store/section_vectors.py): a process that stops meanwhile neither waits for the
        rest nor keeps computing it (`stop`). One thread per digest embeds at a time, adding to the
        process's chunks of that digest: an index of the same docs built meanwhile waits and
        finds them, and one built after this one stopped (a test's instance, a replaced
        replica) embeds only what is left."""
        loop = done.get_loop()
        try:
            with _embedding_locks.setdefault(digest, threading.Lock()):
                shipped = section_vectors.load(MODEL_ID)
                keys = [section_vectors.passage_key(p) for p in passages]
                missing = [p for p, k in zip(passages, keys, strict=True) if k not in shipped]
                parts = _section_chunks.setdefault(digest, [])
                for at in range(len(parts) * EMBED_CHUNK, len(missing), EMBED_CHUNK):
                    if self._stopped.is_set() or _exiting.is_set() or loop.is_closed():
                        return
                    parts.append(self._model.encode(missing[at : at + EMBED_CHUNK]))
                computed = iter(np.concatenate(parts)) if parts else iter(())
                rows = [shipped[k] if k in shipped else next(computed) for k in keys]
                result = np.stack(rows) if rows else np.zeros((0, self._model.dimensions), np.float32)
        except Exception as exc:  # noqa: BLE001 - handed to the waiting coroutine, which logs it
            _settle(loop, done, exc)
            return
        _settle(loop, done, result)

    def stop(self) -> None:
        self._stopped.set()

    async def hybrid_ready(self) -> bool:
        """Wait for the index and its section embeddings (tests and benches; search never waits)."""
        if await self.index() is None or self._embedding is None:
            return False
        await asyncio.shield(self._embedding)
        return self.vectors is not None

    async def query_vector(self, query: str) -> np.ndarray:
        cached = self._queries.get(query)
        if cached is not None:
            self._queries.move_to_end(query)
            return cached
        vec: np.ndarray = (await asyncio.to_thread(self._model.encode, [query]))[0]
        self._queries[query] = vec
        if len(self._queries) > QUERY_CACHE:
            self._queries.popitem(last=False)
        return vec

    @property
    def built(self) -> bool:
        return self._build is not None and self._build.done()

    async def search(self, query: str, limit: int, audience: str) -> Found:
        index = await self.index()
        if index is None:
            return Found(False, [], True, BM25)
        vectors = self.vectors
        if vectors is None:
            hits = index.search(query, limit, audience)
            return Found(True, hits, not hits, BM25)
        r = hybrid.rank(index, vectors, await self.query_vector(query), query, limit, audience)
        return Found(True, index.hits(query, [(round(score, 4), doc) for score, doc in r.ranked]), r.weak, HYBRID)

    async def page(self, path: str) -> Page | None:
        index = await self.index()
        return None if index is None else index.pages.get(path)

    async def verify(self, refs: list[str]) -> list[Verification]:
        index = await self.index()
        pages = None if index is None else index.pages
        return [verify(pages, ref) for ref in refs]


_workers: weakref.WeakSet[threading.Thread] = weakref.WeakSet()
_exiting = threading.Event()


@atexit.register
def _finish_workers() -> None:
    """At exit, let a running embedding thread end its chunk and stop: onnxruntime aborts the
    process when the interpreter tears down under a running session."""
    _exiting.set()
    for worker in list(_workers):
        worker.join(timeout=30)


# Section vectors by the digest of the passages embedded: another index of the same docs in this
# process (a second replica, a test) reuses them rather than embedding them again; while they
# are computed, the chunks embedded so far (kept when the index that computed them stops) and
# the lock that lets one thread at a time add to them.
_section_vectors: dict[str, np.ndarray] = {}
_section_chunks: dict[str, list[np.ndarray]] = {}
_embedding_locks: dict[str, threading.Lock] = {}


def _settle(loop: asyncio.AbstractEventLoop, done: asyncio.Future[np.ndarray], outcome: np.ndarray | BaseException) -> None:
    def put() -> None:
        if done.done():
            return
        if isinstance(outcome, BaseException):
            done.set_exception(outcome)
        else:
            done.set_result(outcome)

    try:
        loop.call_soon_threadsafe(put)
    except RuntimeError:  # the loop closed meanwhile: nobody waits
        pass


def read(page: Page, section: Section | None, offset: int) -> Cut:
    return cut(page.section_text(section) if section is not None else page.text, offset)

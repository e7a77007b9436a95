"""Fairness and retries of insights.query's statements (service/statements.py), against a TCP
listener that accepts the analyst's connections and answers nothing until released, then drops
every connection: ClickHouse giving no answer, which no replica may take for a pass."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from loom_core.errors import ErrorCode, RateLimited, Unavailable
from loom_insights.domain.entities import Caps
from loom_insights.service.statements import StatementRunner
from loom_insights.store.clickhouse import ChClient

KEY = bytes(32)


class Silent:
    """Accepts connections; holds each one silent until released, then closes it."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.connections = 0
        self.server: asyncio.Server | None = None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        await self.release.wait()
        writer.close()

    async def __aenter__(self) -> Silent:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release.set()
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    @property
    def url(self) -> str:
        assert self.server is not None
        port = self.server.sockets[0].getsockname()[1]
        return f"clickhouse://loom_analyst:pw@127.0.0.1:{port}/loom"


@pytest.fixture
async def silent() -> AsyncIterator[Silent]:
    async with Silent() as s:
        yield s


async def _until(cond: object, within: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not cond():  # type: ignore[operator]
        assert loop.time() < deadline, "condition never held"
        await asyncio.sleep(0.01)


async def test_one_statement_past_the_per_org_limit_is_refused_naming_the_cap(silent: Silent) -> None:
    runner = StatementRunner(Caps(), row_cap=100, per_org=2)
    analyst = ChClient(silent.url, max_size=8)
    try:
        a1 = asyncio.create_task(runner.run(analyst, "SQL_", KEY, "org-a", ("n",), "r1", "SELECT 1"))
        a2 = asyncio.create_task(runner.run(analyst, "SQL_", KEY, "org-a", ("n",), "r2", "SELECT 1"))
        await _until(lambda: runner.in_flight("org-a") == 2)
        with pytest.raises(RateLimited) as refused:
            await runner.run(analyst, "SQL_", KEY, "org-a", ("n",), "r3", "SELECT 1")
        assert refused.value.detail == {"cap": "ch_analysis_org_concurrency", "limit": 2, "retry_after_s": 1}
        # another org is not held back by the first one's statements
        b1 = asyncio.create_task(runner.run(analyst, "SQL_", KEY, "org-b", ("n",), "r4", "SELECT 1"))
        await _until(lambda: runner.in_flight("org-b") == 1)
        silent.release.set()
        results = await asyncio.gather(a1, a2, b1, return_exceptions=True)
    finally:
        await analyst.close()
    # no answer at all, on every attempt: OVERLOADED, which clients resend after 5 s
    for r in results:
        assert isinstance(r, Unavailable) and r.code == ErrorCode.OVERLOADED, r
        assert r.detail == {"reason": "ClickHouse did not answer the statement", "retry_after_s": 5}
    assert runner.in_flight("org-a") == 0 and runner.in_flight("org-b") == 0
    # each statement was sent three times (the retries of the same query id)
    assert silent.connections == 9


async def test_the_reserved_scope_and_an_empty_statement_are_refused_before_clickhouse(silent: Silent) -> None:
    runner = StatementRunner(Caps(), row_cap=100, per_org=2)
    analyst = ChClient(silent.url, max_size=1)
    try:
        with pytest.raises(Exception, match="reserved scope"):
            await runner.run(analyst, "SQL_", KEY, "", ("",), "r", "SELECT 1")
        with pytest.raises(Exception, match="sql: required"):
            await runner.run(analyst, "SQL_", KEY, "org", ("n",), "r", "   ")
    finally:
        await analyst.close()
    assert silent.connections == 0

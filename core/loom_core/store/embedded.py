"""chDB engine: ClickHouse in-process under LOOM_DATA_DIR. One engine per process and one
process per data dir (chDB's rule), so this is opened once and shared by every plane."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

import chdb

from .. import fastjson
from .base import StoreError, check_table, check_token

log = logging.getLogger(__name__)

#: The nice value of the engine's threads (LOOM_CHDB_THREAD_NICE): below the event loop's, so
#: on a machine whose cores are all busy the loop runs first and a statement waits (the policy
#: gate's p99 over a block of calls, session 27: +1.6 ms at 0, +1.0 at 10; docs/benchmarks.md).
THREAD_NICE = 10


def _lower_priority(nice: int) -> None:
    """A pool thread's initializer: this thread's nice value (Linux schedules each thread on its
    own, and the engine's worker threads it starts from here inherit it; elsewhere the call
    would lower the whole process, so it is skipped)."""
    if nice and sys.platform == "linux":
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)


_SETTINGS = "output_format_json_quote_64bit_integers=0&date_time_input_format=best_effort"


def _param_text(value: Any) -> str:
    """A parameter value as the escaped text ClickHouse parses server-side parameters from
    (backslash escapes, \\N for NULL, array literals with quoted strings)."""
    if value is None:
        return "\\N"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_array_item(v) for v in value) + "]"
    return _escape(str(value))


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r").replace("\0", "\\0")


def _array_item(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_array_item(v) for v in value) + "]"
    # Inside an array literal a string is a quoted literal with the same backslash escapes.
    return "'" + _escape(str(value)).replace("'", "\\'") + "'"


#: Rows an insert's encoding takes in one event-loop step: about 1 us of the loop's CPU a row, so
#: a ledger flush of 1,500 rows no longer holds the loop 1.8 ms in one step.
ENCODE_SLICE = 256


async def _insert_payload(rows: Sequence[Mapping[str, Any]]) -> tuple[str, bytes]:
    """An insert's format and data. Rows that all name the same columns go as one JSON array
    per column (JSONColumns): ClickHouse parses that for about two thirds of the CPU of the same
    rows as objects (measured: 10.4 against 15.6 us a row at 1,000 ledger rows an insert).
    Rows with differing columns go as objects (JSONEachRow reads an array of rows as well), a
    missing column taking its default. Either way a column the table lacks is skipped. The
    columns are gathered `ENCODE_SLICE` rows a loop step, calls in flight going between; one
    encoder call makes the data."""
    columns = rows[0].keys()
    if len(rows) > 1:
        gathered: dict[str, list[Any]] = {c: [] for c in columns}
        for start in range(0, len(rows), ENCODE_SLICE):
            if start:
                await asyncio.sleep(0)
            part = rows[start : start + ENCODE_SLICE]
            if not all(r.keys() == columns for r in part):
                break
            for c, values in gathered.items():
                values += [r[c] for r in part]
        else:
            return "JSONColumns", fastjson.dumps(gathered)
    return "JSONEachRow", fastjson.dumps(rows if isinstance(rows, list) else list(rows))


class EmbeddedStore:
    engine = "chdb"
    _open: ClassVar[dict[str, EmbeddedStore]] = {}
    #: chDB's engine runs in this process (its threads stay until the process ends: process.py).
    engine_started: ClassVar[bool] = False

    def __init__(self, path: Path, database: str, thread_nice: int = THREAD_NICE) -> None:
        self.path = path
        self.database = database
        path.mkdir(parents=True, exist_ok=True)
        self._url = f"file:{path}?{_SETTINGS}"
        self._conn = chdb.connect(self._url)  # type: ignore[no-untyped-call,unused-ignore]  # chdb and chdb-core both ship chdb/: whose annotations win depends on install order
        EmbeddedStore.engine_started = True
        # chDB releases the GIL while a statement runs; a few threads keep the loop free.
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="chdb", initializer=_lower_priority, initargs=(thread_nice,))
        self._closed = False
        # One connection per pool thread: a chDB connection's bound query parameters are not
        # safe across threads (concurrent statements on one connection failed with "Substitution
        # not set" and, worse, ran with another statement's parameters).
        self._local = threading.local()
        self._thread_conns: list[Any] = []
        self._conns_lock = threading.Lock()

    @classmethod
    def open(cls, path: Path, database: str, thread_nice: int = THREAD_NICE) -> EmbeddedStore:
        key = str(path.resolve())
        existing = cls._open.get(key)
        if existing is not None and not existing._closed:
            return existing
        if cls._open and key not in cls._open:
            raise StoreError("chDB already holds another data dir in this process")
        store = cls(path, database, thread_nice)
        cls._open[key] = store
        return store

    def _sql(self, sql: str) -> str:
        return sql.replace("{db}", self.database)

    def _thread_conn(self) -> Any:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = chdb.connect(self._url)  # type: ignore[no-untyped-call,unused-ignore]  # chdb and chdb-core both ship chdb/: whose annotations win depends on install order
            with self._conns_lock:
                self._thread_conns.append(conn)
        return conn

    def _run(self, sql: str | bytes, params: Mapping[str, Any] | None, fmt: str) -> str:
        try:
            bound = {k: _param_text(v) for k, v in params.items()} if params else None
            result = self._thread_conn().query(sql, fmt, params=bound)
        except Exception as exc:
            # the chDB adapter boundary: chDB raises plain exceptions; their text stays in the debug log
            log.warning("chdb statement failed: %s", type(exc).__name__)
            log.debug("chdb error: %s", exc)
            raise StoreError() from exc
        return result.bytes().decode() if result is not None else ""

    async def _call(self, sql: str, params: Mapping[str, Any] | None, fmt: str) -> str:
        if self._closed:
            raise StoreError("the store is closed")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, self._run, self._sql(sql), params, fmt)

    async def execute(self, sql: str, params: Mapping[str, Any] | None = None) -> None:
        await self._call(sql, params, "CSV")

    async def query(self, sql: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        text = await self._call(sql, params, "JSONEachRow")
        # One row a "\n" (JSON escapes it in strings); not splitlines(), which also breaks at the
        # U+0085 ClickHouse writes raw inside a string.
        return [fastjson.loads(line) for line in text.split("\n") if line]

    async def insert(self, table: str, rows: Sequence[Mapping[str, Any]], *, dedup_token: str | None = None) -> None:
        if not rows:
            return
        await self._insert(table, *await _insert_payload(rows), dedup_token)

    async def insert_json_lines(self, table: str, data: bytes | Sequence[bytes], *, dedup_token: str | None = None) -> None:
        if data:
            await self._insert(table, "JSONEachRow", data, dedup_token)

    async def _insert(self, table: str, fmt: str, body: bytes | Sequence[bytes], dedup_token: str | None) -> None:
        settings = f" SETTINGS insert_deduplication_token='{check_token(dedup_token)}'" if dedup_token else ""
        if self._closed:
            raise StoreError("the store is closed")
        # Row data travels in the format's payload, parsed by ClickHouse's JSON reader, never as SQL.
        # As bytes, which chDB takes: the data is copied once, into the statement, not also decoded
        # and copied again (a decision flush's ~2.7 MB cost ~2 ms of page faults a copy here, on the
        # loop); rows given as lines are joined straight into it.
        head = f"INSERT INTO {check_table(self._sql(table))}{settings} FORMAT {fmt}".encode()
        sql = head + b"\n" + body if isinstance(body, bytes) else b"\n".join([head, *body])
        # Not through _call: `{db}` inside row data is data, not the database name.
        await asyncio.get_running_loop().run_in_executor(self._pool, self._run, sql, None, "CSV")

    async def ping(self) -> None:
        await self._call("SELECT 1", None, "CSV")

    async def close(self) -> None:
        # chDB cannot reopen another path in this process; keep the engine, just stop using it.
        self._pool.shutdown(wait=True)
        self._closed = True
        for conn in [*self._thread_conns, self._conn]:
            with contextlib.suppress(Exception):  # closing is best effort
                conn.close()
        self._open.pop(str(self.path.resolve()), None)

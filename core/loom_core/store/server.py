"""ClickHouse server engine: a server or cluster over the native protocol via `asynch` 0.4, with a
connection pool. Same contract as the chDB engine (`embedded.py`): `{db}` is the configured
database, values are bound, results come back as the chDB engine's JSONEachRow would give them,
and any failure is a `StoreError` with no driver text.

Parameter binding: client-side, in `binding.py` (`bind_params`, `render_literal`): see there
why and how.

Results: asynch decodes the native blocks into Python objects; `_normaliser` turns each column
back into what the chDB engine's JSONEachRow parsing returns (DateTime64(p) and DateTime as
'YYYY-MM-DD HH:MM:SS[.fff…]' text in the column's time zone, Date as 'YYYY-MM-DD', 64-bit and
wider integers as int, integral floats and decimals below 1e21 as int, NaN/inf as None, Float32
at its shortest text, UUID and IP addresses as text, named tuples as dicts and other tuples as
lists, map keys as text). asynch keeps microseconds, so DateTime64 with more than 6 digits
comes back with the digits past the sixth as zeros.

Inserts: the rows travel as JSONEachRow data after `FORMAT`, as in the chDB engine, parsed by
ClickHouse's JSON reader, never as SQL. Over the native protocol the server parses such inline
data itself for clients of revision 54415 or later (asynch is 54453): the INSERT runs as a
completed pipeline and no Native blocks are exchanged, so the chDB engine's row semantics
(omitted fields take their DEFAULT, objects into String columns as JSON text, …) carry over
unchanged (and, being insert data, it does not count against `max_query_size`).
`date_time_input_format=best_effort` is set on every connection as the chDB engine sets it.
The deduplication token is sent as the query-level setting `insert_deduplication_token`, with
`async_insert=0` so the token deduplicates whatever the server's async-insert default is.

asynch logs every statement's full text at DEBUG (logger `asynch.proto.connection`), which with
client-side binding includes parameter values and insert rows: keep that logger above DEBUG.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import ipaddress
import json
import logging
import math
import re
import struct
import uuid
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import Any

from asynch import Pool
from asynch.proto.utils.dsn import parse_dsn

from .base import StoreError, check_table, check_token
from .binding import _DECIMALS, _FLOATS, _INT_BITS, _BindError, _parse_type, _tuple_element, _unwrap, bind_params

log = logging.getLogger(__name__)

POOL_MIN_SIZE = 1
POOL_MAX_SIZE = 8
# Settings every connection carries, as the chDB engine's connection string does. A setting
# named in the URL's query string wins.
_CONNECTION_SETTINGS = {"date_time_input_format": "best_effort"}

_DB_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# --------------------------------------------------------------------------- results


def _json_number(x: float) -> Any:
    """A float as json.loads reads ClickHouse's JSON text of it."""
    if not math.isfinite(x):
        return None  # ClickHouse writes nan and inf as null in JSON
    if x.is_integer() and abs(x) < 1e21:
        return int(x)  # written without a point or exponent
    return x


def _float32(x: float) -> Any:
    if math.isfinite(x):
        for digits in range(1, 10):
            short = float(f"{x:.{digits}g}")
            if struct.unpack("f", struct.pack("f", short))[0] == x:
                x = short
                break
    return _json_number(x)


def _decimal(d: decimal.Decimal) -> Any:
    return int(d) if d == d.to_integral_value() else float(d)


def _datetime_text(value: Any, digits: int) -> Any:
    if not isinstance(value, dt.datetime):
        return value
    text = value.strftime("%Y-%m-%d %H:%M:%S")
    if digits > 0:
        micros = f"{value.microsecond:06d}"
        text += "." + (micros[:digits] if digits <= 6 else micros + "0" * (digits - 6))
    return text


def _ip6_text(value: Any) -> str:
    if isinstance(value, ipaddress.IPv6Address) and value.ipv4_mapped is not None:
        return f"::ffff:{value.ipv4_mapped}"
    return str(value)


def _map_key(key: Any) -> str:
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, str):
        return key
    return json.dumps(key) if isinstance(key, float) else str(key)


def _generic(value: Any) -> Any:
    """For types the column spec does not describe (Dynamic, Variant, JSON)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return _json_number(value)
    if isinstance(value, decimal.Decimal):
        return _decimal(value)
    if isinstance(value, dt.datetime):
        return _datetime_text(value, 6 if value.microsecond else 0)
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, ipaddress.IPv6Address):
        return _ip6_text(value)
    if isinstance(value, (uuid.UUID, ipaddress.IPv4Address)):
        return str(value)
    if isinstance(value, Mapping):
        return {_map_key(_generic(k)): _generic(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_generic(v) for v in value]
    return value


def _identity(value: Any) -> Any:
    return value


@lru_cache(maxsize=1024)
def _normaliser(type_text: str) -> Callable[[Any], Any]:
    """A function mapping asynch's value for a column of this type to the chDB engine's."""
    try:
        t = _unwrap(_parse_type(type_text))
    except _BindError:
        return _generic
    n = t.name
    if n == "Nullable":
        inner = _normaliser(t.args[0])
        return lambda v: None if v is None else inner(v)
    if n in _INT_BITS or n in ("String", "FixedString", "Bool", "Enum8", "Enum16") or n.startswith("Interval"):
        return _identity
    if n == "Nothing":
        return lambda v: None
    if n == "DateTime64":
        digits = int(t.args[0]) if t.args else 3
        return lambda v: None if v is None else _datetime_text(v, digits)
    if n == "DateTime":
        return lambda v: None if v is None else _datetime_text(v, 0)
    if n in ("Date", "Date32"):
        return lambda v: None if v is None else v.isoformat()
    if n == "Float32":
        return lambda v: None if v is None else _float32(v)
    if n in _FLOATS:
        return lambda v: None if v is None else _json_number(v)
    if n in _DECIMALS:
        return lambda v: None if v is None else _decimal(v)
    if n == "IPv6":
        return lambda v: None if v is None else _ip6_text(v)
    if n in ("UUID", "IPv4"):
        return lambda v: None if v is None else str(v)
    if n == "Array" and t.args:
        item = _normaliser(t.args[0])
        return lambda v: None if v is None else [item(x) for x in v]
    if n == "Map" and len(t.args) == 2:
        key, val = _normaliser(t.args[0]), _normaliser(t.args[1])
        return lambda v: None if v is None else {_map_key(key(a)): val(b) for a, b in v.items()}
    if n == "Tuple" and t.args:
        try:
            elements = [(en, _normaliser(et.text)) for en, et in map(_tuple_element, t.args)]
        except _BindError:
            return _generic
        if all(en for en, _ in elements):
            return lambda v: None if v is None else {en: f(x) for (en, f), x in zip(elements, v, strict=False)}
        return lambda v: None if v is None else [f(x) for (_, f), x in zip(elements, v, strict=False)]
    return _generic


# --------------------------------------------------------------------------- the store


class ServerStore:
    engine = "clickhouse"

    def __init__(self, pool: Pool, database: str, cluster: str = "") -> None:
        self._pool = pool
        self.database = database
        self.cluster = cluster  # LOOM_CLICKHOUSE_CLUSTER: migrations run ON CLUSTER (store/cluster.py)
        self._closed = False

    @classmethod
    async def open(cls, url: str, database: str, *, cluster: str = "") -> ServerStore:
        if not _DB_NAME.match(database):
            raise ValueError(f"bad database name {database!r}")
        if cluster:
            from .cluster import check_cluster

            check_cluster(cluster)
        try:
            config = parse_dsn(url)
        except Exception:  # noqa: BLE001 - the parser's message quotes the URL, password included
            raise StoreError("the ClickHouse URL is malformed") from None
        settings = {**_CONNECTION_SETTINGS, **config.pop("settings", {})}
        pool = Pool(minsize=POOL_MIN_SIZE, maxsize=POOL_MAX_SIZE, settings=settings, **config)
        try:
            await pool.startup()
        except Exception as exc:
            # the ClickHouse driver boundary (asynch raises its own errors and socket errors)
            log.warning("clickhouse connect failed: %s", type(exc).__name__)
            with contextlib.suppress(Exception):  # cleanup is best effort
                await pool.shutdown()
            raise StoreError() from exc
        return cls(pool, database, cluster)

    def _sql(self, sql: str) -> str:
        return sql.replace("{db}", self.database)

    async def _run(self, sql: str, settings: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        if self._closed:
            raise StoreError("the store is closed")
        try:
            async with self._pool.connection() as conn, conn.cursor() as cursor:
                if settings:
                    cursor.set_settings(dict(settings))  # type: ignore[no-untyped-call]
                await cursor.execute(sql)
                rows = await cursor.fetchall()
                columns = [(c.name, _normaliser(c.type_code)) for c in cursor.description or ()]
            if not columns:
                return []
            return [{name: norm(value) for (name, norm), value in zip(columns, row, strict=False)} for row in rows]
        except Exception as exc:
            # the ClickHouse driver boundary: driver text never reaches a caller
            code = getattr(exc, "code", None)
            log.warning("clickhouse statement failed: %s%s", type(exc).__name__, f" (code {code})" if isinstance(code, int) else "")
            raise StoreError() from exc

    def _bind(self, sql: str, params: Mapping[str, Any] | None) -> str:
        try:
            return bind_params(self._sql(sql), params)
        except Exception as exc:  # noqa: BLE001 - a value that cannot be rendered (wrong type, out of range, not UTF-8)
            log.warning("clickhouse parameter binding failed: %s", exc if isinstance(exc, _BindError) else type(exc).__name__)
            raise StoreError("a query parameter does not fit its declared type") from None

    async def execute(self, sql: str, params: Mapping[str, Any] | None = None) -> None:
        await self._run(self._bind(sql, params))

    async def query(self, sql: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        return await self._run(self._bind(sql, params))

    async def insert(self, table: str, rows: Sequence[Mapping[str, Any]], *, dedup_token: str | None = None) -> None:
        if not rows:
            return
        await self._insert(table, "\n".join(json.dumps(r, default=str, separators=(",", ":")) for r in rows), dedup_token)

    async def insert_json_lines(self, table: str, data: bytes | Sequence[bytes], *, dedup_token: str | None = None) -> None:
        if data:
            await self._insert(table, (data if isinstance(data, bytes) else b"\n".join(data)).decode(), dedup_token)

    async def _insert(self, table: str, body: str, dedup_token: str | None) -> None:
        settings: dict[str, Any] = {}
        if dedup_token:
            settings = {"insert_deduplication_token": check_token(dedup_token), "async_insert": 0}
        # Row data travels in the format's payload, parsed by ClickHouse's JSON reader, never as SQL.
        await self._run(f"INSERT INTO {check_table(self._sql(table))} FORMAT JSONEachRow\n{body}", settings)

    async def ping(self) -> None:
        await self._run("SELECT 1")

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):  # closing is best effort
            await self._pool.shutdown()

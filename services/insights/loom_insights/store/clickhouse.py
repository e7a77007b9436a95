"""ClickHouse connections of the analysis plane, over the native protocol (asynch).

Two kinds: Loom's own user (the admin side: provisioning writes and the reads of system tables
they need) and the `loom_analyst` user (statements and the probe). Both take per-statement
settings and a query id, which Loom's shared Store does not. A failure raises `ChError` with
ClickHouse's code and name (the text is kept for the server log, never for a caller) or
`NoAnswer` when no answer came (a dropped connection, a wait that ran out).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import decimal
import ipaddress
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from asynch import Pool
from asynch.errors import ServerException
from asynch.proto.utils.dsn import parse_dsn

log = logging.getLogger(__name__)
# asynch logs whole statements at DEBUG; a provisioning statement carries the key.
logging.getLogger("asynch").setLevel(logging.INFO)


class ChError(Exception):
    """ClickHouse answered with an error."""

    def __init__(self, code: int | None, name: str, text: str) -> None:
        super().__init__(f"ClickHouse error {code} {name}")
        self.code = code
        self.name = name
        self.text = text


class NoAnswer(Exception):
    """No answer at all: the connection dropped or the client-side wait ran out."""


@dataclass(frozen=True, slots=True)
class Result:
    columns: list[tuple[str, str]]
    rows: list[list[Any]]


def _json_value(v: Any) -> Any:
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) > 2**53:
        return str(v)  # past a JSON number's exact range
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, dt.datetime):
        return v.isoformat(sep=" ")
    if isinstance(v, dt.date):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return float(v)
    if isinstance(v, (uuid.UUID, ipaddress.IPv4Address, ipaddress.IPv6Address)):
        return str(v)
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).decode("utf-8", errors="replace")
    if isinstance(v, Mapping):
        return {str(_json_value(k)): _json_value(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_value(x) for x in v]
    return str(v)


def _error_name(exc: BaseException) -> str:
    text = str(exc)
    # ClickHouse messages end with "(ERROR_NAME)".
    if text.endswith(")") and "(" in text:
        name = text[text.rfind("(") + 1 : -1]
        if name.replace("_", "").isalnum() and name.upper() == name:
            return name
    return type(exc).__name__


class ChClient:
    """A small pool of native connections as one ClickHouse user."""

    def __init__(
        self, url: str, *, user: str | None = None, password: str | None = None, database: str | None = None, max_size: int = 4
    ) -> None:
        config = parse_dsn(url)
        config.pop("settings", None)
        if user is not None:
            config["user"] = user
            config["password"] = password or ""
        if database is not None:
            config["database"] = database
        self._config = config
        self._max = max_size
        self._pool: Pool | None = None
        self._lock = asyncio.Lock()

    @property
    def user(self) -> str:
        return str(self._config.get("user") or "default")

    async def _get_pool(self) -> Pool:
        async with self._lock:
            if self._pool is None:
                pool = Pool(minsize=0, maxsize=self._max, **self._config)
                try:
                    await pool.startup()
                except Exception as exc:  # noqa: BLE001 - translated: the driver's text never leaves
                    raise _translate(exc) from None
                self._pool = pool
            return self._pool

    async def run(self, sql: str, settings: Mapping[str, Any] | None = None, *, query_id: str = "", wait_s: float = 60.0) -> Result:
        pool = await self._get_pool()
        try:
            return await asyncio.wait_for(self._run(pool, sql, settings, query_id), wait_s)
        except TimeoutError:
            raise NoAnswer("no answer within the wait") from None

    async def _run(self, pool: Pool, sql: str, settings: Mapping[str, Any] | None, query_id: str) -> Result:
        try:
            async with pool.connection() as conn, conn.cursor() as cursor:
                # asynch's own stubs (cursors.pyi) leave these two setters unannotated.
                if settings:
                    cursor.set_settings({k: str(v) if not isinstance(v, (int, float)) else v for k, v in settings.items()})  # type: ignore[no-untyped-call]
                if query_id:
                    cursor.set_query_id(query_id)  # type: ignore[no-untyped-call]
                await cursor.execute(sql)
                rows = await cursor.fetchall()
                columns = [(c.name, str(c.type_code)) for c in cursor.description or ()]
        except (ChError, NoAnswer):
            raise
        except Exception as exc:  # noqa: BLE001 - translated: the driver's text never leaves
            raise _translate(exc) from None
        return Result(columns, [[_json_value(v) for v in row] for row in rows or ()])

    async def close(self) -> None:
        async with self._lock:
            if self._pool is not None:
                with contextlib.suppress(Exception):  # closing is best effort
                    await self._pool.shutdown()
                self._pool = None


def _translate(exc: BaseException) -> Exception:
    if isinstance(exc, ServerException):
        code = exc.code if isinstance(exc.code, int) else None
        return ChError(code, _error_name(exc), str(exc))
    log.warning("clickhouse: no answer (%s)", type(exc).__name__)
    return NoAnswer(type(exc).__name__)

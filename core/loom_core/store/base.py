"""The Store seam. SQL uses ClickHouse's own `{name:Type}` parameters in both engines; values
are always bound, never formatted in. `{db}` in a statement is the configured database name
(an identifier from settings, not a value)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar, cast

from ..errors import ErrorCode, Unavailable
from ..settings import Settings

_TOKEN = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$")


class StoreError(Unavailable):
    """The store refused or failed; callers see BACKEND_UNAVAILABLE, never driver text."""

    def __init__(self, message: str = "the store is unavailable") -> None:
        super().__init__(ErrorCode.BACKEND_UNAVAILABLE, message)


class Store(Protocol):
    database: str
    engine: str

    async def execute(self, sql: str, params: Mapping[str, Any] | None = None) -> None: ...

    async def query(self, sql: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]: ...

    async def insert(self, table: str, rows: Sequence[Mapping[str, Any]], *, dedup_token: str | None = None) -> None: ...

    async def insert_json_lines(self, table: str, data: bytes | Sequence[bytes], *, dedup_token: str | None = None) -> None:
        """Rows already encoded, one JSON object a line (JSONEachRow), as one text or as its
        lines: inserted without being decoded and encoded again on the event loop."""
        ...

    async def ping(self) -> None: ...

    async def close(self) -> None: ...


Row = TypeVar("Row")


async def query_as(store: Store, row: type[Row], sql: str, params: Mapping[str, Any] | None = None) -> list[Row]:
    """The query's rows typed as `row` (a TypedDict naming the SELECT's columns): the store
    hands plain dicts; the plane that wrote the SELECT names their shape here, once."""
    return cast(list[Row], await store.query(sql, params))


@dataclass(frozen=True, slots=True)
class Migration:
    """An idempotent statement (CREATE … IF NOT EXISTS, ALTER … ADD COLUMN IF NOT EXISTS).

    `only_if`, a SELECT: the statement runs only when it returns a row, for one that would cost
    something at every start with nothing to do (an `ALTER … DROP INDEX IF EXISTS` is a mutation
    of every part even when the index is gone)."""

    plane: str
    name: str
    sql: str
    only_if: str = ""


async def run_migrations(store: Store, migrations: Sequence[Migration]) -> None:
    # On a replicated cluster (LOOM_CLICKHOUSE_CLUSTER) the DDL runs ON CLUSTER with Replicated engines.
    from .cluster import on_cluster

    cluster = str(getattr(store, "cluster", ""))
    await store.execute(on_cluster("CREATE DATABASE IF NOT EXISTS {db}", cluster))
    for m in migrations:
        if m.only_if and not await store.query(m.only_if):
            continue
        await store.execute(on_cluster(m.sql, cluster))


def ch_time(dt: datetime | None = None) -> str:
    """A UTC instant as ClickHouse DateTime64(6) text."""
    dt = dt or datetime.now(UTC)
    return dt.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


def parse_ch_time(text: str) -> datetime:
    return datetime.strptime(text[:26].ljust(26, "0") if "." in text else text + ".000000", "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=UTC)


def check_table(table: str) -> str:
    if not _IDENT.match(table):
        raise ValueError(f"bad table identifier {table!r}")
    return table


def check_token(token: str) -> str:
    if not _TOKEN.match(token):
        raise ValueError("bad deduplication token")
    return token


async def open_store(settings: Settings) -> Store:
    if settings.clickhouse_url:
        from .server import ServerStore

        store: Store = await ServerStore.open(settings.clickhouse_url, settings.clickhouse_database, cluster=settings.clickhouse_cluster)
    elif settings.clickhouse_cluster:
        raise ValueError("LOOM_CLICKHOUSE_CLUSTER needs LOOM_CLICKHOUSE_URL (the embedded store is one process)")
    else:
        from .embedded import EmbeddedStore

        store = EmbeddedStore.open(settings.data_dir / "chdb", settings.clickhouse_database, settings.chdb_thread_nice)
    return store

"""The analysis plane's two one-row sealed tables: one row (id 1) holding a blob sealed under
LOOM_JWT_SECRET, its version (ReplacingMergeTree(version): the highest wins) and when it was
written. `SECRETS_TABLE` is loom.analysis_secrets (the analysis key and the analyst's password,
written `stored_at`); `ROOT_TABLE` is loom.analysis_root (the root's own record, written
`recorded_at`)."""

from __future__ import annotations

from dataclasses import dataclass

from loom_core.store import Migration, Store

ROW_ID = 1


@dataclass(frozen=True, slots=True)
class SealedRow:
    """The row as read: the sealed blob, its version (a rewrite goes above it) and its write time
    as ClickHouse prints it."""

    sealed: str
    version: int
    written_at: str


@dataclass(frozen=True, slots=True)
class SealedTable:
    """One of the two tables: its name and the column its write time is kept in."""

    name: str
    written_column: str

    def migration(self) -> Migration:
        return Migration(
            "insights",
            self.name,
            f"""
        CREATE TABLE IF NOT EXISTS {{db}}.{self.name} (
            id UInt8, sealed String, version UInt64, {self.written_column} DateTime64(6, 'UTC')
        ) ENGINE = ReplacingMergeTree(version) ORDER BY id""",
        )

    async def read(self, store: Store) -> SealedRow | None:
        rows = await store.query(
            f"SELECT sealed, version, toString({self.written_column}) AS written_at FROM {{db}}.{self.name} FINAL WHERE id = {{id:UInt8}}",
            {"id": ROW_ID},
        )
        if not rows or not rows[0]["sealed"]:
            return None
        r = rows[0]
        return SealedRow(str(r["sealed"]), int(r["version"]), str(r["written_at"]))

    async def write(self, store: Store, sealed: str, version: int, written_at: str) -> None:
        await store.insert(f"{{db}}.{self.name}", [{"id": ROW_ID, "sealed": sealed, "version": version, self.written_column: written_at}])


SECRETS_TABLE = SealedTable("analysis_secrets", "stored_at")
ROOT_TABLE = SealedTable("analysis_root", "recorded_at")

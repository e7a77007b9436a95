"""The sealed secrets row of loom.analysis_secrets (one row, id 1, highest version wins)."""

from __future__ import annotations

from dataclasses import dataclass

from loom_core.store import Store

ROW_ID = 1


@dataclass(frozen=True, slots=True)
class SecretsRow:
    sealed: str
    version: int
    stored_at: str


async def read_row(store: Store) -> SecretsRow | None:
    rows = await store.query(
        "SELECT sealed, version, toString(stored_at) AS stored_at FROM {db}.analysis_secrets FINAL WHERE id = {id:UInt8}",
        {"id": ROW_ID},
    )
    if not rows or not rows[0]["sealed"]:
        return None
    r = rows[0]
    return SecretsRow(str(r["sealed"]), int(r["version"]), str(r["stored_at"]))


async def write_row(store: Store, sealed: str, version: int, stored_at: str) -> None:
    await store.insert("{db}.analysis_secrets", [{"id": ROW_ID, "sealed": sealed, "version": version, "stored_at": stored_at}])

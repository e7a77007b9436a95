"""loom.analysis_root: the root's own record (one row, id 1, highest version wins)."""

from __future__ import annotations

from dataclasses import dataclass

from loom_core.store import Store

ROW_ID = 1


@dataclass(frozen=True, slots=True)
class RootRow:
    sealed: str
    version: int


async def read_root(store: Store) -> RootRow | None:
    rows = await store.query("SELECT sealed, version FROM {db}.analysis_root FINAL WHERE id = {id:UInt8}", {"id": ROW_ID})
    if not rows or not rows[0]["sealed"]:
        return None
    return RootRow(str(rows[0]["sealed"]), int(rows[0]["version"]))


async def write_root(store: Store, sealed: str, version: int, recorded_at: str) -> None:
    await store.insert("{db}.analysis_root", [{"id": ROW_ID, "sealed": sealed, "version": version, "recorded_at": recorded_at}])

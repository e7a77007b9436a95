"""A memory row is typed once, from the store's result columns (store/memory.py MemoryRow): the
store's JSON quotes 64-bit integers and gives UInt8 flags as numbers; what a write inserts
reads back as the same row."""

from __future__ import annotations

import dataclasses

from loom_decisions.domain.ranking import fuse
from loom_decisions.store.memory import Ident, MemoryRow

COLUMNS = {
    "key": "decisions/db",
    "agent": "planner",
    "user": "ada",
    "session": "s1",
    "memory_id": "m" * 32,
    "version": "12",
    "value": "Use ClickHouse for the ledger",
    "value_hash": "h1",
    "memory_type": "decision",
    "tags": ["decision:db"],
    "pinned": 1,
    "attested_hash": "",  # never attested
    "status": "active",
    "conflicts": ["decisions/other"],
    "reinforcements": "3",
    "files": ["core/ledger.py"],
    "source_resource_id": "knowledge:main/design.md#db",
    "source_class": "design-doc",
    "op": "decision.record",
    "actor": "user:ada",
    "run_id": "run-1",
    "ts": "2026-12-03 19:00:00.123456",
    "removed": 0,  # a column some reads add: not part of the row
}


def test_a_row_types_the_store_s_columns_once() -> None:
    row = MemoryRow.of(COLUMNS)
    assert (row.version, row.reinforcements, row.pinned) == (12, 3, True)
    assert row.tags == ("decision:db",) and row.conflicts == ("decisions/other",) and row.files == ("core/ledger.py",)
    assert row.ident == Ident("planner", "ada", "s1") and row.live


def test_each_field_is_its_own_column() -> None:
    typed = {
        **COLUMNS,
        "version": 12,
        "reinforcements": 3,
        "pinned": True,
        "tags": ("decision:db",),
        "conflicts": ("decisions/other",),
        "files": ("core/ledger.py",),
    }
    row = MemoryRow.of(COLUMNS)
    for f in dataclasses.fields(row):
        assert getattr(row, f.name) == typed[f.name], f.name


def test_what_a_write_inserts_reads_back_as_the_same_row() -> None:
    row = MemoryRow.of(COLUMNS)
    cols = row.columns("acme", "main", [0.5, 0.25])
    assert cols["pinned"] == 1 and cols["tags"] == ["decision:db"] and cols["embedding"] == [0.5, 0.25]
    assert (cols["org"], cols["namespace"]) == ("acme", "main")
    assert MemoryRow.of(cols) == row


def test_attestation_reads_none_current_or_stale() -> None:
    row = MemoryRow.of(COLUMNS)
    assert row.attestation == "none"
    assert dataclasses.replace(row, attested_hash="h1").attestation == "current"
    assert dataclasses.replace(row, attested_hash="h0").attestation == "stale"


def test_search_fuses_typed_rows_each_identity_once_at_its_best_cosine() -> None:
    row = MemoryRow.of(COLUMNS)
    other = dataclasses.replace(row, session="s2", value="Something else entirely")
    ranked, weak = fuse("ClickHouse ledger", [(row, 0.4), (row, 0.7), (other, 0.5)], 10)
    assert [(r.session, r.value) for r, _ in ranked] == [("s1", row.value), ("s2", other.value)]
    assert not weak

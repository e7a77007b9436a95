"""The catalog `insights.catalog` answers, generated from the allowlist: never a column the
analyst cannot read, never the probe's canary."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

from .allowlist import CANARY, Table
from .entities import CAP_MEANINGS, Caps


class CatalogColumn(TypedDict):
    name: str
    type: str
    comment: str


class CatalogTable(TypedDict):
    name: str
    comment: str
    shape: str
    note: str
    columns: list[CatalogColumn]


class CatalogCap(TypedDict):
    setting: str
    value: int
    meaning: str


class Catalog(TypedDict):
    """insights.catalog's answer (the fields of its CatalogResponse)."""

    tables: list[CatalogTable]
    notes: list[str]
    caps: list[CatalogCap]
    version: str
    available: bool


NOTES: tuple[str, ...] = (
    "Tables with shape 'live' hold one row per version: every statement reads them FINAL (forced), so each key shows its latest version and deleted or erased keys are absent.",
    "Tables with shape 'events' hold one row per event: count rows, or distinct ids where the comment says so.",
    "Every statement sees only the caller's org and the namespaces it names (insights.query namespaces); no filter on org is needed.",
    "One SELECT or WITH statement; writes, DDL, system tables, table functions and EXPLAIN are refused.",
    "Times are UTC DateTime64(6); use now() - INTERVAL 7 DAY style ranges.",
)


def build_catalog(tables: Sequence[Table], caps: Caps, row_cap: int, version: str, available: bool, org_concurrency: int = 2) -> Catalog:
    out_tables = [
        CatalogTable(
            name=t.name,
            comment=t.comment,
            shape=t.shape,
            note="one live row per key (read FINAL, tombstones hidden)" if t.shape == "live" else "one row per event",
            columns=[CatalogColumn(name=c.name, type=c.type, comment=c.comment) for c in t.columns],
        )
        for t in tables
        if t.name != CANARY.name
    ]
    out_caps = [CatalogCap(setting=name, value=value, meaning=CAP_MEANINGS[name]) for name, value in caps.items()]
    out_caps.append(CatalogCap(setting="row_cap", value=row_cap, meaning="rows insights.query returns; more sets truncated"))
    out_caps.append(
        CatalogCap(
            setting="org_concurrency", value=org_concurrency, meaning="statements one org runs at once on a replica; more answer 429"
        )
    )
    return Catalog(tables=out_tables, notes=list(NOTES), caps=out_caps, version=version, available=available)

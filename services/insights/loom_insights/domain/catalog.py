"""The catalog `insights.catalog` answers, generated from the allowlist: never a column the
analyst cannot read, never the probe's canary."""

from __future__ import annotations

from collections.abc import Sequence

from loom_api.insights.v1 import insights_pb2 as pb

from .allowlist import CANARY, Table
from .entities import CAP_MEANINGS, Caps

NOTES: tuple[str, ...] = (
    "Tables with shape 'live' hold one row per version: every statement reads them FINAL (forced), so each key shows its latest version and deleted or erased keys are absent.",
    "Tables with shape 'events' hold one row per event: count rows, or distinct ids where the comment says so.",
    "Every statement sees only the caller's org and the namespaces it names (insights.query namespaces); no filter on org is needed.",
    "One SELECT or WITH statement; writes, DDL, system tables, table functions and EXPLAIN are refused.",
    "Times are UTC DateTime64(6); use now() - INTERVAL 7 DAY style ranges.",
)


def build_catalog(
    tables: Sequence[Table], caps: Caps, row_cap: int, version: str, available: bool, org_concurrency: int = 2
) -> pb.CatalogResponse:
    out_tables = [
        pb.CatalogTable(
            name=t.name,
            comment=t.comment,
            shape=t.shape,
            note="one live row per key (read FINAL, tombstones hidden)" if t.shape == "live" else "one row per event",
            columns=[pb.CatalogColumn(name=c.name, type=c.type, comment=c.comment) for c in t.columns],
        )
        for t in tables
        if t.name != CANARY.name
    ]
    out_caps = [pb.CatalogCap(setting=name, value=value, meaning=CAP_MEANINGS[name]) for name, value in caps.items()]
    out_caps.append(pb.CatalogCap(setting="row_cap", value=row_cap, meaning="rows insights.query returns; more sets truncated"))
    out_caps.append(
        pb.CatalogCap(
            setting="org_concurrency", value=org_concurrency, meaning="statements one org runs at once on a replica; more answer 429"
        )
    )
    return pb.CatalogResponse(tables=out_tables, notes=NOTES, caps=out_caps, version=version, available=available)

"""The analysis plane's tables (idempotent migrations).

- analysis_secrets: one sealed row (id 1) holding the analysis key and the analyst's password,
  ReplacingMergeTree(version); sealed under LOOM_JWT_SECRET (`loom secrets reseal` rewrites it).
- analysis_canary: the probe's one row in the reserved scope (empty org and namespace).
- analysis_root: the root's own record, a constant sealed under LOOM_JWT_SECRET by every boot
  (service/root.py): what `loom ch-setup --rotate-analysis-key` proves its secret against.
"""

from __future__ import annotations

from loom_core.store import Migration

from ..domain.allowlist import CANARY_MARKER
from .sealed import ROOT_TABLE, SECRETS_TABLE

MIGRATIONS: list[Migration] = [
    SECRETS_TABLE.migration(),
    Migration(
        "insights",
        "analysis_canary",
        """
        CREATE TABLE IF NOT EXISTS {db}.analysis_canary (
            org String, namespace String, marker String
        ) ENGINE = MergeTree ORDER BY (org, namespace)""",
    ),
    Migration(
        "insights",
        "analysis_canary_row",
        f"""
        INSERT INTO {{db}}.analysis_canary (org, namespace, marker)
        SELECT '', '', '{CANARY_MARKER}' WHERE (SELECT count() FROM {{db}}.analysis_canary) = 0""",
    ),
    ROOT_TABLE.migration(),
]

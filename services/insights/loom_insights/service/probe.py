"""The probe of the analyst user, run as the analyst itself (it needs no access management).

Checks, each a signed or unsigned statement:
- a signed read of loom.analysis_canary in the reserved scope returns the canary row (the
  policies accept the key);
- a signed read of each allowlisted table in that scope counts no rows (nothing widens what
  the analyst reads);
- a system table and a column outside the allowlist are refused;
- unless the stored version is newer than this build's: an unsigned read of each table and of
  the canary fails, and the analyst's SHOW GRANTS names nothing but the allowlist and the canary.

A check that got a ClickHouse answer it should not have is a definite finding
(ANALYSIS_UNAVAILABLE); one that got no answer leaves the finding open (OVERLOADED).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..domain.allowlist import CANARY, CANARY_MARKER, LEDGER, Table
from ..domain.answers import AUTHENTICATION_FAILED, MEMORY_LIMIT_EXCEEDED, REQUIRED_PASSWORD, UNKNOWN_USER, health_text
from ..domain.grants import grants_within
from ..domain.scope import Scope, scope_settings
from ..store.clickhouse import ChError, NoAnswer, Result

PROBE_TTL_S = 60

# Findings a write repairs.
REPAIRABLE = ("policy_missing", "canary_key", "extra_grant", "unsigned_read")


@dataclass(slots=True)
class ProbeResult:
    ok: bool
    definite: bool = True
    findings: list[str] = field(default_factory=list)
    codes: list[str] = field(default_factory=list)  # finding kinds
    reason: str = ""  # Loom's own words for /v1/health
    finished_at: float = field(default_factory=time.time)

    @property
    def repairable(self) -> bool:
        return self.definite and bool(self.codes) and all(c in REPAIRABLE for c in self.codes)


class AnalystConnection(Protocol):
    """What the probe needs of a connection as the analyst: store.clickhouse.ChClient on a
    server (the chDB persona's adapter in tests/insights/persona_cases.py has the same shape)."""

    async def run(self, sql: str, settings: Mapping[str, Any] | None = None, *, query_id: str = "", wait_s: float = 60.0) -> Result: ...


class Prober:
    def __init__(self, analyst: AnalystConnection, db: str) -> None:
        self.analyst = analyst
        self.db = db

    async def _readable(self, sql: str, settings: Mapping[str, Any] | None, query_id: str) -> bool:
        """Whether the analyst's read answers; a refusal is False, a failed sign-in raises (the
        probe cannot judge the boundary then)."""
        try:
            await self.analyst.run(sql, settings, query_id=query_id, wait_s=30)
        except ChError as exc:
            if exc.code in (AUTHENTICATION_FAILED, REQUIRED_PASSWORD, UNKNOWN_USER):
                raise
            return False
        return True

    def _signed(self, key: bytes, prefix: str) -> tuple[dict[str, str], str]:
        qid = f"probe:{uuid.uuid4()}"
        scope = Scope("", ("",), int(time.time()) + PROBE_TTL_S)
        return scope_settings(prefix, key, scope, qid), qid

    async def run(self, key: bytes, prefix: str, tables: tuple[Table, ...], own_version_current: bool) -> ProbeResult:
        res = ProbeResult(ok=True)
        try:
            await self._checks(res, key, prefix, tables, own_version_current)
        except NoAnswer as exc:
            res.ok = False
            res.definite = False
            res.findings.append(f"no answer from ClickHouse ({exc})")
            res.reason = "ClickHouse did not answer the analysis probe"
        except ChError as exc:
            res.ok = False
            res.findings.append(f"ClickHouse error {exc.code} {exc.name}")
            res.reason = health_text(exc.code, exc.name)
            if exc.code in (AUTHENTICATION_FAILED, REQUIRED_PASSWORD, UNKNOWN_USER):
                res.codes.append("sign_in")
            elif exc.code == MEMORY_LIMIT_EXCEEDED:
                res.definite = False
            else:
                res.codes.append("error")
        if res.ok and res.findings:
            res.ok = False
        if not res.ok and not res.reason:
            res.reason = "the analysis boundary check failed: " + "; ".join(res.findings[:3])
        res.finished_at = time.time()
        return res

    async def _checks(self, res: ProbeResult, key: bytes, prefix: str, tables: tuple[Table, ...], current: bool) -> None:
        db = self.db
        # 1. the canary under the key
        settings, qid = self._signed(key, prefix)
        got = await self.analyst.run(
            f"SELECT count() FROM {db}.{CANARY.name} WHERE marker = '{CANARY_MARKER}'", settings, query_id=qid, wait_s=30
        )
        if not got.rows or int(got.rows[0][0]) < 1:
            res.findings.append("the canary reads nothing: its policy is under another key")
            res.codes.append("canary_key")
        # 2. the reserved scope counts nothing on every table
        for t in tables:
            settings, qid = self._signed(key, prefix)
            got = await self.analyst.run(f"SELECT count() FROM {db}.{t.name}", settings, query_id=qid, wait_s=30)
            if got.rows and int(got.rows[0][0]) > 0:
                res.findings.append(
                    f"{t.name} admits rows in the reserved scope: a policy widens what the analyst reads, or its policy is missing"
                )
                res.codes.append("policy_missing")
        # 3. refusals
        for what, sql in (
            ("a system table", "SELECT count() FROM system.query_log"),
            ("a column outside the allowlist", f"SELECT args FROM {db}.{LEDGER.name} LIMIT 0"),
        ):
            settings, qid = self._signed(key, prefix)
            if await self._readable(sql, settings, qid):
                res.findings.append(f"{what} is readable by the analyst")
                res.codes.append("extra_grant")
        if not current:
            return  # a newer build's entities are its own to check
        # 4. unsigned reads fail
        for t in (*tables, CANARY):
            if await self._readable(f"SELECT count() FROM {db}.{t.name}", None, f"probe:{uuid.uuid4()}"):
                res.findings.append(f"an unsigned read of {t.name} succeeds: the table has no scope policy")
                res.codes.append("unsigned_read")
        # 5. SHOW GRANTS names only the allowlist
        got = await self.analyst.run("SHOW GRANTS", wait_s=30)
        extra = grants_within([str(r[0]) for r in got.rows], db, tables)
        if extra:
            res.findings.append(f"the analyst holds grants outside the allowlist ({len(extra)})")
            res.codes.append("extra_grant")

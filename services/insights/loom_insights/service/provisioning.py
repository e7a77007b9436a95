"""Writing the analyst's entities: at boot (where Loom's ClickHouse user has access
management), by `loom ch-setup`, and as the probe's repair.

Every write holds the `analysis.entities` lease, reads what the entities hold once it has it,
refuses over a permissive policy Loom did not write or the analyst's scope policy in another
database, never writes over a newer build's version, draws the secrets row only when there is
none and no analyst user exists (storing the row before the user), and runs the statements in
the order of a write (domain/entities.write_plan). Statements that carry the key or the password
run with log_queries_cut_to_length = 1 and log_formatted_queries = 0 and are never logged here.
"""

from __future__ import annotations

import logging
import secrets as pysecrets
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from loom_core.bus import LeaseStore
from loom_core.errors import ErrorCode, Unavailable
from loom_core.sealing import Sealer
from loom_core.store import Store

from ..domain.allowlist import ALLOWLIST, CANARY, Table
from ..domain.entities import (
    ANALYST,
    CAPS_PROFILE,
    CAPS_STAMP,
    LOG_TEXT_CUT,
    OTHERS_POLICY,
    PROFILE,
    SCOPE_POLICY,
    VERSION_STAMP,
    Caps,
    WritePlan,
    may_write,
    revision_of,
    version_of,
    write_plan,
    writes_caps,
)
from ..domain.scope import PREFIXES
from ..store.clickhouse import ChClient, ChError, NoAnswer
from ..store.tables import present as present_in
from . import secrets as sec

log = logging.getLogger(__name__)

Mode = Literal["boot", "setup", "repair"]


class Refused(Exception):
    """A write to the analysis boundary Loom will not make; `reason` is an operator's sentence."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ProvisionRefused(Refused):
    """A write of the analyst's entities Loom will not make."""


@dataclass(slots=True)
class Report:
    wrote: bool = False
    version: str = ""
    stored_version: str = ""
    drew_secrets: bool = False
    skipped: str = ""
    statements: int = 0
    notes: list[str] = field(default_factory=list)


async def detect_prefix(admin: ChClient) -> str:
    """The custom-settings prefix the server takes: SQL_ then custom_."""
    for prefix in PREFIXES:
        name = f"{prefix}loom_probe"
        try:
            res = await admin.run(f"SELECT toString(getSetting('{name}')) AS v", {name: "1"}, wait_s=15)
        except ChError:
            continue
        if res.rows and res.rows[0][0] == "1":
            return prefix
    raise Unavailable(
        ErrorCode.ANALYSIS_UNAVAILABLE,
        "the ClickHouse server takes custom settings under neither SQL_ nor custom_ (custom_settings_prefixes)",
        {"reason": "custom_settings_prefixes names neither SQL_ nor custom_"},
    )


class Provisioner:
    def __init__(
        self,
        store: Store,
        admin: ChClient,
        leases: LeaseStore | None,
        sealer: Sealer,
        caps: Caps,
        lease_wait_s: float = 60.0,
        allowlist: Sequence[Table] = ALLOWLIST,
    ) -> None:
        self.store = store
        self.allowlist = tuple(allowlist)
        self.admin = admin
        self.leases = leases
        self.sealer = sealer
        self.caps = caps
        self.lease_wait_s = lease_wait_s
        self.db = store.database

    # ---------------------------------------------------------------- reads

    async def present(self) -> tuple[Table, ...]:
        return await present_in(self.store, self.allowlist)

    async def stored_stamp(self, profile: str, setting: str) -> str:
        rows = await self.store.query(
            "SELECT value FROM system.settings_profile_elements WHERE profile_name = {p:String} AND setting_name = {s:String}",
            {"p": profile, "s": setting},
        )
        return str(rows[0]["value"] or "").strip("'") if rows else ""

    async def analyst_exists(self) -> bool:
        rows = await self.store.query("SELECT count() AS n FROM system.users WHERE name = {u:String}", {"u": ANALYST})
        return bool(rows and int(rows[0]["n"]))

    async def foreign_permissive(self, tables: tuple[Table, ...]) -> list[str]:
        names = [t.name for t in (*tables, CANARY)]
        rows = await self.store.query(
            "SELECT short_name, table FROM system.row_policies WHERE database = {db:String} AND has({t:Array(String)}, table)"
            " AND is_restrictive = 0 AND short_name != {mine:String}",
            {"db": self.db, "t": names, "mine": OTHERS_POLICY},
        )
        return [f"{r['short_name']} ON {self.db}.{r['table']}" for r in rows]

    async def scope_policy_elsewhere(self) -> list[str]:
        rows = await self.store.query(
            "SELECT DISTINCT database FROM system.row_policies WHERE short_name = {p:String} AND database != {db:String}",
            {"p": SCOPE_POLICY, "db": self.db},
        )
        return [str(r["database"]) for r in rows]

    async def retired_tables(self, tables: tuple[Table, ...]) -> list[str]:
        names = [t.name for t in (*tables, CANARY)]
        rows = await self.store.query(
            "SELECT table FROM system.row_policies WHERE database = {db:String} AND short_name = {p:String}"
            " AND NOT has({t:Array(String)}, table)",
            {"db": self.db, "p": SCOPE_POLICY, "t": names},
        )
        return sorted(str(r["table"]) for r in rows)

    async def analyst_roles(self) -> list[str]:
        rows = await self.store.query("SELECT granted_role_name FROM system.role_grants WHERE user_name = {u:String}", {"u": ANALYST})
        return [str(r["granted_role_name"]) for r in rows]

    async def plan(self, prefix: str, secrets: sec.AnalysisSecrets, version: str, tables: tuple[Table, ...]) -> WritePlan:
        """A write of `tables` at `version` under `secrets` that revokes the analyst's roles and
        retires the tables the allowlist no longer names (a boot write and a rotation alike)."""
        return WritePlan(
            db=self.db,
            prefix=prefix,
            key=secrets.key,
            password=secrets.password,
            version=version,
            caps=self.caps,
            tables=tables,
            retired_tables=await self.retired_tables(tables),
            revoke_roles=await self.analyst_roles(),
        )

    # ---------------------------------------------------------------- the write

    async def write(self, mode: Mode, holder: str = "") -> Report:
        """One write under the lease. Raises ProvisionRefused, ChError (e.g. no access
        management) or NoAnswer."""
        holder = holder or f"{mode}-{pysecrets.token_hex(4)}"
        lease = None
        if self.leases is not None:
            lease = await self.leases.wait_acquire(sec.LEASE, holder, ttl=max(60.0, self.lease_wait_s), timeout=self.lease_wait_s)
        try:
            return await self._write_held(mode)
        finally:
            if lease is not None and self.leases is not None:
                await self.leases.release(lease)

    async def _write_held(self, mode: Mode) -> Report:
        prefix = await detect_prefix(self.admin)
        tables = await self.present()
        ours = version_of(tables)
        stored = await self.stored_stamp(PROFILE, f"{prefix}{VERSION_STAMP}")
        report = Report(version=ours, stored_version=stored)
        if not may_write(stored, ours):
            report.skipped = f"the stored version {stored} is newer than this build's {ours}"
            return report
        foreign = await self.foreign_permissive(tables)
        if foreign:
            msg = "permissive row policies Loom did not write widen what the analyst reads: " + "; ".join(foreign)
            log.error("analysis: refusing to write the entities: %s (drop them or make them restrictive)", msg)
            raise ProvisionRefused(msg + " (drop them or make them RESTRICTIVE)")
        elsewhere = await self.scope_policy_elsewhere()
        if elsewhere:
            msg = f"the analyst's scope policy exists in another database: {', '.join(elsewhere)} (one Loom per ClickHouse service)"
            log.error("analysis: refusing to write the entities: %s", msg)
            raise ProvisionRefused(msg)
        caps_stored = await self.stored_stamp(CAPS_PROFILE, f"{prefix}{CAPS_STAMP}")
        exists = await self.analyst_exists()
        try:
            loaded = await sec.load(self.store, self.sealer)
        except sec.SecretsUnreadable as exc:
            # Never drawn over: a new key under the same user would strand every replica that
            # still opens the row. The fix is the deployment's LOOM_JWT_SECRET (or _PREVIOUS).
            raise ProvisionRefused(f"{exc}: set LOOM_JWT_SECRET (or LOOM_JWT_SECRET_PREVIOUS) to the deployment's root secret") from None
        if loaded is None:
            if exists:
                raise ProvisionRefused(
                    "the analysis secrets row is gone while the analyst user exists: run loom ch-setup --rotate-analysis-key"
                )
            secrets = sec.draw()
            await sec.store_new(self.store, self.sealer, secrets)  # the row before the user
            report.drew_secrets = True
        else:
            secrets = loaded[0]
        if mode == "boot" and stored == ours and caps_stored == self.caps.stamp() and exists:
            report.skipped = "the stored entities are this build's"
            return report
        plan = replace(
            await self.plan(prefix, secrets, ours, tables),
            previous_version=stored if revision_of(stored) else "",
            write_caps=writes_caps(mode, caps_stored, self.caps),
            create_user=not exists,
        )
        for st in write_plan(plan):
            await self.admin.run(st.sql, LOG_TEXT_CUT if st.secret else None, wait_s=60)
            report.statements += 1
        report.wrote = True
        log.info("analysis: wrote the analyst's entities at version %s (%d statements)", ours, report.statements)
        return report


__all__ = ["ChError", "NoAnswer", "ProvisionRefused", "Provisioner", "Refused", "Report", "detect_prefix"]

"""Identity tables: orgs, namespaces, grants, service accounts, revocations (SQL only)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypedDict

from ..roles import Role
from ..store import Migration, Store, ch_time, query_as

MIGRATIONS = [
    Migration(
        "identity",
        "orgs",
        """
        CREATE TABLE IF NOT EXISTS {db}.orgs (
            org String, created_at DateTime64(6, 'UTC'), version UInt64
        ) ENGINE = ReplacingMergeTree(version) ORDER BY org""",
    ),
    Migration(
        "identity",
        "namespaces",
        """
        CREATE TABLE IF NOT EXISTS {db}.namespaces (
            org String, name String, description String, created_at DateTime64(6, 'UTC'),
            version UInt64, tombstoned_at Nullable(DateTime64(6, 'UTC'))
        ) ENGINE = ReplacingMergeTree(version) ORDER BY (org, name)""",
    ),
    Migration(
        "identity",
        "grants",
        """
        CREATE TABLE IF NOT EXISTS {db}.grants (
            org String, namespace String, subject String, role String,
            updated_at DateTime64(6, 'UTC'), version UInt64
        ) ENGINE = ReplacingMergeTree(version) ORDER BY (org, subject, namespace)""",
    ),
    Migration(
        "identity",
        "service_accounts",
        """
        CREATE TABLE IF NOT EXISTS {db}.service_accounts (
            org String, name String, description String, created_at DateTime64(6, 'UTC'), version UInt64
        ) ENGINE = ReplacingMergeTree(version) ORDER BY (org, name)""",
    ),
    Migration(
        "identity",
        "revocations",
        """
        CREATE TABLE IF NOT EXISTS {db}.revocations (
            org String, kind LowCardinality(String), value String,
            revoked_at DateTime64(6, 'UTC'), revoked_by String
        ) ENGINE = ReplacingMergeTree ORDER BY (org, kind, value)""",
    ),
]


def _version() -> int:
    return time.time_ns()


class NamespaceRow(TypedDict):
    name: str
    description: str
    created_at: str  # ClickHouse DateTime64 text


class GrantRow(TypedDict):
    subject: str
    namespace: str  # or "*": every namespace of the org
    role: str
    updated_at: str  # ClickHouse DateTime64 text


class WrittenGrant(GrantRow):
    org: str
    version: int


@dataclass(frozen=True, slots=True)
class Revocation:
    org: str
    kind: str  # token | subject | session
    value: str
    revoked_at: float


class IdentityStore:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def ensure_org(self, org: str) -> bool:
        """Record the org once; True when this call created it."""
        rows = await self.store.query("SELECT org FROM {db}.orgs FINAL WHERE org = {org:String}", {"org": org})
        if rows:
            return False
        await self.store.insert("{db}.orgs", [{"org": org, "created_at": ch_time(), "version": _version()}])
        return True

    async def get_namespace(self, org: str, name: str) -> NamespaceRow | None:
        rows = await query_as(
            self.store,
            NamespaceRow,
            "SELECT name, description, toString(created_at) AS created_at FROM {db}.namespaces FINAL"
            " WHERE org = {org:String} AND name = {name:String} AND tombstoned_at IS NULL",
            {"org": org, "name": name},
        )
        return rows[0] if rows else None

    async def create_namespace(self, org: str, name: str, description: str, *, new_org: bool = False) -> tuple[NamespaceRow, bool]:
        """`new_org`: the caller has just created the org (`ensure_org` said so), which therefore
        has no namespace yet: the lookup is left out."""
        existing = None if new_org else await self.get_namespace(org, name)
        if existing:
            return existing, False
        created = NamespaceRow(name=name, description=description, created_at=ch_time())
        await self.store.insert("{db}.namespaces", [{**created, "org": org, "version": _version(), "tombstoned_at": None}])
        return created, True

    async def list_namespaces(self, org: str) -> list[NamespaceRow]:
        return await query_as(
            self.store,
            NamespaceRow,
            "SELECT name, description, toString(created_at) AS created_at FROM {db}.namespaces FINAL"
            " WHERE org = {org:String} AND tombstoned_at IS NULL ORDER BY name",
            {"org": org},
        )

    async def set_grant(self, org: str, namespace: str, subject: str, role: str) -> WrittenGrant:
        row = WrittenGrant(org=org, namespace=namespace, subject=subject, role=role, updated_at=ch_time(), version=_version())
        await self.store.insert("{db}.grants", [row])
        return row

    async def grants_of(self, org: str, subject: str) -> dict[str, Role]:
        rows = await self.store.query(
            "SELECT namespace, role FROM {db}.grants FINAL WHERE org = {org:String} AND subject = {subject:String}",
            {"org": org, "subject": subject},
        )
        return {r["namespace"]: Role.parse(r["role"]) for r in rows if r["role"] != "none"}

    async def grants_in(self, org: str, namespace: str) -> list[GrantRow]:
        return await query_as(
            self.store,
            GrantRow,
            "SELECT subject, namespace, role, toString(updated_at) AS updated_at FROM {db}.grants FINAL"
            " WHERE org = {org:String} AND namespace IN ({namespace:String}, '*') AND role != 'none'"
            " ORDER BY subject, namespace",
            {"org": org, "namespace": namespace},
        )

    async def principals(self, org: str) -> list[str]:
        rows = await self.store.query(
            "SELECT DISTINCT subject FROM {db}.grants FINAL WHERE org = {org:String} AND role != 'none' ORDER BY subject",
            {"org": org},
        )
        return [r["subject"] for r in rows]

    async def create_service_account(self, org: str, name: str, description: str) -> bool:
        rows = await self.store.query(
            "SELECT name FROM {db}.service_accounts FINAL WHERE org = {org:String} AND name = {name:String}",
            {"org": org, "name": name},
        )
        if rows:
            return False
        await self.store.insert(
            "{db}.service_accounts",
            [{"org": org, "name": name, "description": description, "created_at": ch_time(), "version": _version()}],
        )
        return True

    async def revoke(self, org: str, kind: str, value: str, revoked_by: str) -> Revocation:
        # One instant for the row and the push, to the microsecond the column keeps.
        now = round(time.time(), 6)
        await self.store.insert(
            "{db}.revocations",
            [{"org": org, "kind": kind, "value": value, "revoked_at": ch_time(datetime.fromtimestamp(now, UTC)), "revoked_by": revoked_by}],
        )
        return Revocation(org, kind, value, now)

    async def prune_revocations(self, before: float) -> int:
        """Delete revocation rows older than `before` (epoch seconds); returns how many went."""
        params = {"before": ch_time(datetime.fromtimestamp(before, UTC))}
        rows = await self.store.query("SELECT count() AS n FROM {db}.revocations WHERE revoked_at < {before:DateTime64(6, 'UTC')}", params)
        n = int(rows[0]["n"]) if rows else 0
        if n:
            await self.store.execute("DELETE FROM {db}.revocations WHERE revoked_at < {before:DateTime64(6, 'UTC')}", params)
        return n

    async def revocations(self) -> list[Revocation]:
        rows = await self.store.query(
            "SELECT org, kind, value, toFloat64(max(revoked_at)) AS at FROM {db}.revocations GROUP BY org, kind, value"
        )
        return [Revocation(r["org"], r["kind"], r["value"], float(r["at"])) for r in rows]

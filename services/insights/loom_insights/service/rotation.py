"""`loom ch-setup --rotate-analysis-key [--live]`: the analysis key's rotation (spec 000, "Key
rotation"), run by a user with access management and the KILL QUERY grant.

Before it writes anything it proves its LOOM_JWT_SECRET against the root's record, refuses a
stored version newer than its own, refuses (without --live) while the secrets row opens, and
refuses without the KILL QUERY grant. Then, holding the `analysis.entities` lease, it draws a
new key and password and runs domain/rotation.rotation_plan: the delete, the new password, KILL
QUERY, the entity set under the new key; then it waits until every server's scope policy carries
the new key, where Loom's user can read them (clusterAllReplicas on a cluster, the local
system.row_policies on one server), else the settle time; KILL QUERY again; and last it stores
the new row, at the version it read plus one, or at ClickHouse's clock when there was none. A
server that is unreachable, or has not taken the new key after ten settle times, stops it before
the row is stored, naming the server: analysis stays unavailable and a rerun rotates again.
"""

from __future__ import annotations

import asyncio
import logging
import secrets as pysecrets
import time
from dataclasses import dataclass

from loom_core.bus import LeaseStore
from loom_core.sealing import Sealer
from loom_core.settings import Settings
from loom_core.store import Store

from ..domain.allowlist import CANARY, Table
from ..domain.entities import LOG_TEXT_CUT, PROFILE, SCOPE_POLICY, VERSION_STAMP, Caps, may_write, quote, version_of
from ..domain.rotation import CLI_OWN_STEPS, key_id, policy_key_id, rotation_plan
from ..store.clickhouse import ChClient, ChError, NoAnswer
from ..store.sealed import SECRETS_TABLE
from . import root
from . import secrets as sec
from .provisioning import Provisioner, Refused, detect_prefix

log = logging.getLogger(__name__)

CONFIRM_POLL_S = 1.0
CONFIRM_SETTLES = 10


class RotationRefused(Refused):
    """A rotation Loom will not run, or one whose new key it could not see every server take."""


@dataclass(slots=True)
class RotationReport:
    version: str
    statements: int
    key: str  # key_id of the new key
    confirmed: str  # how the wait ended: "policies" (every server's policy read) or "settle"
    row_version: int


# ClickHouse errors that mean a server did not answer a clusterAllReplicas read (not that Loom's
# user may not read the policies): ALL_CONNECTION_TRIES_FAILED, SOCKET_TIMEOUT, NETWORK_ERROR,
# TIMEOUT_EXCEEDED.
SERVER_DOWN = (279, 209, 210, 159)


async def read_policy_keys(admin: ChClient, db: str, cluster: str) -> dict[str, str | None] | None:
    """Each server's canary scope policy key (key_id), by hostName(); None when Loom's user cannot
    read every server's policies (no SHOW ROW POLICIES, or no REMOTE and CREATE TEMPORARY TABLE
    grants for clusterAllReplicas). Raises NoAnswer when a server did not answer."""
    source = f"clusterAllReplicas({quote(cluster)}, system.row_policies)" if cluster else "system.row_policies"
    sql = (
        f"SELECT hostName() AS host, select_filter FROM {source}"
        f" WHERE short_name = {quote(SCOPE_POLICY)} AND database = {quote(db)} AND table = {quote(CANARY.name)}"
    )
    try:
        res = await admin.run(sql, wait_s=30)
    except ChError as exc:
        if exc.code in SERVER_DOWN:
            raise NoAnswer(f"ClickHouse error {exc.code} {exc.name}") from None
        log.info("analysis: the servers' policies could not be read (ClickHouse error %s %s)", exc.code, exc.name)
        return None
    keys: dict[str, str | None] = {str(host): policy_key_id(str(condition or "")) for host, condition in res.rows}
    return keys or None


async def clickhouse_clock_ns(admin: ChClient) -> int:
    res = await admin.run("SELECT toUInt64(toUnixTimestamp64Nano(now64(9)))", wait_s=15)
    return int(res.rows[0][0])


async def clickhouse_now(admin: ChClient) -> str:
    res = await admin.run("SELECT toString(now64(6, 'UTC'))", wait_s=15)
    return str(res.rows[0][0])


async def may_kill(admin: ChClient) -> bool:
    """Whether Loom's ClickHouse user holds KILL QUERY (directly, through ALL, or a role)."""
    res = await admin.run(
        "SELECT count() FROM system.grants WHERE (user_name = currentUser() OR role_name IN (SELECT role_name FROM system.current_roles))"
        " AND access_type IN ('KILL QUERY', 'ALL') AND database IS NULL AND is_partial_revoke = 0",
        wait_s=15,
    )
    return bool(res.rows and int(res.rows[0][0]))


class Rotator:
    def __init__(
        self,
        store: Store,
        admin: ChClient,
        leases: LeaseStore | None,
        settings: Settings,
        caps: Caps,
        settle_s: float,
        lease_wait_s: float = 60.0,
    ) -> None:
        self.store = store
        self.admin = admin
        self.leases = leases
        self.settings = settings
        self.sealer: Sealer = sec.sealer_for(settings)
        self.caps = caps
        self.settle_s = settle_s
        self.lease_wait_s = lease_wait_s
        self.cluster = settings.clickhouse_cluster
        self.db = store.database

    def _settings_for(self, secret: bool) -> dict[str, object] | None:
        out: dict[str, object] = dict(LOG_TEXT_CUT) if secret else {}
        if self.cluster:
            out["distributed_ddl_output_mode"] = "throw"
        return out or None

    async def rotate(self, live: bool) -> RotationReport:
        """Raises RotationRefused (nothing written), ChError or NoAnswer (analysis left unavailable
        when it happens after the delete: a rerun finishes it)."""
        problem = await root.prove(self.store, self.settings)
        if problem:
            raise RotationRefused(problem)
        prov = Provisioner(self.store, self.admin, self.leases, self.sealer, self.caps, self.lease_wait_s)
        prefix = await detect_prefix(self.admin)
        tables = await prov.present()
        ours = version_of(tables)
        stored = await prov.stored_stamp(PROFILE, f"{prefix}{VERSION_STAMP}")
        if not may_write(stored, ours):
            raise RotationRefused(f"the stored version {stored} is newer than this CLI's {ours}: rotate with the newest build's CLI")
        if not live:
            try:
                opened = await sec.load(self.store, self.sealer)
            except sec.SecretsUnreadable:
                opened = None  # under the proven root, a row that does not open is the lost row's twin
            if opened is not None:
                raise RotationRefused("the analysis secrets row opens: nothing to recover (to rotate a healthy key on purpose, add --live)")
        if not await may_kill(self.admin):
            raise RotationRefused("Loom's ClickHouse user lacks the KILL QUERY grant a rotation needs (beside access management)")
        foreign = await prov.foreign_permissive(tables)
        if foreign:
            raise RotationRefused("permissive row policies Loom did not write widen what the analyst reads: " + "; ".join(foreign))
        elsewhere = await prov.scope_policy_elsewhere()
        if elsewhere:
            raise RotationRefused(f"the analyst's scope policy exists in another database: {', '.join(elsewhere)}")
        lease = None
        if self.leases is not None:
            ttl = self.settle_s * (CONFIRM_SETTLES + 1) + 120.0
            lease = await self.leases.wait_acquire(sec.LEASE, f"rotate-{pysecrets.token_hex(4)}", ttl=ttl, timeout=self.lease_wait_s)
        try:
            return await self._rotate_held(prov, prefix, tables, ours)
        finally:
            if lease is not None and self.leases is not None:
                await self.leases.release(lease)

    async def _rotate_held(self, prov: Provisioner, prefix: str, tables: tuple[Table, ...], ours: str) -> RotationReport:
        row = await SECRETS_TABLE.read(self.store)  # what the lease holder reads: the version the new row goes above
        fresh = sec.draw()
        plan = await prov.plan(prefix, fresh, ours, tables)
        statements = rotation_plan(plan, cluster=self.cluster, settle_s=self.settle_s)
        ran = 0
        waited = ""
        kills = 0
        for st in statements:
            if st.step in CLI_OWN_STEPS:
                if not waited:
                    waited = await self._wait_for_servers(key_id(fresh.key))
                continue
            if st.step == "kill":
                kills += 1
            await self.admin.run(st.sql, self._settings_for(st.secret), wait_s=120)
            ran += 1
            if st.step == "delete":
                log.info("analysis: rotation: the secrets row is deleted; analysis is unavailable until the new row is stored")
        assert kills == 2 and waited, "the plan ends its statements twice around the wait"
        version = row.version + 1 if row is not None else await clickhouse_clock_ns(self.admin)
        await SECRETS_TABLE.write(self.store, sec.seal(self.sealer, fresh), version, await clickhouse_now(self.admin))
        log.info("analysis: rotation: the new row is stored at version %d (key %s)", version, key_id(fresh.key))
        return RotationReport(ours, ran, key_id(fresh.key), waited, version)

    async def _wait_for_servers(self, new_key: str) -> str:
        """Until every server's scope policy carries the new key (where they can be read), else
        the settle time. Raises RotationRefused naming the servers that did not take it."""
        try:
            keys = await read_policy_keys(self.admin, self.db, self.cluster)
        except NoAnswer:
            raise RotationRefused(
                "a ClickHouse server did not answer the policy read: the row is not stored; rerun once it is back"
            ) from None
        if keys is None:
            await asyncio.sleep(self.settle_s)
            return "settle"
        deadline = time.monotonic() + CONFIRM_SETTLES * self.settle_s
        while True:
            behind = sorted(h for h, k in keys.items() if k != new_key)
            if not behind:
                return "policies"
            if time.monotonic() > deadline:
                raise RotationRefused(
                    f"servers have not taken the new key after {CONFIRM_SETTLES} settle times: {', '.join(behind)};"
                    " the row is not stored and analysis stays unavailable: rerun once they apply access changes"
                )
            await asyncio.sleep(CONFIRM_POLL_S)
            try:
                keys = await read_policy_keys(self.admin, self.db, self.cluster) or keys
            except NoAnswer:
                raise RotationRefused(
                    f"a ClickHouse server did not answer the policy read (last seen behind: {', '.join(behind)});"
                    " the row is not stored: rerun once it is back"
                ) from None


__all__ = ["RotationRefused", "RotationReport", "Rotator", "read_policy_keys"]

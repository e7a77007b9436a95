"""The analysis service: insights.query and insights.catalog, the boot write, the probe loop
and the state every answer is judged by.

States: `embedded` (the chDB store: analysis needs a ClickHouse server, both ops answer
ANALYSIS_UNAVAILABLE), `starting` and `overloaded` (no clean probe yet, or the last probe got no
answer: OVERLOADED, clients retry after 5 s), `unavailable` (a definite finding:
ANALYSIS_UNAVAILABLE) and `ready`. No statement runs before a probe has passed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Literal

from loom_api.insights.v1 import insights_pb2 as pb
from loom_core.bus import LeaseStore
from loom_core.errors import ErrorCode, Forbidden, Unavailable, invalid_field
from loom_core.identity import Authenticator, Principal
from loom_core.plane import HealthCheck
from loom_core.roles import Role
from loom_core.settings import Settings
from loom_core.store import Store
from loom_core.store.base import StoreError, parse_ch_time

from ..domain.allowlist import ALLOWLIST, Table, present_tables
from ..domain.catalog import build_catalog
from ..domain.entities import ANALYST, PROFILE, VERSION_STAMP, Caps, may_write, revision_of, version_of
from ..domain.rotation import defers_repair
from ..domain.scope import valid_namespace
from ..settings import InsightsSettings
from ..store.clickhouse import ChClient, ChError, NoAnswer
from ..store.tables import present as present_in
from . import root
from . import secrets as sec
from .probe import Prober, ProbeResult
from .provisioning import Provisioner, ProvisionRefused, detect_prefix
from .statements import QueryAnswer, SignInFailed, StatementRunner, overloaded, statement_ledger, unavailable

log = logging.getLogger(__name__)

State = Literal["embedded", "starting", "ready", "unavailable", "overloaded"]
EMBEDDED_REASON = (
    "analysis needs a ClickHouse server: this Loom runs on the embedded store (chDB), which cannot enforce the analyst boundary"
)


NO_SECRETS_ROW = (
    "there is no analysis secrets row: run loom ch-setup as a user with access management on a first install;"
    " over a lost row (the analyst user still there), loom ch-setup --rotate-analysis-key (loom doctor: analysis.boundary)"
)
REPAIR_ELSEWHERE = "this replica could not repair it: run loom ch-setup as a user with access management"
REPAIR_REFUSED = "a write cannot repair it: an admin's fix, named in the server log"
REPAIR_UNFINISHED = "the repair did not finish; the next probe tries again"


def caps_from(settings: InsightsSettings) -> Caps:
    return Caps(
        max_execution_time=settings.ch_analysis_max_execution_time_s,
        max_rows_to_read=settings.ch_analysis_max_rows_to_read,
        max_memory_usage=settings.ch_analysis_max_memory_usage,
        max_result_rows=settings.ch_analysis_max_result_rows,
        max_threads=settings.ch_analysis_max_threads,
        max_concurrent_queries_for_user=settings.ch_analysis_max_concurrent_queries,
    )


class Analysis:
    def __init__(self, store: Store, leases: LeaseStore, auth: Authenticator, core: Settings, settings: InsightsSettings) -> None:
        self.store = store
        self.leases = leases
        self.auth = auth
        self.clickhouse_url = core.clickhouse_url
        self.settings = settings
        self.caps = caps_from(settings)
        self.row_cap = settings.ch_analysis_row_cap
        self.per_org = settings.ch_analysis_org_concurrency
        self.interval = settings.ch_analysis_probe_interval_s
        self.embedded = store.engine != "clickhouse"
        self.state: State = "embedded" if self.embedded else "starting"
        self.reason = EMBEDDED_REASON if self.embedded else "the first analysis probe has not finished"
        self.tables: tuple[Table, ...] = present_tables({}) if self.embedded else ()
        self.version = version_of(self.tables) if self.embedded else ""
        self.prefix = ""
        self._key: bytes = b""
        self._password = ""
        self._stored_at = ""  # the secrets row's stored time (ClickHouse's clock at the rotation)
        self.settle_s = settings.ch_analysis_rotation_settle_s
        self._admin: ChClient | None = None
        self._analyst: ChClient | None = None
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self.last_answer_at = time.time()
        self.last_probe: ProbeResult | None = None
        self.core = core
        self.sealer = sec.sealer_for(core)
        self.runner = StatementRunner(self.caps, self.row_cap, self.per_org)
        # This build's allowlist: what a write grants and the probe checks.
        self.allowlist: tuple[Table, ...] = ALLOWLIST

    # ---------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        try:
            await root.record(self.store, self.core)
        except Exception as exc:  # noqa: BLE001 - the next boot records it; the rotation refuses meanwhile
            log.warning("analysis: the root's record was not written (%s)", type(exc).__name__)
        if self.embedded:
            # Said as what it is, not as a failure: a healthy embedded start logs no error-looking line.
            log.info("analysis: not applicable on the embedded store (insights.query needs a ClickHouse server)")
            with contextlib.suppress(Exception):  # the catalog falls back to the unconditional entries
                self.tables = await present_in(self.store)
                self.version = version_of(self.tables)
            return
        self._admin = ChClient(self.clickhouse_url, max_size=2)
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None
        for client in (self._analyst, self._admin):
            if client is not None:
                await client.close()

    def provisioner(self) -> Provisioner:
        assert self._admin is not None
        return Provisioner(
            self.store, self._admin, self.leases, self.sealer, self.caps, self.settings.ch_analysis_lease_wait_s, self.allowlist
        )

    async def _loop(self) -> None:
        first = True
        while True:
            try:
                await self.check(write=first and self.settings.ch_analysis_write_entities)
            except asyncio.CancelledError:
                raise
            except Exception:
                # the probe loop outlives any one probe; a failure marks analysis overloaded
                log.exception("analysis: the probe failed")
                self._set("overloaded", "the analysis probe failed unexpectedly")
            first = False
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.interval)

    def _set(self, state: State, reason: str) -> None:
        if (state, reason) != (self.state, self.reason):
            log.info("analysis: %s (%s)", state, reason)
        self.state, self.reason = state, reason

    async def check(self, write: bool = False, repair: bool = True) -> None:
        """One round: the boot write (when asked), the secrets, the probe, and a repair where a
        definite finding is one a write repairs (`repair=False` leaves the finding standing)."""
        if write:
            try:
                report = await self.provisioner().write("boot")
                if report.skipped:
                    log.info("analysis: boot write skipped: %s", report.skipped)
            except ProvisionRefused as exc:
                self._set("unavailable", "the analyst's entities cannot be written: see the server log (loom doctor: analysis.boundary)")
                log.error("analysis: %s", exc.reason)
            except ChError as exc:
                log.warning(
                    "analysis: Loom's ClickHouse user could not write the analyst's entities (%s %s); run loom ch-setup", exc.code, exc.name
                )
            except NoAnswer:
                self._set("overloaded", "ClickHouse did not answer the boot write")
                return
            except Exception as exc:  # noqa: BLE001 - e.g. a user that cannot list profiles: the probe still runs
                log.warning("analysis: the boot write failed (%s); run loom ch-setup as a user with access management", type(exc).__name__)
        result = await self._probe_once()
        if result is None:
            return
        if not result.ok and "canary_key" in result.codes and self._settling():
            # A server still applying a rotation looks like a canary under another key: checked
            # again once three settle times have passed since the row's stored time.
            log.info("analysis: the canary reads nothing within three settle times of a rotation; the repair waits")
            return
        if not result.ok and result.repairable and repair and self.settings.ch_analysis_write_entities:
            stored = await self._stored_version()
            if may_write(stored, version_of(self.tables)):
                try:
                    await self.provisioner().write("repair")
                except Exception as exc:  # noqa: BLE001 - a repair that fails keeps the finding it was for
                    if isinstance(exc, ProvisionRefused):  # e.g. a permissive policy Loom did not write: an admin's
                        log.error("analysis: the repair refused: %s", exc.reason)
                        why = REPAIR_REFUSED
                    elif isinstance(exc, ChError):  # e.g. no access management: loom ch-setup is the repair
                        log.warning("analysis: the repair failed (ClickHouse error %s %s); the finding stands", exc.code, exc.name)
                        why = REPAIR_ELSEWHERE
                    else:
                        log.warning("analysis: the repair failed (%s); the finding stands", type(exc).__name__)
                        why = REPAIR_UNFINISHED
                    self._set("unavailable", f"{result.reason} ({why})")
                    return
                log.warning("analysis: repaired the analyst's entities after: %s", "; ".join(result.findings))
                await self._probe_once()

    def _settling(self) -> bool:
        return bool(self._stored_at) and defers_repair(time.time() - parse_ch_time(self._stored_at).timestamp(), self.settle_s)

    async def _stored_version(self) -> str:
        """The version the main profile carries; empty when Loom's user cannot list profiles."""
        try:
            return await self.provisioner().stored_stamp(PROFILE, f"{self.prefix}{VERSION_STAMP}")
        except StoreError:  # a user without SHOW SETTINGS PROFILES reads no version
            return ""

    async def _probe_once(self) -> ProbeResult | None:
        assert self._admin is not None
        try:
            if not self.prefix:
                self.prefix = await detect_prefix(self._admin)
            self.tables = await self.provisioner().present()
            self.version = version_of(self.tables)
            loaded = await sec.load(self.store, self.sealer)
        except sec.SecretsUnreadable as exc:
            self._set("unavailable", str(exc))
            return None
        except Unavailable as exc:
            if exc.code != ErrorCode.ANALYSIS_UNAVAILABLE:  # the store did not answer
                self._set("overloaded", "ClickHouse did not answer the analysis probe (the store)")
                return None
            self._set("unavailable", exc.message)
            return None
        except (ChError, NoAnswer) as exc:  # the admin client's; the store's are Unavailable above. No driver text
            self._set("overloaded", f"ClickHouse did not answer the analysis probe ({type(exc).__name__})")
            return None
        if loaded is None:
            self._set("unavailable", NO_SECRETS_ROW)
            return None
        secrets_, row = loaded
        self._stored_at = row.written_at
        if secrets_.password != self._password or self._analyst is None:
            if self._analyst is not None:
                await self._analyst.close()
            self._analyst = ChClient(
                self.clickhouse_url,
                user=ANALYST,
                password=secrets_.password,
                database=self.store.database,
                max_size=self.caps.max_concurrent_queries_for_user,
            )
            self._password = secrets_.password
        self._key = secrets_.key
        stored = await self._stored_version()
        current = revision_of(stored) <= revision_of(self.version)
        result = await Prober(self._analyst, self.store.database).run(self._key, self.prefix, self.tables, current)
        self.last_probe = result
        if result.ok:
            self.last_answer_at = time.time()
            self._set("ready", "")
        elif result.definite:
            self.last_answer_at = time.time()
            self._set("unavailable", result.reason)
            log.error("analysis: probe findings: %s", "; ".join(result.findings))
        else:
            self._set("overloaded", result.reason)
        return result

    # ---------------------------------------------------------------- health

    def health(self) -> dict[str, HealthCheck]:
        if self.state == "ready":
            return {"analysis": {"ok": True, "required": False}}
        if self.state == "embedded":
            # Not a failure: the embedded store has no analysis boundary to check.
            return {"analysis": {"applicable": False, "required": False, "reason": self.reason}}
        reason = self.reason
        if self.state in ("starting", "overloaded") and time.time() - self.last_answer_at > 3 * self.interval:
            reason = f"no answer from the analysis probe for over three probe intervals ({reason})"
        return {"analysis": {"ok": False, "required": False, "reason": reason}}

    # ---------------------------------------------------------------- ops

    def catalog(self) -> pb.CatalogResponse:
        tables = self.tables or present_tables({})
        return build_catalog(tables, self.caps, self.row_cap, self.version or version_of(tables), self.state == "ready", self.per_org)

    def _require_ready(self) -> None:
        if self.state == "embedded":
            # No retry fixes the embedded store: an operator points Loom at a ClickHouse server.
            raise unavailable("analysis needs a ClickHouse server", EMBEDDED_REASON, retryable=False)
        if self.state == "unavailable":
            raise unavailable("analysis is unavailable", "the analysis boundary check failed (loom doctor: analysis.boundary)")
        if self.state != "ready":
            raise overloaded("the analysis boundary has not passed a probe yet")

    async def check_namespaces(self, principal: Principal, default_ns: str, names: list[str]) -> tuple[str, ...]:
        namespaces = tuple(dict.fromkeys(names)) if names else ((default_ns,) if default_ns else ())
        if not namespaces:
            raise invalid_field("namespaces", "required (argument, X-Loom-Namespace, or the token's default)")
        for ns in namespaces:
            if not valid_namespace(ns):
                raise invalid_field("namespaces", f"{ns!r} is not a namespace")
        if principal.read_scope:
            claimed = set(principal.roles)
            if "*" in claimed or not claimed <= set(principal.read_scope):
                raise Forbidden(
                    ErrorCode.AUTH_INSUFFICIENT,
                    "insights.query is refused to a token whose read_scope is narrower than its namespaces",
                    {"reason": "read_scope"},
                )
        for ns in namespaces:
            role = await self.auth.role_in(principal, ns)
            if role < Role.VIEWER:
                raise Forbidden(
                    ErrorCode.AUTH_INSUFFICIENT,
                    f"insights.query needs the viewer role in {ns!r}",
                    {"reason": "namespace" if role == Role.NONE else "role", "needed": "viewer", "namespace": ns},
                )
        return namespaces

    async def _current_key(self) -> bytes:
        """The key read from the row before each statement (part 2): a row a rotation deleted, or
        one holding another password than this replica's connection, answers ANALYSIS_UNAVAILABLE
        (and wakes the probe, which takes the new row up), so during a rotation no statement is
        signed with a key the policies no longer hold."""
        try:
            loaded = await sec.load(self.store, self.sealer)
        except sec.SecretsUnreadable:
            loaded = None
        if loaded is None or loaded[0].password != self._password:
            self._wake.set()
            raise unavailable("analysis is unavailable", "the analysis key is changing (loom doctor: analysis.boundary)")
        return loaded[0].key

    async def query(self, principal: Principal, request_id: str, sql: str, namespaces: tuple[str, ...]) -> QueryAnswer:
        self._require_ready()
        assert self._analyst is not None
        key = await self._current_key()
        try:
            return await self.runner.run(self._analyst, self.prefix, key, principal.org, namespaces, request_id, sql)
        except SignInFailed:
            self._wake.set()  # probe again now
            raise


__all__ = ["ALLOWLIST", "Analysis", "QueryAnswer", "caps_from", "statement_ledger"]

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
import secrets as pysecrets
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from loom_core.bus import LeaseStore
from loom_core.errors import ErrorCode, Forbidden, RateLimited, Unavailable, ValidationFailed, invalid_field
from loom_core.identity import Authenticator, Principal
from loom_core.roles import Role
from loom_core.settings import Settings
from loom_core.store import Store

from ..domain.allowlist import ALLOWLIST, Table, present_tables
from ..domain.answers import AUTHENTICATION_FAILED, REQUIRED_PASSWORD, UNKNOWN_USER, classify, safe_message
from ..domain.catalog import build_catalog
from ..domain.entities import ANALYST, PROFILE, VERSION_STAMP, Caps, may_write, revision_of, version_of
from ..domain.scope import Scope, query_id, scope_settings, statement_digest, valid_namespace, wrap
from ..store.clickhouse import ChClient, ChError, NoAnswer
from . import secrets as sec
from .probe import Prober, ProbeResult
from .provisioning import Provisioner, ProvisionRefused, detect_prefix

log = logging.getLogger(__name__)

State = Literal["embedded", "starting", "ready", "unavailable", "overloaded"]
EMBEDDED_REASON = (
    "analysis needs a ClickHouse server: this Loom runs on the embedded store (chDB), which cannot enforce the analyst boundary"
)
MAX_SQL_CHARS = 100_000
RETRY_AFTER_S = 5


def caps_from(settings: Settings) -> Caps:
    return Caps(
        max_execution_time=settings.ch_analysis_max_execution_time_s,
        max_rows_to_read=settings.ch_analysis_max_rows_to_read,
        max_memory_usage=settings.ch_analysis_max_memory_usage,
        max_result_rows=settings.ch_analysis_max_result_rows,
        max_threads=settings.ch_analysis_max_threads,
        max_concurrent_queries_for_user=settings.ch_analysis_max_concurrent_queries,
    )


@dataclass(slots=True)
class QueryAnswer:
    columns: list[dict[str, str]]
    rows: list[list[Any]]
    row_count: int
    truncated: bool
    elapsed_ms: float
    sql_digest: str
    ledger: dict[str, str] = field(default_factory=dict)


def statement_ledger(sql: str) -> dict[str, str]:
    """The identifier keys a call's ledger row carries: the statement's digest and length."""
    return {"sql_digest": statement_digest(sql), "sql_length": str(len(sql))}


def _unavailable(message: str, reason: str) -> Unavailable:
    return Unavailable(ErrorCode.ANALYSIS_UNAVAILABLE, message, {"reason": reason})


def _overloaded(reason: str) -> Unavailable:
    return Unavailable(
        ErrorCode.OVERLOADED, "analysis is busy or starting; retry after 5 s", {"reason": reason, "retry_after_s": RETRY_AFTER_S}
    )


class Analysis:
    def __init__(self, store: Store, leases: LeaseStore, auth: Authenticator, settings: Settings) -> None:
        self.store = store
        self.leases = leases
        self.auth = auth
        self.settings = settings
        self.caps = caps_from(settings)
        self.row_cap = settings.ch_analysis_row_cap
        self.per_org = settings.ch_analysis_org_concurrency
        self.interval = settings.ch_analysis_probe_interval_s
        self.max_attempts = 3
        self.embedded = store.engine != "clickhouse"
        self.state: State = "embedded" if self.embedded else "starting"
        self.reason = EMBEDDED_REASON if self.embedded else "the first analysis probe has not finished"
        self.tables: tuple[Table, ...] = present_tables({}) if self.embedded else ()
        self.version = version_of(self.tables) if self.embedded else ""
        self.prefix = ""
        self._key: bytes = b""
        self._password = ""
        self._admin: ChClient | None = None
        self._analyst: ChClient | None = None
        self._in_flight: dict[str, int] = {}
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self.last_answer_at = time.time()
        self.last_probe: ProbeResult | None = None
        self.sealer = sec.sealer_for(settings)

    # ---------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        if self.embedded:
            log.info("analysis: %s", EMBEDDED_REASON)
            return
        self._admin = ChClient(self.settings.clickhouse_url, max_size=2)
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
        return Provisioner(self.store, self._admin, self.leases, self.sealer, self.caps, self.settings.ch_analysis_lease_wait_s)

    async def _loop(self) -> None:
        first = True
        while True:
            try:
                await self.check(write=first and self.settings.ch_analysis_write_entities)
            except asyncio.CancelledError:
                raise
            except Exception:
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

    async def check(self, write: bool = False) -> None:
        """One round: the boot write (when asked), the secrets, the probe, a repair."""
        if write:
            try:
                report = await self.provisioner().write("boot")
                if report.skipped:
                    log.info("analysis: boot write skipped: %s", report.skipped)
            except ProvisionRefused as exc:
                self._set("unavailable", "the analyst's entities cannot be written: see the server log (loom doctor)")
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
        if not result.ok and result.repairable and self.settings.ch_analysis_write_entities:
            stored = await self._stored_version()
            if may_write(stored, version_of(self.tables)):
                try:
                    await self.provisioner().write("repair")
                    log.warning("analysis: repaired the analyst's entities after: %s", "; ".join(result.findings))
                    await self._probe_once()
                except Exception as exc:  # noqa: BLE001 - a repair that fails keeps the finding it was for
                    log.warning("analysis: the repair failed (%s); the finding stands", type(exc).__name__)

    async def _stored_version(self) -> str:
        """The version the main profile carries; empty when Loom's user cannot list profiles."""
        try:
            return await self.provisioner().stored_stamp(PROFILE, f"{self.prefix}{VERSION_STAMP}")
        except Exception:  # noqa: BLE001 - a user without SHOW SETTINGS PROFILES reads no version
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
        except Exception as exc:  # noqa: BLE001 - ChError, NoAnswer, the store's own errors: no driver text
            self._set("overloaded", f"ClickHouse did not answer the analysis probe ({type(exc).__name__})")
            return None
        if loaded is None:
            self._set("unavailable", "there is no analysis secrets row: run loom ch-setup")
            return None
        secrets_, _row = loaded
        if secrets_.password != self._password or self._analyst is None:
            if self._analyst is not None:
                await self._analyst.close()
            self._analyst = ChClient(
                self.settings.clickhouse_url,
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

    def health(self) -> dict[str, dict[str, Any]]:
        if self.state == "ready":
            return {"analysis": {"ok": True, "required": False}}
        reason = self.reason
        if self.state in ("starting", "overloaded") and time.time() - self.last_answer_at > 3 * self.interval:
            reason = f"no answer from the analysis probe for over three probe intervals ({reason})"
        return {"analysis": {"ok": False, "required": False, "reason": reason}}

    # ---------------------------------------------------------------- ops

    def catalog(self) -> dict[str, Any]:
        tables = self.tables or present_tables({})
        return build_catalog(tables, self.caps, self.row_cap, self.version or version_of(tables), self.state == "ready", self.per_org)

    def _require_ready(self) -> None:
        if self.state == "embedded":
            raise _unavailable("analysis needs a ClickHouse server", EMBEDDED_REASON)
        if self.state == "unavailable":
            raise _unavailable("analysis is unavailable", "the analysis boundary check failed (loom doctor)")
        if self.state != "ready":
            raise _overloaded("the analysis boundary has not passed a probe yet")

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

    async def query(self, principal: Principal, request_id: str, sql: str, namespaces: tuple[str, ...]) -> QueryAnswer:
        self._require_ready()
        if not sql.strip():
            raise invalid_field("sql", "required")
        if len(sql) > MAX_SQL_CHARS:
            raise invalid_field("sql", f"longer than {MAX_SQL_CHARS} characters")
        org = principal.org
        scope = Scope(org, namespaces, 0)
        if scope.reserved:
            raise invalid_field("namespaces", "the reserved scope cannot be queried")
        if self._in_flight.get(org, 0) >= self.per_org:
            raise RateLimited(
                ErrorCode.RATE_LIMITED,
                f"at most {self.per_org} insights.query statements per org run at once on a replica (ch_analysis_org_concurrency)",
                {"cap": "ch_analysis_org_concurrency", "limit": self.per_org, "retry_after_s": 1},
            )
        self._in_flight[org] = self._in_flight.get(org, 0) + 1
        try:
            return await self._run(org, namespaces, request_id, sql)
        finally:
            self._in_flight[org] -= 1
            if not self._in_flight[org]:
                del self._in_flight[org]

    async def _run(self, org: str, namespaces: tuple[str, ...], request_id: str, sql: str) -> QueryAnswer:
        assert self._analyst is not None
        digest = statement_digest(sql)
        wait = float(self.caps.max_execution_time) + 5.0
        # The expiry covers every attempt of the retry ladder at the time cap.
        scope = Scope(org, namespaces, int(time.time() + wait * self.max_attempts + 5))
        qid = query_id(request_id, 1, pysecrets.token_hex(8))
        settings: dict[str, Any] = {**scope_settings(self.prefix, self._key, scope, qid), "replace_running_query": 1}
        statement = wrap(sql, self.row_cap)
        started = time.perf_counter()
        for attempt in range(1, self.max_attempts + 1):
            try:
                result = await self._analyst.run(statement, settings, query_id=qid, wait_s=wait)
                break
            except NoAnswer:
                if attempt == self.max_attempts:
                    raise _overloaded("ClickHouse did not answer the statement") from None
                continue
            except ChError as exc:
                raise self._refusal(exc) from None
        elapsed = (time.perf_counter() - started) * 1000.0
        truncated = len(result.rows) > self.row_cap
        rows = result.rows[: self.row_cap]
        return QueryAnswer(
            columns=[{"name": n, "type": t} for n, t in result.columns],
            rows=rows,
            row_count=len(rows),
            truncated=truncated,
            elapsed_ms=round(elapsed, 3),
            sql_digest=digest,
            ledger={**statement_ledger(sql), "row_count": str(len(rows)), "truncated": str(truncated).lower()},
        )

    def _refusal(self, exc: ChError) -> Exception:
        log.info("analysis: statement refused: ClickHouse error %s %s", exc.code, exc.name)
        if exc.code in (AUTHENTICATION_FAILED, REQUIRED_PASSWORD, UNKNOWN_USER):
            self._wake.set()  # probe again now
            return _unavailable("analysis is unavailable", "the analysis user could not sign in")
        a = classify(exc.code, exc.text)
        if a.kind == "overloaded" or exc.name == "TOO_MANY_SIMULTANEOUS_QUERIES":
            return _overloaded(a.message)
        if a.kind == "unavailable":
            return _unavailable("analysis is unavailable", a.message)
        detail: dict[str, Any] = {"reason": a.kind, "clickhouse_code": exc.code, "clickhouse_error": exc.name}
        if a.cap:
            detail.update(cap=a.cap, narrow=a.narrow)
        text = safe_message(exc.text)
        if text and a.kind in ("invalid", "refused"):
            detail["clickhouse_message"] = text
        message = a.message + (f": {a.narrow}" if a.narrow else "")
        return ValidationFailed(message, detail)


__all__ = ["ALLOWLIST", "Analysis", "QueryAnswer", "caps_from"]

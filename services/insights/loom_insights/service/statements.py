"""Running one caller's statement as the analyst: fairness, the signed scope, retries and the
caller's answer.

- Fairness: at most `per_org` statements of one org run at once on this replica; one more is
  refused with 429 naming the cap (ch_analysis_org_concurrency).
- The scope: the org, the namespaces and an expiry covering every attempt of the retry ladder at
  the time cap, signed with the statement's query id `<request_id>:<n>:<nonce>`.
- Retries: a statement that got no answer is sent again with the same query id and
  `replace_running_query = 1`, so it replaces its own attempt ClickHouse may still run; after the
  last attempt the caller gets OVERLOADED (retry after 5 s).
- Refusals: ClickHouse's error, classified in Loom's words (domain/answers.py); its message only
  when it names nothing of the boundary.
"""

from __future__ import annotations

import logging
import secrets as pysecrets
import time
from dataclasses import dataclass, field
from typing import Any

from loom_core.errors import ErrorCode, RateLimited, Unavailable, ValidationFailed, invalid_field

from ..domain.answers import AUTHENTICATION_FAILED, REQUIRED_PASSWORD, UNKNOWN_USER, classify, safe_message
from ..domain.entities import Caps
from ..domain.scope import Scope, query_id, scope_settings, statement_digest, wrap
from ..store.clickhouse import ChClient, ChError, NoAnswer

log = logging.getLogger(__name__)

MAX_SQL_CHARS = 100_000
RETRY_AFTER_S = 5


class SignInFailed(Unavailable):
    """The analyst could not sign in: ANALYSIS_UNAVAILABLE, and the probe runs again."""

    def __init__(self) -> None:
        super().__init__(ErrorCode.ANALYSIS_UNAVAILABLE, "analysis is unavailable", {"reason": "the analysis user could not sign in"})


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


def unavailable(message: str, reason: str, *, retryable: bool | None = None) -> Unavailable:
    return Unavailable(ErrorCode.ANALYSIS_UNAVAILABLE, message, {"reason": reason}, retryable=retryable)


def overloaded(reason: str) -> Unavailable:
    return Unavailable(
        ErrorCode.OVERLOADED, "analysis is busy or starting; retry after 5 s", {"reason": reason, "retry_after_s": RETRY_AFTER_S}
    )


class StatementRunner:
    def __init__(self, caps: Caps, row_cap: int, per_org: int, max_attempts: int = 3) -> None:
        self.caps = caps
        self.row_cap = row_cap
        self.per_org = per_org
        self.max_attempts = max_attempts
        self._in_flight: dict[str, int] = {}

    def in_flight(self, org: str) -> int:
        return self._in_flight.get(org, 0)

    async def run(
        self, analyst: ChClient, prefix: str, key: bytes, org: str, namespaces: tuple[str, ...], request_id: str, sql: str
    ) -> QueryAnswer:
        if not sql.strip():
            raise invalid_field("sql", "required")
        if len(sql) > MAX_SQL_CHARS:
            raise invalid_field("sql", f"longer than {MAX_SQL_CHARS} characters")
        if Scope(org, namespaces, 0).reserved:
            raise invalid_field("namespaces", "the reserved scope cannot be queried")
        if self._in_flight.get(org, 0) >= self.per_org:
            raise RateLimited(
                ErrorCode.RATE_LIMITED,
                f"at most {self.per_org} insights.query statements per org run at once on a replica (ch_analysis_org_concurrency)",
                {"cap": "ch_analysis_org_concurrency", "limit": self.per_org, "retry_after_s": 1},
            )
        self._in_flight[org] = self._in_flight.get(org, 0) + 1
        try:
            return await self._run(analyst, prefix, key, org, namespaces, request_id, sql)
        finally:
            self._in_flight[org] -= 1
            if not self._in_flight[org]:
                del self._in_flight[org]

    async def _run(
        self, analyst: ChClient, prefix: str, key: bytes, org: str, namespaces: tuple[str, ...], request_id: str, sql: str
    ) -> QueryAnswer:
        wait = float(self.caps.max_execution_time) + 5.0
        # The expiry covers every attempt of the retry ladder at the time cap.
        scope = Scope(org, namespaces, int(time.time() + wait * self.max_attempts + 5))
        qid = query_id(request_id, 1, pysecrets.token_hex(8))
        settings: dict[str, Any] = {**scope_settings(prefix, key, scope, qid), "replace_running_query": 1}
        statement = wrap(sql, self.row_cap)
        started = time.perf_counter()
        for attempt in range(1, self.max_attempts + 1):
            try:
                result = await analyst.run(statement, settings, query_id=qid, wait_s=wait)
                break
            except NoAnswer:
                if attempt == self.max_attempts:
                    raise overloaded("ClickHouse did not answer the statement") from None
            except ChError as exc:
                raise refusal(exc) from None
        elapsed = (time.perf_counter() - started) * 1000.0
        truncated = len(result.rows) > self.row_cap
        rows = result.rows[: self.row_cap]
        return QueryAnswer(
            columns=[{"name": n, "type": t} for n, t in result.columns],
            rows=rows,
            row_count=len(rows),
            truncated=truncated,
            elapsed_ms=round(elapsed, 3),
            sql_digest=statement_digest(sql),
            ledger={**statement_ledger(sql), "row_count": str(len(rows)), "truncated": str(truncated).lower()},
        )


def refusal(exc: ChError) -> Exception:
    """A ClickHouse error as the caller's answer, in Loom's words."""
    log.info("analysis: statement refused: ClickHouse error %s %s", exc.code, exc.name)
    if exc.code in (AUTHENTICATION_FAILED, REQUIRED_PASSWORD, UNKNOWN_USER):
        return SignInFailed()
    a = classify(exc.code, exc.text)
    if a.kind == "overloaded" or exc.name == "TOO_MANY_SIMULTANEOUS_QUERIES":
        return overloaded(a.message)
    if a.kind == "unavailable":
        return unavailable("analysis is unavailable", a.message)
    detail: dict[str, Any] = {"reason": a.kind, "clickhouse_code": exc.code, "clickhouse_error": exc.name}
    if a.cap:
        detail.update(cap=a.cap, narrow=a.narrow)
    text = safe_message(exc.text)
    if text and a.kind in ("invalid", "refused"):
        detail["clickhouse_message"] = text
    return ValidationFailed(a.message + (f": {a.narrow}" if a.narrow else ""), detail)

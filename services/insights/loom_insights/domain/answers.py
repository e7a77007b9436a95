"""What a ClickHouse answer means to a caller, in Loom's words.

A statement's error is classified by ClickHouse's numeric code: a cap the profile holds (which
cap, and how to narrow), a statement the boundary refuses, a statement ClickHouse cannot run as
written, the server being out of memory or busy, or the analyst being unable to sign in. The
ClickHouse message is passed on only when it names none of the scope settings, the policy's
functions or the key's wrapping (`safe_message`); the rest goes to the server log.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from .entities import CAP_MEANINGS

Kind = Literal["cap", "refused", "invalid", "overloaded", "unavailable"]

# ClickHouse error codes (src/Common/ErrorCodes.cpp).
TOO_MANY_ROWS = 158
TIMEOUT_EXCEEDED = 159
TOO_MANY_ROWS_OR_BYTES = 396
MEMORY_LIMIT_EXCEEDED = 241
TOO_MANY_SIMULTANEOUS_QUERIES = 202
QUERY_WAS_CANCELLED = 394
READONLY = 164
ACCESS_DENIED = 497
SETTING_CONSTRAINT_VIOLATION = 452
UNKNOWN_SETTING = 115
AUTHENTICATION_FAILED = 516
REQUIRED_PASSWORD = 194
UNKNOWN_USER = 192
SYNTAX_ERROR = 62
BAD_ARGUMENTS = 36

_CAP_BY_CODE = {
    TIMEOUT_EXCEEDED: "max_execution_time",
    MEMORY_LIMIT_EXCEEDED: "max_memory_usage",
}
_NARROW = {
    "max_execution_time": "filter on the sorting key (org, namespace and a time range), aggregate instead of listing rows, or read fewer tables",
    "max_rows_to_read": "add a time range or a narrower WHERE on org/namespace/time so fewer rows are read",
    "max_memory_usage": "aggregate on fewer keys, drop wide columns, or add a narrower WHERE",
    "max_result_rows": "aggregate, or add LIMIT and a narrower WHERE",
    "max_threads": "leave max_threads at its default or lower it",
    "max_concurrent_queries_for_user": "retry shortly; every org's statements share this cap",
}

# Anything naming the scope, the policy's signature arithmetic or the key's wrapping.
_UNSAFE = re.compile(
    r"loom_(org|ns|exp|sig|qid|version|caps|probe)|getSetting|initialQueryID|decrypt|encrypt|HIDDEN|SHA256|unhex|hex\(", re.I
)
_CAP_IN_TEXT = re.compile(
    r"(max_execution_time|max_rows_to_read|max_memory_usage|max_result_rows|max_threads|max_concurrent_queries_for_user)"
)


@dataclass(frozen=True, slots=True)
class Answer:
    kind: Kind
    message: str
    cap: str = ""
    narrow: str = ""


def safe_message(text: str) -> str:
    """ClickHouse's message when it names nothing of the boundary; else empty."""
    if not text or _UNSAFE.search(text):
        return ""
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first[:500]


_MEANINGS = {
    ACCESS_DENIED: "a missing privilege (run loom ch-setup as a user with access management)",
    AUTHENTICATION_FAILED: "the analyst user cannot sign in with the stored password (run loom ch-setup)",
    REQUIRED_PASSWORD: "the analyst user cannot sign in with the stored password (run loom ch-setup)",
    UNKNOWN_USER: "the analyst user does not exist (run loom ch-setup)",
    BAD_ARGUMENTS: "the server refused an argument, e.g. a password its rules refuse (run loom ch-setup again)",
    UNKNOWN_SETTING: "the server refused a setting (check custom_settings_prefixes)",
}


def health_text(code: int | None, name: str) -> str:
    """A ClickHouse error as /v1/health shows it: its code and name, and what it means for a
    cause Loom knows. No driver text, no policy or database names."""
    head = f"ClickHouse error {code} {name}" if code is not None else f"ClickHouse error ({name})"
    meaning = _MEANINGS.get(code or 0)
    return f"{head}: {meaning}" if meaning else head


def classify(code: int | None, text: str) -> Answer:
    """The caller's answer for a ClickHouse error."""
    name = _CAP_BY_CODE.get(code or 0, "")
    if code in (TOO_MANY_ROWS, TOO_MANY_ROWS_OR_BYTES):
        found = _CAP_IN_TEXT.search(text or "")
        name = found.group(1) if found else ("max_result_rows" if "result" in (text or "").lower() else "max_rows_to_read")
    if code == TOO_MANY_SIMULTANEOUS_QUERIES:
        name = "max_concurrent_queries_for_user"
    if code == MEMORY_LIMIT_EXCEEDED and "user" not in (text or "").lower() and "query" not in (text or "").lower():
        return Answer("overloaded", "ClickHouse is short of memory; retry in a few seconds")
    if name:
        return Answer("cap", f"the statement hit the analysis cap {name} ({CAP_MEANINGS[name]})", name, _NARROW[name])
    if code in (AUTHENTICATION_FAILED, REQUIRED_PASSWORD, UNKNOWN_USER):
        return Answer("unavailable", "the analysis user could not sign in")
    if code == QUERY_WAS_CANCELLED:
        return Answer("unavailable", "the statement was ended by the server")
    if code in (SETTING_CONSTRAINT_VIOLATION, READONLY):
        found = _CAP_IN_TEXT.search(text or "")
        if found:
            cap = found.group(1)
            return Answer("cap", f"SETTINGS may not raise the analysis cap {cap} ({CAP_MEANINGS[cap]})", cap, _NARROW[cap])
        return Answer("refused", "the statement's SETTINGS change a setting the analysis profile holds fixed")
    if code == ACCESS_DENIED:
        return Answer("refused", "the statement reads something outside the analysis allowlist (see insights.catalog)")
    return Answer("invalid", "ClickHouse could not run the statement")

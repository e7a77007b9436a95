"""Argument rules of the task inbox ops (pure; each failure is a 422 naming the field)."""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from loom_core.errors import ValidationFailed, count_or_default
from loom_core.errors import invalid_field as invalid_field  # re-exported: the services refuse through `v.invalid_field`

from . import model

_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
_KIND = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,62}$")
_SUBJECT = re.compile(r"^(user|sa):[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}$")
_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}$")
_PATH = re.compile(r"^[A-Za-z0-9_-]{1,64}(\.[A-Za-z0-9_-]{1,64}){0,7}$")
_TASK_ID = re.compile(r"^[a-z0-9]{8,64}$")

MAX_TITLE = 500
MAX_REASON = 2000
MAX_NOTE = 4000
MAX_KEY = 200
MAX_ORIGIN = 500
MAX_JSON_BYTES = 64 * 1024
MAX_POSTERS = 200
MAX_EVIDENCE = 20
MAX_LEASE_SECONDS = 7 * 86400


def inbox_name(value: str, field: str = "inbox") -> str:
    if not value:
        raise invalid_field(field, "required")
    if not _NAME.match(value):
        raise invalid_field(field, "lower-case letters, digits, '-' and '_', starting with a letter or digit, at most 63")
    return value


def kind(value: str, field: str = "kind", *, allow_any: bool = False) -> str:
    if allow_any and value == "*":
        return value
    if not value:
        raise invalid_field(field, "required")
    if not _KIND.match(value):
        raise invalid_field(field, "lower-case letters, digits, '.', '-' and '_', at most 63")
    return value


def subject(value: str, field: str) -> str:
    if not _SUBJECT.match(value):
        raise invalid_field(field, "a subject is user:<id> or sa:<name>")
    return value


def poster_key(value: str, field: str = "poster") -> str:
    """A trust row's poster: a subject, an agent label, or "*"."""
    if value == "*" or _SUBJECT.match(value) or (_LABEL.match(value) and ":" not in value):
        return value
    raise invalid_field(field, "a subject (sa:<name>, user:<id>), an agent label, or *")


def posters(values: Iterable[str]) -> tuple[str, ...]:
    out = tuple(dict.fromkeys(values))
    if len(out) > MAX_POSTERS:
        raise invalid_field("posters", f"at most {MAX_POSTERS}")
    for i, p in enumerate(out):
        # Outside posters are keyed on their verified subject: a label would let anyone in.
        subject(p, f"posters[{i}]")
    return out


def disclosure_levels(values: Sequence[str]) -> tuple[str, ...]:
    if not values:
        return model.DISCLOSURES
    out = tuple(dict.fromkeys(values))
    for v in out:
        if v not in model.DISCLOSURES:
            raise ValidationFailed(
                f"accept_disclosure: {v!r} is not a disclosure level",
                {"field": "accept_disclosure", "reason": "unknown level", "accepted": list(model.DISCLOSURES)},
            )
    return out


def mode(value: str) -> str:
    if value not in model.MODES:
        raise ValidationFailed(
            "mode: one of deny, review, auto", {"field": "mode", "reason": "unknown mode", "accepted": list(model.MODES)}
        )
    return value


def evidence_paths(values: Iterable[str]) -> tuple[str, ...]:
    out = tuple(dict.fromkeys(values))
    if len(out) > MAX_EVIDENCE:
        raise invalid_field("require_evidence", f"at most {MAX_EVIDENCE} paths")
    for i, p in enumerate(out):
        if not _PATH.match(p):
            raise invalid_field(f"require_evidence[{i}]", "a dotted path into the brief, e.g. inputs.finding_id")
    return out


def lease_seconds(value: int, default: int, field: str = "lease_seconds") -> int:
    return count_or_default(field, value, default, MAX_LEASE_SECONDS)


def wait_seconds(value: int) -> int:
    if value < 0 or value > model.MAX_WAIT_SECONDS:
        raise invalid_field("wait_seconds", f"between 0 and {model.MAX_WAIT_SECONDS}")
    return value


def priority(value: int) -> int:
    if value == 0:
        return model.DEFAULT_PRIORITY
    if not model.MIN_PRIORITY <= value <= model.MAX_PRIORITY:
        raise invalid_field("priority", f"between {model.MIN_PRIORITY} (most urgent) and {model.MAX_PRIORITY}")
    return value


def disclosure(value: str, accepted: Sequence[str]) -> str:
    level = value or model.DEFAULT_DISCLOSURE
    if level not in accepted:
        raise ValidationFailed(
            f"disclosure: this inbox accepts {', '.join(accepted)}",
            {"field": "disclosure", "reason": "not accepted", "accepted": list(accepted)},
        )
    return level


def text(value: str, field: str, maximum: int, *, required: bool = False) -> str:
    value = value.strip()
    if required and not value:
        raise invalid_field(field, "required")
    if len(value) > maximum:
        raise invalid_field(field, f"at most {maximum} characters")
    return value


def reason(value: str, *, required: bool) -> str:
    """Every move off triage -> todo -> in_progress -> done carries a reason."""
    return text(value, "reason", MAX_REASON, required=required)


def blocked_on(value: str) -> str:
    if value not in model.BLOCKED_ON:
        raise ValidationFailed(
            "blocked_on: one of sender, human, external",
            {"field": "blocked_on", "reason": "unknown value", "accepted": list(model.BLOCKED_ON)},
        )
    return value


def payload(value: dict[str, Any], field: str) -> dict[str, Any]:
    if not value:  # most briefs and outcomes: nothing to measure
        return value
    size = len(json.dumps(value, separators=(",", ":"), default=str).encode())
    if size > MAX_JSON_BYTES:
        raise invalid_field(field, f"at most {MAX_JSON_BYTES} bytes of JSON")
    return value


def task_id(value: str) -> str:
    if not _TASK_ID.match(value):
        raise invalid_field("task_id", "required: a task id as task.create returned it")
    return value


def fence(value: int) -> int:
    if value <= 0:
        raise invalid_field("fence", "required: the fence task.pull or task.claim returned")
    return value


def idempotency_key(value: str) -> str:
    if len(value) > MAX_KEY:
        raise invalid_field("idempotency_key", f"at most {MAX_KEY} characters")
    return value


def parse_time(value: str, field: str) -> float | None:
    """RFC 3339 / ISO 8601 (a time without an offset is UTC) -> epoch seconds; "" -> None."""
    if not value:
        return None
    try:
        dt = datetime.fromisoformat(value.strip())
    except ValueError:
        raise invalid_field(field, "an RFC 3339 time, e.g. 2026-01-02T03:04:05Z") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


def format_time(value: float | None) -> str:
    """Epoch seconds -> RFC 3339 in UTC with microseconds ("" for unset): exactly
    `datetime.fromtimestamp(value, UTC).isoformat(timespec="microseconds")` with a Z, which rounds
    the fraction half to even in doubles as done here; the whole second's text is cached, since
    every task answer formats several times and most fall in the same few seconds."""
    if value is None or value == 0:
        return ""
    frac, whole = math.modf(value)
    micros = round(frac * 1e6)
    if micros >= 1_000_000:
        whole, micros = whole + 1, micros - 1_000_000
    elif micros < 0:
        whole, micros = whole - 1, micros + 1_000_000
    return f"{_utc_second(int(whole))}.{micros:06d}Z"


@functools.lru_cache(maxsize=4096)
def _utc_second(second: int) -> str:
    return datetime.fromtimestamp(second, UTC).replace(tzinfo=None).isoformat(timespec="seconds")


MAX_BATCH = 100


def batch_size(n: int, field: str) -> int:
    """A batch op's item count: 1..100."""
    if n < 1 or n > MAX_BATCH:
        raise invalid_field(field, f"between 1 and {MAX_BATCH} items")
    return n

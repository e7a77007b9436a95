"""Durations (`30s`, `15m`, `1h`, `7d`) and instants as integer microseconds since the epoch.

Integers, not floats, so an event exactly at a window's edge compares exactly."""

from __future__ import annotations

import calendar
import functools
import re
from datetime import UTC, datetime

US = 1_000_000
_DURATION = re.compile(r"^([1-9][0-9]{0,8})(s|m|h|d)$")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> int:
    """`30s` -> 30 seconds. Raises ValueError on anything else."""
    m = _DURATION.match(text.strip()) if isinstance(text, str) else None
    if m is None:
        raise ValueError("a duration like 30s, 15m, 1h or 7d")
    return int(m.group(1)) * _UNIT[m.group(2)]


def ch_to_us(text: str) -> int:
    """ClickHouse DateTime64(6) text (`2026-01-02 03:04:05.123456`, UTC) -> epoch microseconds."""
    if len(text) == 26 and text[19] == ".":
        return _ch_seconds(text[:19]) * US + int(text[20:])  # the ledger's own form, microseconds in full
    clock, _, frac = text.partition(".")
    micros = int((frac + "000000")[:6]) if frac else 0
    return _ch_seconds(clock) * US + micros


@functools.lru_cache(maxsize=64)
def _ch_seconds(clock: str) -> int:
    """`2026-01-02 03:04:05` (UTC) -> epoch seconds; the ledger's rows arrive a second at a time."""
    date, _, rest = clock.partition(" ")
    y, mo, d = (int(x) for x in date.split("-"))
    h, mi, s = (int(x) for x in rest.split(":"))
    return calendar.timegm((y, mo, d, h, mi, s, 0, 0, 0))


def us_to_iso(us: int) -> str:
    """Epoch microseconds -> RFC 3339 UTC with microseconds."""
    if us <= 0:
        return ""
    secs, micros = divmod(us, US)
    return datetime.fromtimestamp(secs, UTC).replace(microsecond=micros).isoformat().replace("+00:00", "Z")


def us_to_ch(us: int) -> str:
    """Epoch microseconds -> ClickHouse DateTime64(6) text (UTC)."""
    secs, micros = divmod(us, US)
    return f"{_ch_clock(secs)}.{micros:06d}"


@functools.lru_cache(maxsize=64)
def _ch_clock(secs: int) -> str:
    """Epoch seconds -> `2026-01-02 03:04:05` (UTC); the gate's decision rows come a second at a time."""
    return datetime.fromtimestamp(secs, UTC).strftime("%Y-%m-%d %H:%M:%S")


def parse_instant(text: str, now_us: int) -> int:
    """An RFC 3339 instant, or a duration back from now (`1h` = an hour ago)."""
    text = text.strip()
    try:
        return now_us - parse_duration(text) * US
    except ValueError:
        pass
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError("an RFC 3339 instant or a duration like 1h") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    dt = dt.astimezone(UTC)
    return calendar.timegm(dt.timetuple()) * US + dt.microsecond

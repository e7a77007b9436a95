"""Instants as the identity ops answer them: RFC 3339, UTC, with `Z`."""

from __future__ import annotations

from datetime import UTC, datetime

# Epoch seconds already printed (a token's expiry, printed by every auth.whoami that token makes).
_EPOCH_TEXT: dict[int | float, str] = {}
_EPOCH_TEXT_MAX = 4096


def rfc3339(value: str | datetime | int | float) -> str:
    """`2026-11-30 18:08:44.948241` (ClickHouse DateTime64 text, UTC), a datetime or epoch
    seconds -> `2026-11-30T18:08:44.948241Z`; an empty value stays empty."""
    if isinstance(value, int | float):
        text = _EPOCH_TEXT.get(value)
        if text is None:
            if len(_EPOCH_TEXT) >= _EPOCH_TEXT_MAX:
                _EPOCH_TEXT.clear()
            text = _EPOCH_TEXT[value] = _utc_text(datetime.fromtimestamp(value, UTC))
        return text
    if isinstance(value, datetime):
        dt = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    else:
        text = value.strip()
        if not text:
            return ""
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=UTC)
    return _utc_text(dt)


def _utc_text(dt: datetime) -> str:
    return dt.astimezone(UTC).isoformat().replace("+00:00", "Z")

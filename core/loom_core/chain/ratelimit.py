"""Rate classes: a token bucket per (org, subject, class) in each replica."""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..errors import RateLimited
from ..settings import Settings


@dataclass(slots=True)
class _Bucket:
    tokens: float
    stamp: float


class RateLimiter:
    def __init__(self, settings: Settings) -> None:
        self.per_minute = {
            "read": settings.rate_read_per_minute,
            "write": settings.rate_write_per_minute,
            "admin": settings.rate_admin_per_minute,
            "heavy": settings.rate_heavy_per_minute,
            "insights": settings.rate_insights_per_minute,
            "chat": settings.rate_chat_per_minute,
        }
        self._buckets: dict[tuple[str, str, str], _Bucket] = {}

    def check(self, org: str, subject: str, rate_class: str) -> None:
        capacity = float(self.per_minute.get(rate_class, self.per_minute["read"]))
        rate = capacity / 60.0
        key = (org, subject, rate_class)
        now = time.monotonic()
        b = self._buckets.get(key)
        if b is None:
            b = self._buckets[key] = _Bucket(capacity, now)
        b.tokens = min(capacity, b.tokens + (now - b.stamp) * rate)
        b.stamp = now
        if b.tokens < 1.0:
            retry = (1.0 - b.tokens) / rate if rate > 0 else 60.0
            raise RateLimited(detail={"rate_class": rate_class, "retry_after_s": round(retry, 3)})
        b.tokens -= 1.0

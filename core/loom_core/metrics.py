"""Prometheus metrics shared by every door (one registry per process)."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

REQUESTS = Counter("loom_requests_total", "Op calls by op, transport and result code.", ["op", "transport", "code"])
LATENCY = Histogram(
    "loom_request_latency_seconds",
    "Op latency through the chain (handler included), by op and code.",
    ["op", "code"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)

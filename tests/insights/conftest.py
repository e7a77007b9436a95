"""The insights tests' header line: whether the isolation proof runs against a server."""

from __future__ import annotations

import os

import pytest


def pytest_report_header(config: pytest.Config) -> str:
    url = os.environ.get("LOOM_TEST_CLICKHOUSE_URL", "")
    if url:
        return "insights isolation proof: against LOOM_TEST_CLICKHOUSE_URL"
    return "insights isolation proof: SKIPPED (LOOM_TEST_CLICKHOUSE_URL is not set; it needs a ClickHouse server)"

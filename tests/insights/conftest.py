"""The insights tests' header line: whether the isolation proof runs against a server."""

from __future__ import annotations

import os

import pytest


def pytest_report_header(config: pytest.Config) -> str:
    url = os.environ.get("LOOM_TEST_CLICKHOUSE_URL", "")
    if url:
        return "insights isolation proof and key rotation: against LOOM_TEST_CLICKHOUSE_URL"
    return "insights isolation proof and key rotation: SKIPPED (LOOM_TEST_CLICKHOUSE_URL is not set; they need a ClickHouse server)"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Said at the end of every run too (the header is hidden under -q)."""
    if os.environ.get("LOOM_TEST_CLICKHOUSE_URL"):
        return
    suites = ("test_isolation", "test_rotation_server")
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if any(s in getattr(r, "nodeid", "") for s in suites)]
    if skipped:
        terminalreporter.write_line(
            f"insights isolation proof and key rotation: {len(skipped)} cases SKIPPED"
            " (set LOOM_TEST_CLICKHOUSE_URL to a ClickHouse server to run them)",
            yellow=True,
        )

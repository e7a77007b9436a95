"""`loom doctor` as an operator runs it, on the embedded store: while `loom up` holds the data
dir it asks that process over its admin socket (chDB opens one process per data dir), and with no
server there it opens the store itself and says NATS could not be checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from loom_core.bus.natsserver import free_port

from tests.gateway.test_cli import DataDir, loom_up, run_cli

pytestmark = pytest.mark.slow


@pytest.mark.timeout(300)
async def test_loom_doctor_asks_the_running_server_and_without_one_says_what_it_could_not_check(tmp_path: Path) -> None:
    d = DataDir(tmp_path / "data", free_port())
    async with loom_up(d) as up:
        code, out = await run_cli(d, "doctor", "--json")
        report = json.loads(out)
        assert code == 0 and report["status"] == "healthy" and report["exit_code"] == 0, out
        verdicts = {c["name"]: c["verdict"] for c in report["checks"]}
        assert verdicts["nats.reachable"] == "ok" and verdicts["nats.stream.LOOM_TASK_STATE"] == "ok"
        assert verdicts["analysis.boundary"] == "not_applicable" and verdicts["librechat.reachable"] == "not_applicable"
        assert verdicts["secrets.file"] == "ok" and verdicts["policy.mode"] == "ok"
        code, text = await run_cli(d, "doctor")
        assert code == 0 and text.startswith("loom doctor: healthy"), text
        stopped, _ = await up.stop()
        assert stopped == 0
    code, text = await run_cli(d, "doctor")
    assert code == 2, text
    assert "no `loom up` runs on LOOM_DATA_DIR" in text and "clickhouse.reachable" in text
    weak = DataDir(d.path, d.port, secret="short")
    code, text = await run_cli(weak, "doctor")
    assert code == 1 and "FAULT secrets.root" in text and "see: docs/operations/doctor/weak-root-secret.md" in text, text

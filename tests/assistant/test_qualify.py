"""The qualification harness (librechat/qualify/): against a real LibreChat when
LOOM_QUALIFY_LIBRECHAT_URL is set (skipped, visibly, otherwise), and against the emulator here
so the harness itself is known to work and to tell the two placeholder behaviours apart."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from librechat.qualify.harness import qualify

from .conftest import Asker, Bench
from .emulator import Turn


async def grants(turn: Turn) -> None:
    await turn.call("grants.list", {})
    await turn.say("ok")


@pytest.mark.skipif(
    not os.environ.get("LOOM_QUALIFY_LIBRECHAT_URL"), reason="LOOM_QUALIFY_LIBRECHAT_URL is not set: no real LibreChat to qualify"
)
async def test_a_real_librechat_qualifies() -> None:
    env = os.environ.get
    report = await qualify(
        env("LOOM_QUALIFY_LIBRECHAT_URL"),
        loom_url=env("LOOM_QUALIFY_LOOM_URL"),
        loom_token=env("LOOM_QUALIFY_LOOM_TOKEN"),
        logs_dir=Path(env("LOOM_QUALIFY_LIBRECHAT_LOGS", "")) if env("LOOM_QUALIFY_LIBRECHAT_LOGS") else None,
        db_dump=Path(env("LOOM_QUALIFY_MONGO_DUMP", "")) if env("LOOM_QUALIFY_MONGO_DUMP") else None,
    )
    print(report.render())
    assert report.ok, report.render()


async def test_without_a_url_every_case_says_it_skipped() -> None:
    report = await qualify(None)
    assert report.cases and all(c.outcome == "skipped" and "LOOM_QUALIFY_LIBRECHAT_URL" in c.note for c in report.cases)


@pytest.mark.parametrize("version", ["0.8.8", "0.8.7"])
async def test_the_harness_qualifies_the_emulator_and_names_its_placeholder_behaviour(
    bench: Bench, asker: Asker, tmp_path: Path, version: str
) -> None:
    bench.emu.version = version
    bench.emu.script = grants
    logs = tmp_path / "logs"
    logs.mkdir()
    bench.emu.sign_ins.clear()  # each run signs in three times; LibreChat allows seven in five minutes
    report = await qualify(bench.emu_url, loom_url=asker.base_url, loom_token=asker.token, logs_dir=logs)
    (logs / "librechat.log").write_text("\n".join(bench.emu.log))
    bench.emu.sign_ins.clear()
    again = await qualify(bench.emu_url, logs_dir=logs)
    assert report.ok, report.render()
    assert [c.name for c in again.cases if c.outcome == "failed"] == [], again.render()
    assert report.placeholder.startswith("v0.8.8" if version == "0.8.8" else "v0.8.7")

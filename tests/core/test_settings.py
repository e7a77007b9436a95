"""One definition of every LOOM_* setting, and docs/configuration.md rendered from it."""

from __future__ import annotations

from pathlib import Path

import pytest
from loom_core.settings import Settings, render_markdown

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_configuration_doc_matches_the_settings_definition() -> None:
    assert DOC.exists(), "run ./loom config docs --output docs/configuration.md"
    assert DOC.read_text() == render_markdown(), "docs/configuration.md is stale: run ./loom config docs --output docs/configuration.md"


def test_every_setting_has_a_description() -> None:
    missing = [name for name, f in Settings.model_fields.items() if not (f.description or "").strip()]
    assert missing == []


def test_every_setting_is_listed_as_an_environment_variable() -> None:
    text = render_markdown()
    for name in Settings.model_fields:
        assert f"`LOOM_{name.upper()}`" in text


def test_settings_are_read_from_loom_environment_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOOM_HTTP_PORT", "9123")
    monkeypatch.setenv("LOOM_POLICY_MODE", "shadow")
    s = Settings()
    assert s.http_port == 9123
    assert s.policy_mode == "shadow"

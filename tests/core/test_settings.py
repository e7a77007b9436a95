"""One definition of every LOOM_* setting, and docs/configuration.md rendered from it."""

from __future__ import annotations

from pathlib import Path

import pytest
from loom_core.settings import PlaneSettings, Settings, plane_settings_classes, render_markdown
from loom_policy.settings import PolicySettings

from tests.conftest import make_settings

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_configuration_doc_matches_the_settings_definition() -> None:
    assert DOC.exists(), "run ./loom config docs --output docs/configuration.md"
    assert DOC.read_text() == render_markdown(), "docs/configuration.md is stale: run ./loom config docs --output docs/configuration.md"


def _all_settings() -> dict[str, type[Settings] | type[PlaneSettings]]:
    out: dict[str, type[Settings] | type[PlaneSettings]] = {n: Settings for n in Settings.model_fields if n != "plane_overrides"}
    for cls in plane_settings_classes().values():
        out.update(dict.fromkeys(cls.model_fields, cls))
    return out


def test_every_setting_has_a_description() -> None:
    missing = [name for name, cls in _all_settings().items() if not (cls.model_fields[name].description or "").strip()]
    assert missing == []


def test_every_setting_core_or_plane_is_listed_as_an_environment_variable() -> None:
    text = render_markdown()
    for name in _all_settings():
        assert f"`LOOM_{name.upper()}`" in text


def test_no_plane_setting_shadows_a_core_setting_or_another_planes() -> None:
    seen: dict[str, str] = {n: "core" for n in Settings.model_fields}
    for plane, cls in plane_settings_classes().items():
        for name in cls.model_fields:
            assert name not in seen, f"{plane}.{name} is also {seen[name]}'s"
            seen[name] = plane


def test_policy_settings_live_with_the_policy_plane() -> None:
    assert plane_settings_classes()["policy"] is PolicySettings
    assert "policy_mode" not in Settings.model_fields


def test_a_test_overrides_a_plane_setting_like_a_core_one(tmp_path: Path) -> None:
    s = make_settings(tmp_path, policy_mode="enforce", http_port=1234)
    assert s.http_port == 1234
    assert s.plane(PolicySettings).policy_mode == "enforce"
    assert Settings().plane(PolicySettings).policy_mode == "off"


def test_settings_are_read_from_loom_environment_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOOM_HTTP_PORT", "9123")
    monkeypatch.setenv("LOOM_POLICY_MODE", "shadow")
    s = Settings()
    assert s.http_port == 9123
    assert s.plane(PolicySettings).policy_mode == "shadow"

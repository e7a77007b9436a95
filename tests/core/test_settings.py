"""One definition of every LOOM_* setting, and docs/configuration.md rendered from it."""

from __future__ import annotations

from pathlib import Path

import pytest
from loom_assistant.settings import AssistantSettings
from loom_core.settings import PlaneSettings, Settings, plane_settings_classes, render_markdown, setting_names
from loom_decisions.settings import DecisionsSettings
from loom_gateway.settings import GatewaySettings
from loom_help.settings import HelpSettings
from loom_insights.settings import InsightsSettings
from loom_policy.settings import PolicySettings
from loom_tasks.settings import TasksSettings

from tests.conftest import make_settings

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_the_bus_and_store_settings_default_to_their_own_constants() -> None:
    """Settings writes the bus's and the embedded store's defaults as literals (importing the bus
    loads faststream, the store chDB, into every CLI command): they are the ones connect_bus and
    EmbeddedStore.open take when not given them."""
    from loom_core.bus.nats import GRACEFUL_STOP_SECONDS, NATS_REQUEST_TIMEOUT_SECONDS
    from loom_core.store.embedded import THREAD_NICE

    fields = Settings.model_fields
    assert fields["nats_request_timeout_seconds"].default == NATS_REQUEST_TIMEOUT_SECONDS
    assert fields["nats_graceful_stop_seconds"].default == GRACEFUL_STOP_SECONDS
    assert fields["chdb_thread_nice"].default == THREAD_NICE


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


# One field each plane owns and a value that is not its default.
OWNED: dict[str, tuple[type[PlaneSettings], str, object]] = {
    "tasks": (TasksSettings, "task_sweep_interval_seconds", 0.2),
    "help": (HelpSettings, "help_docs_dir", "/srv/docs"),
    "insights": (InsightsSettings, "ch_analysis_row_cap", 7),
    "decisions": (DecisionsSettings, "embedding_provider", "openai"),
    "assistant": (AssistantSettings, "assistant_librechat_url", "http://librechat:3080"),
    "gateway": (GatewaySettings, "gateway_transport", "grpc"),
}


@pytest.mark.parametrize("plane", sorted(OWNED))
def test_each_planes_settings_live_with_the_plane_not_in_core(plane: str, tmp_path: Path) -> None:
    cls, field, value = OWNED[plane]
    assert plane_settings_classes()[plane] is cls
    assert not set(cls.model_fields) & set(Settings.model_fields), "a plane's setting is still a core field"
    s = make_settings(tmp_path, **{field: value})
    assert s.plane(cls).model_dump()[field] == value


def test_core_keeps_only_shared_infrastructure() -> None:
    plane_prefixes = ("task_", "help_", "ch_analysis_", "assistant_", "embedding_", "decision_", "memory_", "gateway_", "policy_")
    assert [n for n in Settings.model_fields if n.startswith(plane_prefixes)] == []


def test_setting_names_lists_core_and_plane_variables_once() -> None:
    names = setting_names()
    assert "LOOM_JWT_SECRET" in names and "LOOM_TASK_PULL_POLL_SECONDS" in names and "LOOM_ASSISTANT_BRIDGE_URL" in names
    assert "LOOM_PLANE_OVERRIDES" not in names
    assert len(names) == len(set(names))


def test_a_test_overrides_a_plane_setting_like_a_core_one(tmp_path: Path) -> None:
    s = make_settings(tmp_path, policy_mode="enforce", http_port=1234)
    assert s.http_port == 1234
    assert s.plane(PolicySettings).policy_mode == "enforce"
    assert Settings().plane(PolicySettings).policy_mode == "off"


def test_settings_are_read_from_loom_environment_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOOM_HTTP_PORT", "9123")
    monkeypatch.setenv("LOOM_POLICY_MODE", "shadow")
    monkeypatch.setenv("LOOM_TASK_STATE_REPLICAS", "3")
    monkeypatch.setenv("LOOM_EMBEDDING_DIMENSIONS", "768")
    s = Settings()
    assert s.http_port == 9123
    assert s.plane(PolicySettings).policy_mode == "shadow"
    assert s.plane(TasksSettings).task_state_replicas == 3
    assert s.plane(DecisionsSettings).embedding_dimensions == 768

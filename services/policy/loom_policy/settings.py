"""The policy plane's settings (entry point `loom.settings`: policy), read as
`settings.plane(PolicySettings)`; rendered into docs/configuration.md by `loom config docs`."""

from __future__ import annotations

from typing import Literal

from loom_core.settings import PlaneSettings
from pydantic import Field


class PolicySettings(PlaneSettings):
    policy_mode: Literal["off", "shadow", "enforce"] = Field(
        "off", description="History-policy gate: off (reads and writes nothing), shadow (logs decisions), enforce (denies)."
    )
    policy_max_window_seconds: int = Field(86400, description="Cap on a history-policy leaf's `within` window.")
    policy_cache_ttl_seconds: float = Field(30.0, description="Longest a replica serves a stale rule set (changes are also pushed).")
    policy_window_max_events: int = Field(
        200_000,
        description="Most events a replica keeps in memory per principal, op and outcome for history policies; a leaf reaching past the cut is decided only when the kept events decide it.",
    )

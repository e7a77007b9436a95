"""The insights plane's settings (entry point `loom.settings`: insights), read as
`settings.plane(InsightsSettings)`; rendered into docs/configuration.md by `loom config docs`."""

from __future__ import annotations

from loom_core.settings import PlaneSettings
from pydantic import Field

from .domain.entities import Caps

# The analyst profile's caps default to Caps' own values: one place holds them.
_CAPS = Caps()


class InsightsSettings(PlaneSettings):
    ch_analysis_write_entities: bool = Field(
        True,
        description="Write the analyst user, its profiles, grants and policies at boot when Loom's ClickHouse user has access management (else run `loom ch-setup`).",
    )
    ch_analysis_probe_interval_s: float = Field(
        60.0, description="Seconds between probes of the analysis boundary (one also runs at boot)."
    )
    ch_analysis_org_concurrency: int = Field(2, description="Most insights.query statements one org runs at once on a replica.")
    ch_analysis_row_cap: int = Field(1000, description="Rows insights.query returns; a longer result is cut and marked truncated.")
    ch_analysis_max_execution_time_s: int = Field(
        _CAPS.max_execution_time, description="The analyst profile's max_execution_time (MAX): seconds a statement may run."
    )
    ch_analysis_max_rows_to_read: int = Field(_CAPS.max_rows_to_read, description="The analyst profile's max_rows_to_read (MAX).")
    ch_analysis_max_memory_usage: int = Field(_CAPS.max_memory_usage, description="The analyst profile's max_memory_usage in bytes (MAX).")
    ch_analysis_max_result_rows: int = Field(
        _CAPS.max_result_rows, description="The analyst profile's max_result_rows (MAX), checked inside ClickHouse."
    )
    ch_analysis_max_threads: int = Field(_CAPS.max_threads, description="The analyst profile's max_threads (MAX).")
    ch_analysis_max_concurrent_queries: int = Field(
        _CAPS.max_concurrent_queries_for_user,
        description="The analyst profile's max_concurrent_queries_for_user: statements the analyst runs at once across every org.",
    )
    ch_analysis_lease_wait_s: float = Field(
        60.0, description="Longest a write of the analyst's entities waits for the analysis.entities lease."
    )
    ch_analysis_rotation_settle_s: float = Field(
        30.0,
        description="Seconds a key rotation waits for every ClickHouse server to apply its access changes where it cannot read each server's policies (and the printed rotation always waits); set it above the lag your ClickHouse shows for access changes.",
    )
    ch_analysis_doctor_probes: int = Field(
        24,
        description="Signed probes `loom doctor: analysis.boundary` sends, each on a new connection so a load balancer spreads them over the servers.",
    )

"""Every LOOM_* setting, with its default and meaning. `loom config docs` renders this to
docs/configuration.md; a test keeps the two in agreement."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="LOOM_", extra="ignore", frozen=True)

    # --- runtime
    data_dir: Path = Field(Path(".loom-data"), description="Embedded mode's data: chDB store, NATS JetStream store, admin socket.")
    http_host: str = Field("127.0.0.1", description="Address the gateway's HTTP server binds.")
    http_port: int = Field(8080, description="Port of the gateway's HTTP server (REST, MCP, health, metrics).")
    grpc_host: str = Field("127.0.0.1", description="Address the planes' gRPC servers bind.")
    grpc_port_base: int = Field(0, description="First gRPC port; plane i listens on base+i. 0 picks free ports (embedded).")
    plane_addresses: str = Field(
        "", description="Cluster mode: plane=host:port pairs, comma-separated, the gateway dials (e.g. tasks=tasks:7000)."
    )
    log_level: str = Field("INFO", description="Python log level.")

    # --- store
    clickhouse_url: str = Field(
        "", description="ClickHouse server (clickhouse://user:pass@host:9000/db). Empty: embedded chDB under LOOM_DATA_DIR."
    )
    clickhouse_database: str = Field("loom", description="Database holding Loom's tables.")

    # --- bus
    nats_url: str = Field("", description="NATS server URL. Empty: `loom up` starts a nats-server child process with JetStream.")
    nats_port: int = Field(0, description="Port of the embedded nats-server (0 picks a free one).")
    nats_sync_interval: str = Field(
        "always",
        description="JetStream's storage sync of the embedded nats-server: `always` (fsync every write before its ack) or an interval such as `2m` (faster; a machine crash may lose the last interval's acknowledged writes).",
    )
    nats_internal_user: str = Field(
        "",
        description="NATS user Loom's own connections authenticate as (an auth callout `auth_users` entry). Empty: connect without credentials. `loom up` sets one.",
    )
    nats_internal_password: str = Field(
        "", description="Password of LOOM_NATS_INTERNAL_USER. `loom up` generates one per start when empty."
    )
    nats_auth_callout_issuer_seed: str = Field(
        "",
        description="Account nkey seed (SA…) signing NATS auth callout answers. Set: every replica answers `$SYS.REQ.USER.AUTH`, so agents subscribe to task events with their Loom token. `loom up` generates one.",
    )
    nats_auth_agents_account: str = Field(
        "AGENTS",
        description="NATS account the auth callout places token-authenticated subscribers in (it imports `loom.tasks.>` from Loom's account).",
    )
    nats_auth_session_seconds: int = Field(
        3600,
        description="Longest a token-authenticated NATS connection lasts before the agent must connect again (a backstop: revocations and grant changes disconnect it at once).",
    )

    # --- identity
    jwt_secret: str = Field(
        "dev-insecure-change-me", description="HS256 key signing every Loom token. Set a long random value in production."
    )
    jwt_secret_previous: str = Field("", description="The key before the last rotation; tokens signed with it still verify.")
    token_default_ttl_seconds: int = Field(3600, description="Lifetime of a minted token when the call names none.")
    token_max_ttl_seconds: int = Field(30 * 86400, description="Longest lifetime a minted token may ask for.")
    bootstrap_token_ttl_seconds: int = Field(30 * 86400, description="Lifetime of the admin token `loom admin bootstrap` prints.")
    token_max_chain_depth: int = Field(4, description="Most ancestors a delegated token may have.")
    grant_cache_ttl_seconds: float = Field(
        5.0, description="How long a replica caches a subject's live grant (changes are also pushed over NATS)."
    )

    # --- rate classes (calls per minute per subject and class)
    rate_read_per_minute: int = Field(6000, description="Calls per minute per subject for read-class ops.")
    rate_write_per_minute: int = Field(3000, description="Calls per minute per subject for write-class ops.")
    rate_admin_per_minute: int = Field(600, description="Calls per minute per subject for admin-class ops.")
    rate_heavy_per_minute: int = Field(120, description="Calls per minute per subject for heavy-class ops.")

    # --- ledger
    ledger_flush_interval_seconds: float = Field(0.2, description="Longest a ledger row waits in memory before its batch is written.")
    ledger_batch_max_rows: int = Field(1000, description="Rows at which a ledger batch is written at once.")

    # --- policy
    policy_mode: Literal["off", "shadow", "enforce"] = Field(
        "off", description="History-policy gate: off (reads and writes nothing), shadow (logs decisions), enforce (denies)."
    )
    policy_max_window_seconds: int = Field(86400, description="Cap on a history-policy leaf's `within` window.")
    policy_cache_ttl_seconds: float = Field(30.0, description="Longest a replica serves a stale rule set (changes are also pushed).")
    policy_window_max_events: int = Field(
        200_000,
        description="Most events a replica keeps in memory per principal, op and outcome for history policies; a leaf reaching past the cut is decided only when the kept events decide it.",
    )

    # --- tasks
    task_lease_sweep_enabled: bool = Field(
        True,
        description="Runs the sweeper: expired leases, deferred tasks reaching resume_at, stale triage, finished tasks leaving NATS.",
    )
    task_webhook_deliver_enabled: bool = Field(True, description="Posts one signed notice per new event batch to an inbox's webhook_url.")
    task_sweep_interval_seconds: float = Field(
        1.0, description="Seconds between lease-sweep passes (expired leases, resume_at, triage escalation); one replica sweeps at a time."
    )
    task_terminal_retention_seconds: float = Field(
        900.0, description="How long a finished task stays in NATS (the truth) before it is served from the ClickHouse projection alone."
    )
    task_idempotency_window_seconds: float = Field(
        86400.0,
        description="How long a finished task's tombstone keeps its idempotency_key taken (a create with the key answers the task, not a new one).",
    )
    task_state_replicas: int = Field(
        1, description="JetStream replicas of the task state and event streams: 1 embedded, 3 in a cluster (see docs/operations/durability.md)."
    )
    task_pull_poll_seconds: float = Field(
        2.0,
        description="While a long poll waits, how often it re-reads the store besides the NATS wake-ups (a safety net for a lost wake-up).",
    )
    task_config_cache_ttl_seconds: float = Field(
        5.0, description="Longest a replica serves a stale inbox or trust row (changes are also pushed over NATS)."
    )
    task_events_max_age_seconds: int = Field(
        7 * 86400, description="How long task events stay in the LOOM_TASK_EVENTS stream (the task.updates cursor's reach)."
    )
    task_webhook_timeout_seconds: float = Field(5.0, description="Timeout of one webhook POST (connect is capped at 3 s).")
    task_webhook_max_attempts: int = Field(
        5, description="Attempts per webhook notice (a refused address, a redirect or a 4xx is not retried)."
    )
    task_webhook_retry_base_seconds: float = Field(1.0, description="First webhook retry delay; doubled per attempt, at most 30 s.")


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()


def render_markdown() -> str:
    """docs/configuration.md, generated from Settings."""
    lines = [
        "# Configuration",
        "",
        "Generated by `loom config docs` from `core/loom_core/settings.py`; do not edit by hand.",
        "Every setting is an environment variable.",
        "",
        "| Setting | Default | Meaning |",
        "|---|---|---|",
    ]
    for name, field in Settings.model_fields.items():
        default = field.default
        shown = "(empty)" if default == "" else str(default)
        lines.append(f"| `LOOM_{name.upper()}` | `{shown}` | {field.description} |")
    return "\n".join(lines) + "\n"

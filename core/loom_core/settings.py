"""Every LOOM_* setting, with its default and meaning. `loom config docs` renders this to
docs/configuration.md; a test keeps the two in agreement.

Core settings are `Settings` below: only what every process shares (runtime, store, bus,
identity, rate classes, ledger, cluster). A plane's own settings live with the plane: a
`PlaneSettings` subclass in its package (`loom_<plane>/settings.py`), registered under the
entry-point group `loom.settings` (`<plane> = "loom_<plane>.settings:<Class>"`). The plane
reads them with `settings.plane(<Class>)` (environment variables, `LOOM_` prefix, like core's);
`render_markdown` adds one section per registered class; tests override them like core
settings (`make_settings(data_dir, policy_mode="enforce")`: a name that is not a core field
goes to `plane_overrides`).
"""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, TypeVar

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from .local_secrets import DEFAULT_JWT_SECRET

SETTINGS_ENTRY_POINTS = "loom.settings"


class PlaneSettings(BaseSettings):
    """Base of a plane's own settings (read from LOOM_* environment variables)."""

    model_config = SettingsConfigDict(env_prefix="LOOM_", extra="ignore", frozen=True)


P = TypeVar("P", bound=PlaneSettings)


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
    # --- planes (not an environment variable: see the module docstring)
    plane_overrides: dict[str, Any] = Field(
        default_factory=dict, exclude=True, description="Values for plane settings by field name, over the environment (tests)."
    )

    def plane(self, cls: type[P]) -> P:
        """A plane's own settings: the environment, overridden by `plane_overrides`."""
        known = cls.model_fields
        return cls(**{k: v for k, v in self.plane_overrides.items() if k in known})

    # --- store
    clickhouse_url: str = Field(
        "", description="ClickHouse server (clickhouse://user:pass@host:9000/db). Empty: embedded chDB under LOOM_DATA_DIR."
    )
    clickhouse_database: str = Field("loom", description="Database holding Loom's tables.")
    # The engine's own default (loom_core/store/embedded.py THREAD_NICE; tests/core/test_settings.py checks they agree).
    chdb_thread_nice: int = Field(
        10,
        ge=0,
        le=19,
        description="The nice value of the embedded store's threads (Linux), below the event loop's 0: on a machine whose cores are all busy, calls on the loop run first and chDB's statements wait. 0 runs them at the loop's priority.",
    )

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
        DEFAULT_JWT_SECRET,
        description="HS256 key signing every Loom token, at least 32 bytes. `loom up` generates one into LOOM_DATA_DIR/secrets.json (mode 0600) when unset; `loom serve` refuses the default or a shorter one.",
    )
    jwt_secret_previous: str = Field("", description="The key before the last rotation; tokens signed with it still verify.")
    token_default_ttl_seconds: int = Field(3600, description="Lifetime of a minted token when the call names none.")
    token_max_ttl_seconds: int = Field(30 * 86400, description="Longest lifetime a minted token may ask for.")
    bootstrap_token_ttl_seconds: int = Field(30 * 86400, description="Lifetime of the admin token `loom admin bootstrap` prints.")
    token_max_chain_depth: int = Field(4, description="Most ancestors a delegated token may have.")
    revocation_prune_interval_seconds: float = Field(
        3600.0,
        description="Seconds between prunes of revocations older than the longest token lifetime (one replica deletes the rows under a cluster lease; every replica forgets them).",
    )
    grant_cache_ttl_seconds: float = Field(
        5.0, description="How long a replica caches a subject's live grant (changes are also pushed over NATS)."
    )

    # --- rate classes (calls per minute per subject and class)
    rate_read_per_minute: int = Field(6000, description="Calls per minute per subject for read-class ops.")
    rate_write_per_minute: int = Field(3000, description="Calls per minute per subject for write-class ops.")
    rate_admin_per_minute: int = Field(600, description="Calls per minute per subject for admin-class ops.")
    rate_heavy_per_minute: int = Field(120, description="Calls per minute per subject for heavy-class ops.")
    rate_insights_per_minute: int = Field(
        60, description="Calls per minute per subject for insights.query (its own rate class, `insights`)."
    )
    rate_chat_per_minute: int = Field(
        30, description="Chats per minute per subject on POST /v1/assistant/chat/completions (its own rate class, `chat`)."
    )

    # --- ledger
    # 0.5 s, not longer: a row stays readable within a second under load, and a whole assistant
    # answer that cites nothing re-reads its calls after this interval (spec 000).
    ledger_flush_interval_seconds: float = Field(
        0.5,
        description="Longest a ledger row waits in memory before its batch is written: at most one batch per interval unless "
        "LOOM_LEDGER_BATCH_MAX_ROWS fill first, and the first row after a quiet interval goes at once.",
    )
    ledger_batch_max_rows: int = Field(5000, description="Rows at which a ledger batch is written at once.")

    # --- cluster
    clickhouse_cluster: str = Field(
        "",
        description="ClickHouse cluster name (a `remote_servers` entry). Set: migrations create the database and tables `ON CLUSTER` with `Replicated*MergeTree` engines. Needs LOOM_CLICKHOUSE_URL.",
    )
    nats_replicas: int = Field(1, description="JetStream replicas of the streams and KV buckets Loom creates (3 on a 3-node NATS cluster).")
    # The bus's own defaults (loom_core/bus/nats.py, tests/core/test_settings.py checks they agree),
    # written here since importing the bus would load faststream into every CLI command.
    nats_request_timeout_seconds: float = Field(
        5.0,
        gt=0,
        description="How long a JetStream request (a KV read or write, a stream publish's acknowledgement) waits for its answer before the call fails with a retryable 503.",
    )
    nats_graceful_stop_seconds: float = Field(
        5.0,
        ge=0,
        description="How long a replica's stop waits for the bus handlers still running (a delivery, a projection's batch) to finish before it cuts them off.",
    )
    nats_startup_seconds: float = Field(
        60.0,
        ge=0,
        description="How long a replica starting waits for JetStream to answer its first request (a NATS cluster still electing its leader, or catching up) before it exits.",
    )


def plane_settings_classes() -> dict[str, type[PlaneSettings]]:
    """Every installed plane's settings class, by plane name (entry-point group `loom.settings`)."""
    out: dict[str, type[PlaneSettings]] = {}
    for ep in sorted(entry_points(group=SETTINGS_ENTRY_POINTS), key=lambda e: e.name):
        cls = ep.load()
        if not (isinstance(cls, type) and issubclass(cls, PlaneSettings)):
            raise TypeError(f"entry point {SETTINGS_ENTRY_POINTS}:{ep.name} is not a PlaneSettings subclass")
        out[ep.name] = cls
    return out


def setting_names() -> list[str]:
    """Every LOOM_* environment variable: core's and every installed plane's."""
    names = [n for n in Settings.model_fields if n != "plane_overrides"]
    for cls in plane_settings_classes().values():
        names += list(cls.model_fields)
    return [f"LOOM_{n.upper()}" for n in names]


def _rows(fields: dict[str, Any]) -> list[str]:
    lines = ["| Setting | Default | Meaning |", "|---|---|---|"]
    for name, field in fields.items():
        default = field.default
        shown = "(empty)" if default == "" else str(default)
        lines.append(f"| `LOOM_{name.upper()}` | `{shown}` | {field.description} |")
    return lines


def render_markdown() -> str:
    """docs/configuration.md, generated from Settings and every plane's PlaneSettings."""
    lines = [
        "# Configuration",
        "",
        "Generated by `loom config docs` from `core/loom_core/settings.py`; do not edit by hand.",
        "Every setting is an environment variable.",
        "",
        *_rows({n: f for n, f in Settings.model_fields.items() if n != "plane_overrides"}),
    ]
    for plane, cls in plane_settings_classes().items():
        module = cls.__module__.replace(".", "/")
        lines += ["", f"## {plane}", "", f"From `{module}.py` (`{cls.__name__}`).", "", *_rows(dict(cls.model_fields))]
    return "\n".join(lines) + "\n"
